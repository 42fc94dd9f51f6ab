"""Topology arithmetic (emucluster.mpi.topo.topology) and the neighbour exchange, no processes."""

from __future__ import annotations

from collections import Counter
from math import prod

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emucluster.coll.context import TAG_LIMIT, simulate
from emucluster.mpi.constants import PROC_NULL, UNDEFINED
from emucluster.mpi.topo.topocomm import neighbor_exchange
from emucluster.mpi.topo.topology import (
    CART,
    CartTopo,
    DistGraphTopo,
    GraphTopo,
    TopoError,
    Topology,
    compute_dims,
    dist_graph_edges,
    exchange_tags,
    graph_from_index,
)


@pytest.mark.parametrize(
    ("nnodes", "dims", "expected"),
    [
        (12, [0, 0], [4, 3]),
        (16, [0, 0, 0], [4, 2, 2]),
        (1, [0, 0], [1, 1]),
        (7, [0, 0], [7, 1]),
        (12, [0, 3], [4, 3]),
        (24, [2, 0, 0], [2, 4, 3]),
        (6, [3, 2], [3, 2]),
        (1, [], []),
    ],
)
def test_compute_dims_known(nnodes: int, dims: list[int], expected: list[int]) -> None:
    assert compute_dims(nnodes, dims) == expected


def test_compute_dims_rejects() -> None:
    with pytest.raises(TopoError):
        compute_dims(7, [2, 0])
    with pytest.raises(TopoError):
        compute_dims(6, [4, 2])
    with pytest.raises(TopoError):
        compute_dims(4, [-1, 0])


@given(st.integers(1, 720), st.integers(1, 5))
def test_compute_dims_product_and_order(nnodes: int, ndims: int) -> None:
    dims = compute_dims(nnodes, [0] * ndims)
    assert prod(dims) == nnodes
    assert dims == sorted(dims, reverse=True)


def test_cart_coords_rank_row_major() -> None:
    cart = CartTopo.build([2, 3], [False, True], 6)
    assert [cart.coords(r) for r in range(6)] == [
        [0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2],
    ]  # fmt: skip
    assert cart.rank([1, 4]) == 4  # periodic dimension wraps
    with pytest.raises(TopoError):
        cart.rank([2, 0])  # non-periodic dimension does not


def test_cart_shift_and_neighbors() -> None:
    cart = CartTopo.build([3, 2], [False, True], 6)
    assert cart.shift(0, 0, 1) == (PROC_NULL, 2)
    assert cart.shift(4, 0, 1) == (2, PROC_NULL)
    assert cart.shift(0, 1, 1) == (1, 1)
    assert cart.neighbors(2) == [0, 4, 3, 3]


def test_cart_build_rejects() -> None:
    with pytest.raises(TopoError):
        CartTopo.build([2], [], 2)
    with pytest.raises(TopoError):
        CartTopo.build([2], [True, True], 2)
    with pytest.raises(TopoError):
        CartTopo.build([3], None, 2)
    assert CartTopo.build([2], True, 3).map_rank(2) == UNDEFINED


def test_cart_sub_split() -> None:
    cart = CartTopo.build([2, 3], [True, False], 6)
    sub, color, key = cart.sub_split(5, [False, True])
    assert (sub.dims, sub.periods, color, key) == ((3,), (False,), 1, 2)
    sub, color, key = cart.sub_split(5, [True, False])
    assert (sub.dims, color, key) == ((2,), 2, 1)
    sub, color, key = cart.sub_split(5, [False, False])
    assert (sub.dims, sub.nnodes, key) == ((), 1, 0)


def test_graph_index_forms() -> None:
    assert graph_from_index([0, 2, 4], [1, 1, 0, 0]) == ([2, 4], [1, 1, 0, 0])
    assert graph_from_index([2, 4], [1, 1, 0, 0]) == ([2, 4], [1, 1, 0, 0])
    graph = GraphTopo.build([2, 3], [1, 1, 0], 2)
    assert graph.neighbors(0) == [1, 1]
    assert graph.neighbors(1) == [0]
    with pytest.raises(TopoError):
        GraphTopo.build([2, 1], [0, 0], 2)
    with pytest.raises(TopoError):
        GraphTopo.build([1], [5], 2)


def test_dist_graph_edges_order_and_weights() -> None:
    specs = [[(0, 1, 7), (0, 0, 8)], [(1, 0, 9)]]
    view = dist_graph_edges(specs, 0, True, 2)
    assert view == DistGraphTopo((0, 1), (1, 0), (8, 9), (7, 8))
    assert dist_graph_edges(specs, 1, False, 2).source_weights is None
    with pytest.raises(TopoError):
        dist_graph_edges([[(0, 3, 1)]], 0, False, 2)


def _topologies(size: int) -> list[list[Topology]]:
    """Each entry: one topology per rank of a communicator of ``size``."""
    out: list[list[Topology]] = []
    for dims, periods in ([[size], [True]], [[size], [False]], [[size, 1], [True, True]]):
        out.append([CartTopo.build(dims, periods, size)] * size)
    ring_index = [2 * (i + 1) for i in range(size)]
    ring_edges = [e for i in range(size) for e in ((i - 1) % size, (i + 1) % size)]
    out.append([GraphTopo.build(ring_index, ring_edges, size)] * size)
    # every rank sends twice to its right neighbour and once to itself
    specs = [[(r, (r + 1) % size, 1), (r, (r + 1) % size, 1), (r, r, 1)] for r in range(size)]
    out.append([dist_graph_edges(specs, r, False, size) for r in range(size)])
    return out


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_exchange_tags_pair_up(size: int) -> None:
    for topos in _topologies(size):
        sent: Counter[tuple[int, int, int]] = Counter()
        wanted: Counter[tuple[int, int, int]] = Counter()
        for rank, topo in enumerate(topos):
            sends, recvs = exchange_tags(topo, rank, TAG_LIMIT)
            sent.update((rank, peer, tag) for peer, tag in sends if peer != PROC_NULL)
            wanted.update((peer, rank, tag) for peer, tag in recvs if peer != PROC_NULL)
        assert sent == wanted


@pytest.mark.parametrize("size", [1, 2, 3])
def test_neighbor_alltoall_blocks_land_by_direction(size: int) -> None:
    """Cartesian alltoall: the block a rank sends toward +1 arrives in the neighbour's -1
    block, even when both neighbours are the same process (size 1 and 2, periodic)."""
    cart = CartTopo.build([size], [True], size)
    assert cart.kind == CART

    def args(rank: int) -> tuple[object, ...]:
        sends, recvs = exchange_tags(cart, rank, TAG_LIMIT)
        return sends, recvs, [f"{rank}:minus".encode(), f"{rank}:plus".encode()]

    results = simulate(neighbor_exchange, size, args)
    for rank, got in enumerate(results):
        left, right = (rank - 1) % size, (rank + 1) % size
        assert got == [f"{left}:plus".encode(), f"{right}:minus".encode()]


def test_neighbor_exchange_skips_proc_null() -> None:
    cart = CartTopo.build([2], [False], 2)

    def args(rank: int) -> tuple[object, ...]:
        sends, recvs = exchange_tags(cart, rank, TAG_LIMIT)
        return sends, recvs, [b"m%d" % rank, b"p%d" % rank]

    assert simulate(neighbor_exchange, 2, args) == [[None, b"m1"], [b"p0", None]]
