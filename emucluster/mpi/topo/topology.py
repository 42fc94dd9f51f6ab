"""Virtual topologies as data: Cartesian grids, graphs and distributed graphs (pure arithmetic).

*Invariants*: a topology is immutable once built and knows nothing of processes or
communicators; ranks are ranks of the communicator it is attached to. Cartesian ranks are
row-major (the last dimension varies fastest), as MPI specifies. A Cartesian neighbourhood
is, per dimension, the -1 neighbour then the +1 neighbour (PROC_NULL off a non-periodic edge);
a graph's in- and out-neighbours are its adjacency list. Bad arguments raise ``TopoError``
(the MPI surface turns them into ``ValueError`` or ``MPI.Exception`` as mpi4py does).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

from emucluster.mpi.constants import PROC_NULL, UNDEFINED

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CART",
    "DIST_GRAPH",
    "GRAPH",
    "CartTopo",
    "DistGraphTopo",
    "GraphTopo",
    "TopoError",
    "Topology",
    "compute_dims",
    "dist_graph_edges",
    "exchange_tags",
    "graph_from_index",
]

GRAPH = 1  # MPICH's MPI_GRAPH
CART = 2  # MPICH's MPI_CART
DIST_GRAPH = 3  # MPICH's MPI_DIST_GRAPH


class TopoError(ValueError):
    """Raised by the constructors and queries here for arguments MPI calls erroneous; ``field``
    names the offending argument (the caller maps it to ERR_DIMS, ERR_ARG, ERR_RANK...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _factors(n: int) -> list[int]:
    """Prime factors of ``n`` in decreasing order."""
    out: list[int] = []
    p = 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return sorted(out, reverse=True)


def compute_dims(nnodes: int, dims: Sequence[int]) -> list[int]:
    """MPI_Dims_create: fill the zero entries of ``dims`` so the product is ``nnodes``, as
    balanced as possible and non-increasing; nonzero entries stay."""
    if nnodes < 0:
        raise TopoError("nnodes", f"negative number of nodes {nnodes}")
    if any(d < 0 for d in dims):
        raise TopoError("dims", f"negative dimension in {list(dims)}")
    fixed = prod(d for d in dims if d > 0)
    free = [i for i, d in enumerate(dims) if d == 0]
    if nnodes == 0:  # an empty grid: the free dimensions are empty
        return [int(d) for d in dims]
    if nnodes % fixed:
        raise TopoError("dims", f"{nnodes} nodes do not divide into fixed dims {list(dims)}")
    rest = nnodes // fixed
    if not free:
        if rest != 1:
            raise TopoError("dims", f"dims {list(dims)} do not multiply to {nnodes}")
        return list(dims)
    chosen = [1] * len(free)
    for f in _factors(rest):
        chosen[chosen.index(min(chosen))] *= f
    chosen.sort(reverse=True)
    out = list(dims)
    for i, d in zip(free, chosen, strict=True):
        out[i] = d
    return out


@dataclass(frozen=True, slots=True)
class CartTopo:
    """A Cartesian grid of ``prod(dims)`` ranks."""

    dims: tuple[int, ...]
    """Extent of each dimension."""
    periods: tuple[bool, ...]
    """Whether each dimension wraps around."""

    kind = CART

    @classmethod
    def build(cls, dims: Sequence[int], periods: Sequence[bool] | bool | None,
              size: int) -> CartTopo:  # fmt: skip
        """Validate MPI_Cart_create's arguments for a communicator of ``size`` ranks."""
        dims_t = tuple(int(d) for d in dims)
        if periods is None or isinstance(periods, bool | int):
            periods_t = (bool(periods),) * len(dims_t)
        else:
            periods_t = tuple(bool(p) for p in periods)
        if len(periods_t) != len(dims_t):
            raise TopoError("periods", f"{len(periods_t)} periods for {len(dims_t)} dims")
        if any(d <= 0 for d in dims_t):
            raise TopoError("dims", f"dimensions must be positive: {list(dims_t)}")
        if prod(dims_t) > size:
            raise TopoError("dims", f"grid {list(dims_t)} needs more than {size} processes")
        return cls(dims_t, periods_t)

    @property
    def nnodes(self) -> int:
        """Number of ranks in the grid."""
        return prod(self.dims)

    def coords(self, rank: int) -> list[int]:
        """The coordinates of ``rank`` (MPI_Cart_coords)."""
        if not 0 <= rank < self.nnodes:
            raise TopoError("rank", f"rank {rank} is not in a grid of {self.nnodes}")
        out = [0] * len(self.dims)
        for i in range(len(self.dims) - 1, -1, -1):
            rank, out[i] = divmod(rank, self.dims[i])
        return out

    def rank(self, coords: Sequence[int]) -> int:
        """The rank at ``coords`` (MPI_Cart_rank); periodic dimensions wrap."""
        if len(coords) != len(self.dims):
            raise TopoError("coords", f"{len(coords)} coordinates for {len(self.dims)} dims")
        rank = 0
        for c, d, p in zip(coords, self.dims, self.periods, strict=True):
            if p:
                c %= d
            elif not 0 <= c < d:
                raise TopoError("coords", f"coordinate {c} outside non-periodic extent {d}")
            rank = rank * d + c
        return rank

    def shift(self, rank: int, direction: int, disp: int) -> tuple[int, int]:
        """(source, dest) of a shift by ``disp`` along ``direction`` (MPI_Cart_shift)."""
        if not 0 <= direction < len(self.dims):
            raise TopoError("direction", f"direction {direction} of {len(self.dims)} dims")
        here = self.coords(rank)
        return self._moved(here, direction, -disp), self._moved(here, direction, disp)

    def _moved(self, here: list[int], direction: int, disp: int) -> int:
        c = here[direction] + disp
        if not self.periods[direction] and not 0 <= c < self.dims[direction]:
            return PROC_NULL
        there = list(here)
        there[direction] = c
        return self.rank(there)

    def neighbors(self, rank: int) -> list[int]:
        """In- and out-neighbours: per dimension the -1 then the +1 neighbour."""
        out: list[int] = []
        for i in range(len(self.dims)):
            source, dest = self.shift(rank, i, 1)
            out += [source, dest]
        return out

    def sub_split(self, rank: int, remain: Sequence[bool]) -> tuple[CartTopo, int, int]:
        """MPI_Cart_sub: (the sub-grid, the split color, the split key) for ``rank``. Ranks
        with equal coordinates in the dropped dimensions share a color; the key is the rank
        in the sub-grid (row-major over the kept dimensions)."""
        if len(remain) != len(self.dims):
            raise TopoError("remain_dims", f"{len(remain)} flags for {len(self.dims)} dims")
        here = self.coords(rank)
        keep = [bool(r) for r in remain]
        sub = CartTopo(tuple(d for d, k in zip(self.dims, keep, strict=True) if k),
                       tuple(p for p, k in zip(self.periods, keep, strict=True) if k))  # fmt: skip
        color = key = 0
        for c, d, k in zip(here, self.dims, keep, strict=True):
            if k:
                key = key * d + c
            else:
                color = color * d + c
        return sub, color, key

    def map_rank(self, rank: int) -> int:
        """MPI_Cart_map without reordering: ``rank`` if it is in the grid, else UNDEFINED."""
        return rank if rank < self.nnodes else UNDEFINED

    def out_edges(self, rank: int) -> list[int]:
        """Out-neighbours (same as in-neighbours)."""
        return self.neighbors(rank)

    def in_edges(self, rank: int) -> list[int]:
        """In-neighbours."""
        return self.neighbors(rank)


@dataclass(frozen=True, slots=True)
class GraphTopo:
    """A graph over ``len(index)`` ranks (MPI_Graph_create's cumulative ``index``)."""

    index: tuple[int, ...]
    """``index[i]`` is the number of edges of ranks 0..i."""
    edges: tuple[int, ...]
    """Concatenated adjacency lists."""

    kind = GRAPH

    @classmethod
    def build(cls, index: Sequence[int], edges: Sequence[int], size: int) -> GraphTopo:
        """Validate MPI_Graph_create's arguments for a communicator of ``size`` ranks."""
        index_t, edges_t = tuple(int(i) for i in index), tuple(int(e) for e in edges)
        if len(index_t) > size:
            raise TopoError("index", f"graph of {len(index_t)} nodes on {size} processes")
        if any(b < a for a, b in zip((0, *index_t), index_t, strict=False)) or (
                index_t and index_t[-1] != len(edges_t)):  # fmt: skip
            raise TopoError("index", f"index {list(index_t)} is not a cumulative edge count")
        if any(not 0 <= e < len(index_t) for e in edges_t):
            raise TopoError("edges", f"edges {list(edges_t)} name nodes outside the graph")
        return cls(index_t, edges_t)

    @property
    def nnodes(self) -> int:
        """Number of ranks in the graph."""
        return len(self.index)

    def neighbors(self, rank: int) -> list[int]:
        """The adjacency list of ``rank`` (MPI_Graph_neighbors)."""
        if not 0 <= rank < self.nnodes:
            raise TopoError("rank", f"rank {rank} is not in a graph of {self.nnodes}")
        start = self.index[rank - 1] if rank else 0
        return list(self.edges[start : self.index[rank]])

    def map_rank(self, rank: int) -> int:
        """MPI_Graph_map without reordering."""
        return rank if rank < self.nnodes else UNDEFINED

    def out_edges(self, rank: int) -> list[int]:
        """Out-neighbours (the adjacency list)."""
        return self.neighbors(rank)

    def in_edges(self, rank: int) -> list[int]:
        """In-neighbours (the adjacency list)."""
        return self.neighbors(rank)


def graph_from_index(index: Sequence[int], edges: Sequence[int]) -> tuple[list[int], list[int]]:
    """mpi4py's extension: an ``index`` that starts with 0 and ends with ``len(edges)`` may be
    the standard (n+1)-entry CSR offsets; drop the leading 0 then."""
    index_l, edges_l = [int(i) for i in index], [int(e) for e in edges]
    if len(index_l) > 1 and index_l[0] == 0 and index_l[-1] == len(edges_l):
        index_l = index_l[1:]
    return index_l, edges_l


@dataclass(frozen=True, slots=True)
class DistGraphTopo:
    """One rank's view of a distributed graph: its in- and out-neighbours and weights."""

    sources: tuple[int, ...]
    """In-neighbours, in order."""
    destinations: tuple[int, ...]
    """Out-neighbours, in order."""
    source_weights: tuple[int, ...] | None
    """Weights of the in-edges (None when unweighted)."""
    dest_weights: tuple[int, ...] | None
    """Weights of the out-edges (None when unweighted)."""

    kind = DIST_GRAPH

    @property
    def weighted(self) -> bool:
        """Whether weights were given."""
        return self.source_weights is not None or self.dest_weights is not None

    @classmethod
    def build(cls, sources: Sequence[int], destinations: Sequence[int],
              source_weights: Sequence[int] | None, dest_weights: Sequence[int] | None,
              size: int) -> DistGraphTopo:  # fmt: skip
        """Validate MPI_Dist_graph_create_adjacent's arguments."""
        src, dst = tuple(int(s) for s in sources), tuple(int(d) for d in destinations)
        for name, ranks in (("sources", src), ("destinations", dst)):
            if any(not 0 <= r < size for r in ranks):
                raise TopoError(name, f"{name} {list(ranks)} outside a communicator of {size}")
        sw = None if source_weights is None else tuple(int(w) for w in source_weights)
        dw = None if dest_weights is None else tuple(int(w) for w in dest_weights)
        if sw is not None and len(sw) != len(src):
            raise TopoError("sourceweights", f"{len(sw)} weights for {len(src)} sources")
        if dw is not None and len(dw) != len(dst):
            raise TopoError("destweights", f"{len(dw)} weights for {len(dst)} destinations")
        if (sw is None) != (dw is None):
            sw = sw if sw is not None else (1,) * len(src)
            dw = dw if dw is not None else (1,) * len(dst)
        return cls(src, dst, sw, dw)

    def out_edges(self, rank: int) -> list[int]:
        """Out-neighbours."""
        return list(self.destinations)

    def in_edges(self, rank: int) -> list[int]:
        """In-neighbours."""
        return list(self.sources)


Edge = tuple[int, int, int]  # (source, destination, weight)


def dist_graph_edges(specs: Sequence[Sequence[Edge]], rank: int, weighted: bool,
                     size: int) -> DistGraphTopo:  # fmt: skip
    """MPI_Dist_graph_create: every rank's edge list (``specs[r]`` from rank r) -> this rank's
    view. Edges keep the order of (contributing rank, position)."""
    src: list[int] = []
    dst: list[int] = []
    sw: list[int] = []
    dw: list[int] = []
    for edges in specs:
        for s, d, w in edges:
            if not (0 <= s < size and 0 <= d < size):
                raise TopoError("edges", f"edge {s}->{d} outside a communicator of {size}")
            if d == rank:
                src.append(s)
                sw.append(w)
            if s == rank:
                dst.append(d)
                dw.append(w)
    if not weighted:
        return DistGraphTopo(tuple(src), tuple(dst), None, None)
    return DistGraphTopo(tuple(src), tuple(dst), tuple(sw), tuple(dw))


Topology = CartTopo | GraphTopo | DistGraphTopo


def exchange_tags(topo: Topology, rank: int, tag_limit: int
                  ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:  # fmt: skip
    """For a neighbour collective: ``(send, recv)`` lists of ``(peer, tag)``, one per out-edge
    and per in-edge in order, such that each send's tag equals the tag of the receive it must
    land in. Cartesian: the block sent toward the +1 neighbour of dimension i arrives in that
    neighbour's -1 block, so send block k carries tag k and receive block k expects k ^ 1.
    Graphs: the j-th edge between a pair carries tag j on both sides."""
    outs, ins = topo.out_edges(rank), topo.in_edges(rank)
    if isinstance(topo, CartTopo):
        send = [(p, k) for k, p in enumerate(outs)]
        recv = [(p, k ^ 1) for k, p in enumerate(ins)]
    else:
        send, recv = _occurrence_tags(outs), _occurrence_tags(ins)
    if any(t >= tag_limit for _, t in send + recv):
        raise TopoError("edges", f"more than {tag_limit} edges between one pair of ranks")
    return send, recv


def _occurrence_tags(peers: Sequence[int]) -> list[tuple[int, int]]:
    seen: dict[int, int] = {}
    out = []
    for p in peers:
        n = seen.get(p, 0)
        seen[p] = n + 1
        out.append((p, n))
    return out
