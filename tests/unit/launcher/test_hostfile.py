"""launcher.multihost.hostfile: hostfile and --host parsing, rank mapping (slot and node)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from launcher.errors import UsageError
from launcher.multihost.hostfile import HostSpec, map_ranks, parse_host_list, parse_hostfile


def test_hostfile_lines_comments_and_slots() -> None:
    text = """
    # the lab
    node1 slots=2   # two nodes here
    node2
    198.18.7.12:3
    node1 slots=1 max_slots=4
    """
    assert parse_hostfile(text) == [
        HostSpec("node1", 2), HostSpec("node2", 1), HostSpec("198.18.7.12", 3),
        HostSpec("node1", 1),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "match"),
    [("", "no hosts"), ("# only\n", "no hosts"), ("a slots=0", "slots"), ("a slots=x", "slots"),
     ("a cpus=2", "unknown field"), ("a:b", "slots"), ("a;rm", "bad host"), ("a\nb slot=2", ":2")],
)  # fmt: skip
def test_bad_hostfiles_name_the_line(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        parse_hostfile(text, "hf")


def test_host_list() -> None:
    assert parse_host_list("a:2,b") == [HostSpec("a", 2), HostSpec("b", 1)]
    for bad in ("", "a,,b", "a:0", ","):
        with pytest.raises(UsageError):
            parse_host_list(bad)


def test_map_by_slot_fills_each_host_first() -> None:
    hosts = [HostSpec("a", 2), HostSpec("b", 2), HostSpec("c", 2)]
    assert map_ranks(hosts, None, "slot") == [[0, 1], [2, 3], [4, 5]]
    assert map_ranks(hosts, 3, "slot") == [[0, 1], [2], []]


def test_map_by_node_deals_round_robin_skipping_full_hosts() -> None:
    hosts = [HostSpec("a", 1), HostSpec("b", 3), HostSpec("c", 2)]
    assert map_ranks(hosts, None, "node") == [[0], [1, 3, 5], [2, 4]]
    assert map_ranks(hosts, 2, "node") == [[0], [1], []]


def test_more_ranks_than_slots_is_refused() -> None:
    with pytest.raises(UsageError, match="needs 5 slots but the hosts have 4"):
        map_ranks([HostSpec("a", 2), HostSpec("b", 2)], 5, "slot")


@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=6),
    st.sampled_from(["slot", "node"]),
    st.data(),
)
def test_every_rank_on_exactly_one_host_within_its_slots(
    slots: list[int], by: str, data: st.DataObject
) -> None:
    hosts = [HostSpec(f"h{i}", n) for i, n in enumerate(slots)]
    np_ = data.draw(st.integers(1, sum(slots)))
    ranks = map_ranks(hosts, np_, by)  # type: ignore[arg-type]
    assert sorted(r for rs in ranks for r in rs) == list(range(np_))
    assert all(len(rs) <= h.slots for rs, h in zip(ranks, hosts, strict=True))
