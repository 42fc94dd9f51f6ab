"""The AM handler registry and its codec."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nicd.errors import BadPacket
from nicd.grim.amregistry import (
    MAX_HANDLER_ID,
    MAX_NAME_BYTES,
    Registry,
    decode_reply,
    decode_request,
    encode_reply,
    encode_request,
    reply_size_bound,
)


def test_ids_are_stable_and_assigned_in_publication_order() -> None:
    r = Registry()
    assert r.publish(["x", "y"]) == {"x": 1, "y": 2}
    assert r.publish(["y", "z", "x"]) == {"x": 1, "y": 2, "z": 3}
    assert r.table() == {"x": 1, "y": 2, "z": 3}
    stats = r.stats()
    assert (stats["handlers"], stats["syncs"], stats["lookups"]) == (3, 2, 1)


def test_requests_round_trip_and_lookups_assign_nothing() -> None:
    r = Registry()
    r.publish(["a"])
    req, table = decode_reply(r.on_request(encode_request("lookup", 9, ["b"])))
    assert (req, table) == (9, {"a": 1})
    assert decode_request(encode_request("sync", 3, ["q"])) == ("sync", 3, ["q"])


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\xc1",
        msgpack.packb([1]),
        msgpack.packb({"op": "drop", "req": 1, "names": []}),
        msgpack.packb({"op": "sync", "req": "1", "names": []}),
        msgpack.packb({"op": "sync", "req": 1, "names": [1]}),
    ],
)
def test_malformed_requests_raise_bad_packet(payload: bytes) -> None:
    with pytest.raises(BadPacket):
        Registry().on_request(payload)


def test_malformed_replies_raise_bad_packet() -> None:
    for payload in (b"\xc1", msgpack.packb({"req": 1, "table": {"a": "b"}}), msgpack.packb(3)):
        with pytest.raises(BadPacket):
            decode_reply(payload)


def test_the_id_space_is_bounded() -> None:
    r = Registry()
    r._ids = {f"n{i}": i + 1 for i in range(MAX_HANDLER_ID)}
    assert "extra" not in r.publish(["extra"])


def test_a_table_that_would_outgrow_the_largest_reply_refuses_new_names() -> None:
    r = Registry(max_reply=4096)
    names = [f"handler_{i:04d}_" + "x" * 30 for i in range(500)]
    table = r.publish(names)
    assert 0 < len(table) < 500
    assert r.refused_full == 500 - len(table)
    reply = r.on_request(encode_request("lookup", 0xFFFFFFFF, []))
    assert len(reply) <= 4096  # never more than a message holds, never truncated
    assert decode_reply(reply)[1] == table
    assert r.publish(["late_" + "x" * 40]) == table  # the flood is over: ids stay, no more
    assert r.refused_full == 500 - len(table) + 1


def test_names_longer_than_the_limit_are_refused() -> None:
    r = Registry()
    table = r.publish(["ok", "y" * (MAX_NAME_BYTES + 1), "\u00e9" * (MAX_NAME_BYTES // 2 + 1)])
    assert table == {"ok": 1}
    assert r.refused_long == 2


@given(st.lists(st.text(max_size=300), max_size=60), st.integers(0, 0xFFFFFFFF))
def test_the_reply_size_bound_holds(names: list[str], req: int) -> None:
    r = Registry(max_reply=2048)
    table = r.publish(names)
    reply = encode_reply(req, table)
    assert len(reply) <= reply_size_bound(table) <= 2048
