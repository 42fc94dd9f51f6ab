"""offload/nic_mcast/trees.py: spanning, one parent, the §5.4 id rule, postal optimality by
brute force."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emucluster.offload.nic_mcast.trees import (
    PostalCosts,
    Tree,
    binomial_tree,
    completion_time,
    flat_tree,
    member_order,
    postal_fanout,
    postal_tree,
    receive_times,
)

members_st = st.sets(st.integers(0, 200), min_size=1, max_size=40)


@st.composite
def groups(draw: st.DrawFn) -> tuple[int, list[int]]:
    members = sorted(draw(members_st))
    root = draw(st.sampled_from(members))
    return root, members


costs_st = st.tuples(st.integers(1, 50), st.integers(0, 50))  # (L, g) small integers: exact sums


def check_tree(tree: Tree, root: int, members: list[int]) -> None:
    assert tree.root == root
    assert tree.members == frozenset(members)
    assert tree.order == (root, *sorted(set(members) - {root}))
    assert tree.parent(root) is None
    reached = {root}
    frontier = [root]
    while frontier:  # spanning, and nobody is reached twice
        node = frontier.pop()
        for child in tree.children(node):
            assert child not in reached
            assert tree.parent(child) == node
            reached.add(child)
            frontier.append(child)
    assert reached == set(members)
    for node in members:
        if node == root:
            continue
        parent = tree.parent(node)
        assert parent is not None
        assert node in tree.children(parent)  # exactly one parent lists it
        assert sum(node in tree.children(p) for p in members) == 1
        if parent != root:
            assert parent < node  # §5.4: children have larger ids unless the parent is the root


@given(groups())
def test_binomial_spans_with_the_id_rule(group: tuple[int, list[int]]) -> None:
    root, members = group
    check_tree(binomial_tree(root, members), root, members)


@given(groups())
def test_flat_spans_with_the_id_rule(group: tuple[int, list[int]]) -> None:
    root, members = group
    tree = flat_tree(root, members)
    check_tree(tree, root, members)
    assert tree.depth() == (1 if len(members) > 1 else 0)


@given(groups(), costs_st)
def test_postal_spans_with_the_id_rule(
    group: tuple[int, list[int]], costs: tuple[int, int]
) -> None:
    root, members = group
    latency, gap = costs
    check_tree(postal_tree(root, members, latency, gap), root, members)


@given(groups(), costs_st)
def test_postal_never_slower_than_binomial_or_flat(
    group: tuple[int, list[int]], costs: tuple[int, int]
) -> None:
    root, members = group
    latency, gap = costs
    best = completion_time(postal_tree(root, members, latency, gap), latency, gap)
    assert best <= completion_time(binomial_tree(root, members), latency, gap)
    assert best <= completion_time(flat_tree(root, members), latency, gap)


def brute_force_best(n: int, latency: int, gap: int) -> int:
    """Minimum completion time over every tree on ``n`` nodes and every sending order.

    Completion depends only on the shape and each node's sending order, and relabelling nodes by
    arrival order makes every parent precede its children, with siblings in sending order: so
    "parent of position i is any position < i, siblings sent in position order" covers them all.
    """
    best = math.inf
    for parents in itertools.product(*(range(i) for i in range(1, n))):
        times = [0] * n
        sent = [0] * n
        for i, p in enumerate(parents, start=1):
            times[i] = times[p] + latency + sent[p] * gap
            sent[p] += 1
        best = min(best, max(times))
    return int(best)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), costs_st)
def test_postal_matches_brute_force(n: int, costs: tuple[int, int]) -> None:
    latency, gap = costs
    tree = postal_tree(0, range(n), latency, gap)
    assert completion_time(tree, latency, gap) == brute_force_best(n, latency, gap)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13, 16, 31, 64])
def test_equal_costs_give_binomial_completion(n: int) -> None:
    # L == g: every informed node doubles per step, as the binomial tree does.
    optimal = postal_tree(0, range(n), 1, 1)
    binomial = binomial_tree(0, range(n))
    assert completion_time(optimal, 1, 1) == completion_time(binomial, 1, 1)
    assert completion_time(binomial, 1, 1) == (n - 1).bit_length()
    assert len(optimal.children(0)) == len(binomial.children(0)) == (n - 1).bit_length()


@given(st.integers(2, 40), costs_st)
def test_cheap_extra_sends_give_a_flat_tree(n: int, costs: tuple[int, int]) -> None:
    latency, gap = costs
    tree = postal_tree(0, range(n), latency, gap)
    if latency > (n - 2) * gap:  # the root's last send still lands before any forward could
        assert tree.children(0) == tuple(range(1, n))
    if gap > 0 and latency < (n - 2) * gap:
        assert tree.depth() >= 2


@given(st.integers(2, 60), st.integers(1, 40), st.integers(1, 40), st.integers(1, 40))
def test_root_fanout_grows_with_latency_over_gap(n: int, gap: int, l1: int, l2: int) -> None:
    lo, hi = sorted((l1, l2))
    fan_lo = len(postal_tree(0, range(n), lo, gap).children(0))
    fan_hi = len(postal_tree(0, range(n), hi, gap).children(0))
    assert fan_lo <= fan_hi


@given(st.integers(1, 40), st.integers(1, 40))
def test_fanout_follows_the_ratio(latency: int, gap: int) -> None:
    # With plenty of members, the root sends to exactly postal_fanout(L, g) children whose
    # copies arrive no later than its first child's first forward (time 2L).
    k = postal_fanout(latency, gap)
    tree = postal_tree(0, range(200), latency, gap)
    times = receive_times(tree, latency, gap)
    early = [c for c in tree.children(0) if times[c] <= 2 * latency]
    assert len(early) == k
    assert k == math.floor(latency / gap) + 1


def test_tree_depends_on_message_size() -> None:
    # A per-byte send cost that grows faster than latency narrows the tree for big messages.
    costs = PostalCosts(latency_s=20e-6, gap_s=2e-6, latency_per_byte_s=1e-9, gap_per_byte_s=8e-9)
    small = costs.tree(0, range(16), 8)
    large = costs.tree(0, range(16), 16384)
    assert len(small.children(0)) > len(large.children(0))
    assert small.depth() < large.depth()


def test_member_order_and_errors() -> None:
    assert member_order(7, [9, 3, 7, 3, 12]) == (7, 3, 9, 12)
    with pytest.raises(ValueError, match="root"):
        member_order(1, [2, 3])
    with pytest.raises(ValueError, match="latency"):
        postal_tree(0, [0, 1], 0, 1)
    with pytest.raises(ValueError, match="gap"):
        postal_tree(0, [0, 1], 1, -1)
    with pytest.raises(ValueError, match="not a member"):
        binomial_tree(0, [0, 1]).children(5)


def test_single_member_tree() -> None:
    for tree in (binomial_tree(4, [4]), flat_tree(4, [4]), postal_tree(4, [4], 1.0, 0.5)):
        assert tree.children(4) == ()
        assert tree.parent(4) is None
        assert tree.depth() == 0
        assert completion_time(tree, 1.0, 0.5) == 0.0


def test_root_in_the_middle_keeps_the_rule() -> None:
    tree = binomial_tree(5, range(8))
    assert tree.order == (5, 0, 1, 2, 3, 4, 6, 7)
    assert tree.children(5) == (3, 1, 0)  # positions 4, 2, 1: farthest first
    assert tree.parent(4) == 3
