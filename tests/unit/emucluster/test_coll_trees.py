"""Properties of the pure rank arithmetic in emucluster.coll.trees, for sizes 1..40, all roots."""

from __future__ import annotations

from collections import Counter, deque

import pytest

from emucluster.coll import trees
from emucluster.coll.trees import (
    absolute_rank,
    binomial_children,
    binomial_parent,
    binomial_subtree,
    ceil_log2,
    dissemination_peers,
    fold_partner,
    pairwise_peers,
    pof2_ceil,
    pof2_floor,
    rd_new_rank,
    rd_old_rank,
    relative_rank,
)

SIZES = range(1, 41)


def test_powers_of_two() -> None:
    assert [pof2_floor(n) for n in range(1, 10)] == [1, 2, 2, 4, 4, 4, 4, 8, 8]
    assert [pof2_ceil(n) for n in range(1, 10)] == [1, 2, 4, 4, 8, 8, 8, 8, 16]
    assert [ceil_log2(n) for n in range(1, 10)] == [0, 1, 2, 2, 3, 3, 3, 3, 4]
    for bad in (pof2_floor, pof2_ceil, ceil_log2):
        with pytest.raises(ValueError, match="n >= 1"):
            bad(0)


@pytest.mark.parametrize(
    ("rank", "root", "size"), [(-1, 0, 4), (4, 0, 4), (0, 4, 4), (0, -1, 4), (0, 0, 0)]
)
def test_bad_ranks_raise(rank: int, root: int, size: int) -> None:
    with pytest.raises(ValueError, match=r"rank|size"):
        binomial_children(rank, root, size)


@pytest.mark.parametrize("size", SIZES)
def test_binomial_tree_reaches_every_rank_once(size: int) -> None:
    for root in range(size):
        assert binomial_parent(root, root, size) is None
        seen: Counter[int] = Counter([root])
        queue = deque([root])
        while queue:
            rank = queue.popleft()
            for child in binomial_children(rank, root, size):
                assert binomial_parent(child, root, size) == rank
                seen[child] += 1
                queue.append(child)
        assert seen == Counter(range(size)), f"root {root}"
        # every non-root rank has a parent that lists it
        for rank in range(size):
            parent = binomial_parent(rank, root, size)
            if rank != root:
                assert parent is not None
                assert rank in binomial_children(parent, root, size)


@pytest.mark.parametrize("size", SIZES)
def test_parents_precede_children_and_depth_is_logarithmic(size: int) -> None:
    for root in range(size):
        # Broadcast schedule: a rank that holds the data at step t sends to its children at
        # steps t+1, t+2, ... in the listed order (largest subtree first).
        ready = {root: 0}
        queue = deque([root])
        while queue:
            rank = queue.popleft()
            for i, child in enumerate(binomial_children(rank, root, size), start=1):
                assert relative_rank(child, root, size) > relative_rank(rank, root, size)
                ready[child] = ready[rank] + i
                queue.append(child)
        assert max(ready.values()) == ceil_log2(size)


@pytest.mark.parametrize("size", SIZES)
def test_tree_is_root_relative(size: int) -> None:
    for root in range(size):
        for rank in range(size):
            v = relative_rank(rank, root, size)
            assert absolute_rank(v, root, size) == rank
            shifted = [absolute_rank(c, root, size) for c in binomial_children(v, 0, size)]
            assert binomial_children(rank, root, size) == shifted
            parent0 = binomial_parent(v, 0, size)
            parent = binomial_parent(rank, root, size)
            assert parent == (None if parent0 is None else absolute_rank(parent0, root, size))


@pytest.mark.parametrize("size", SIZES)
def test_subtrees_are_contiguous_and_children_split_them_in_order(size: int) -> None:
    for root in range(size):
        assert binomial_subtree(root, root, size) == range(size)
        for rank in range(size):
            sub = binomial_subtree(rank, root, size)
            assert sub.start == relative_rank(rank, root, size)
            nearest_first = binomial_children(rank, root, size)[::-1]
            covered = [sub.start]
            for child in nearest_first:  # each child's range follows what came before
                covered.extend(binomial_subtree(child, root, size))
            assert covered == list(sub), f"rank {rank} root {root}"
            children = binomial_children(rank, root, size)
            distances = [relative_rank(c, rank, size) for c in children]
            assert distances == sorted(distances, reverse=True)  # farthest first
            assert all(d & (d - 1) == 0 for d in distances)  # powers of two


@pytest.mark.parametrize("size", SIZES)
def test_dissemination_rounds_pair_up(size: int) -> None:
    rounds = [dissemination_peers(rank, size) for rank in range(size)]
    assert all(len(r) == ceil_log2(size) for r in rounds)
    for k in range(ceil_log2(size)):
        for rank in range(size):
            send_to, recv_from = rounds[rank][k]
            assert rounds[send_to][k][1] == rank
            assert rounds[recv_from][k][0] == rank
            assert send_to != rank


@pytest.mark.parametrize("size", SIZES)
def test_pairwise_steps_are_permutations_covering_every_pair(size: int) -> None:
    sent: set[tuple[int, int]] = set()
    for step in range(1, size):
        peers = [pairwise_peers(rank, size, step) for rank in range(size)]
        assert sorted(send_to for send_to, _ in peers) == list(range(size))
        for rank, (send_to, recv_from) in enumerate(peers):
            assert peers[send_to][1] == rank
            assert recv_from != rank
            sent.add((rank, send_to))
    assert sent == {(a, b) for a in range(size) for b in range(size) if a != b}
    with pytest.raises(ValueError, match="step"):
        pairwise_peers(0, size, size)


@pytest.mark.parametrize("size", SIZES)
def test_recursive_doubling_fold_keeps_rank_order(size: int) -> None:
    pof2 = pof2_floor(size)
    new = {rank: rd_new_rank(rank, size) for rank in range(size)}
    kept = sorted(n for n in new.values() if n is not None)
    assert kept == list(range(pof2))
    blocks: list[list[int]] = []
    for n in range(pof2):
        old = rd_old_rank(n, size)
        assert new[old] == n
        partner = fold_partner(old, size)
        if partner is not None:
            assert new[partner] is None
            assert fold_partner(partner, size) == old
            assert partner == old - 1  # the dropped rank is the lower: it combines on the left
        blocks.append(sorted({old} | ({partner} if partner is not None else set())))
    assert [rank for block in blocks for rank in block] == list(range(size))
    with pytest.raises(ValueError, match="doubling rank"):
        rd_old_rank(pof2, size)


def test_module_exports() -> None:
    assert set(trees.__all__) <= set(dir(trees))
