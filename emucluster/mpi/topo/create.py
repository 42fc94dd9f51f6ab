"""Creating topology communicators (``Create_cart``, ``Create_graph``, ``Create_dist_graph``,
``Create_dist_graph_adjacent``) and the mapping helpers (``Compute_dims``, ``Cart_map``,
``Graph_map``).

``Intracomm``'s constructors delegate to the functions here. Ranks are never reordered
(``reorder`` is accepted; keeping the order is always allowed), so Cart_map/Graph_map return
the caller's rank, or UNDEFINED past the topology's size, and ``Create_cart``/``Create_graph``
are a Split with those colours. A distributed graph is a Dup with the rank's adjacency;
``Create_dist_graph`` first allgathers every rank's edge list to learn its own in- and
out-edges. The new communicator's handle class comes from ``emucluster.mpi.comm.kinds``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from emucluster.mpi.collective.calls import internal_allgather
from emucluster.mpi.comm import kinds
from emucluster.mpi.constants import UNDEFINED
from emucluster.mpi.errors import ERR_ARG, ERR_DIMS, ERR_RANK
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.topo.topology import (
    CartTopo,
    DistGraphTopo,
    GraphTopo,
    TopoError,
    compute_dims,
    dist_graph_edges,
    graph_from_index,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from emucluster.mpi.comm.intracomm import Intracomm
    from emucluster.mpi.comm.state import CommState
    from emucluster.mpi.topo.topology import Topology

__all__ = [
    "UNWEIGHTED",
    "WEIGHTS_EMPTY",
    "Compute_dims",
    "attach",
    "cart",
    "cart_map",
    "dist_graph",
    "dist_graph_adjacent",
    "graph",
    "graph_map",
    "topo_error",
]

_ERROR_CLASS = {"rank": ERR_RANK, "dims": ERR_DIMS, "direction": ERR_ARG, "coords": ERR_ARG}


class _Weights:
    """mpi4py's weight sentinels (``MPI.UNWEIGHTED``, ``MPI.WEIGHTS_EMPTY``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<emucluster.MPI.{self.name}>"

    def __reduce__(self) -> str:
        return self.name


T = TypeVar("T")
UNWEIGHTED = _Weights("UNWEIGHTED")
WEIGHTS_EMPTY = _Weights("WEIGHTS_EMPTY")


def Compute_dims(nnodes: int, dims: int | Sequence[int]) -> list[int]:
    """A balanced grid of ``nnodes`` processes: ``dims`` is the number of dimensions or a list
    whose zero entries are filled in (MPI_Dims_create)."""
    shape = [0] * dims if isinstance(dims, int) else [int(d) for d in dims]
    try:
        return compute_dims(nnodes, shape)
    except TopoError as exc:
        raise topo_error(exc) from None


def _weights(weights: object, degree: int) -> list[int] | None:
    if weights is None or weights is UNWEIGHTED:
        return None
    if weights is WEIGHTS_EMPTY:
        if degree > 0:
            raise ValueError("empty weights but nonzero degree")
        return []
    out = [int(w) for w in weights]  # type: ignore[attr-defined]
    if len(out) != degree:
        raise ValueError(f"expecting {degree} weights, got {len(out)}")
    return out


def _cart(dims: Sequence[int], periods: Sequence[bool] | bool | None, size: int) -> CartTopo:
    dims_l = [int(d) for d in dims]
    if periods is not None and not isinstance(periods, bool):
        periods_l = [bool(p) for p in periods]
        if len(periods_l) != len(dims_l):
            raise ValueError(f"expecting {len(dims_l)} periods, got {len(periods_l)}")
        return _checked(lambda: CartTopo.build(dims_l, periods_l, size))
    return _checked(lambda: CartTopo.build(dims_l, periods, size))


def topo_error(exc: TopoError) -> MPIException:
    """The MPI.Exception for a topology argument error."""
    return MPIException(_ERROR_CLASS.get(exc.field, ERR_ARG), str(exc))


def _checked(build: Callable[[], T]) -> T:
    try:
        return build()
    except TopoError as exc:
        raise topo_error(exc) from None


def attach(part: Any, topo: Topology) -> Any:
    """Give the communicator ``part`` (fresh from Split/Dup) the topology ``topo``; a handle of
    the topology's class (COMM_NULL stays COMM_NULL)."""
    st = part._st
    if st is None:
        return part
    st.topo = topo
    return kinds.handle(st)


def cart(comm: Intracomm, dims: Sequence[int],
         periods: Sequence[bool] | bool | None) -> Any:  # fmt: skip
    """``Create_cart``: COMM_NULL for ranks beyond ``prod(dims)`` (collective)."""
    st = comm._state()
    grid = _cart(dims, periods, st.size)
    color = 0 if st.rank < grid.nnodes else UNDEFINED
    return attach(comm.Split(color, st.rank), grid)


def graph(comm: Intracomm, index: Sequence[int], edges: Sequence[int]) -> Any:
    """``Create_graph``: COMM_NULL for ranks beyond the graph's nodes (collective)."""
    st = comm._state()
    index_l, edges_l = graph_from_index(index, edges)
    topo = _checked(lambda: GraphTopo.build(index_l, edges_l, st.size))
    color = 0 if st.rank < topo.nnodes else UNDEFINED
    return attach(comm.Split(color, st.rank), topo)


def dist_graph_adjacent(comm: Intracomm, sources: Sequence[int] | None,
                        destinations: Sequence[int] | None, sourceweights: object,
                        destweights: object) -> Any:  # fmt: skip
    """``Create_dist_graph_adjacent``: from each rank's own neighbours (collective)."""
    st = comm._state()
    src = [] if sources is None else [int(s) for s in sources]
    dst = [] if destinations is None else [int(d) for d in destinations]
    sw, dw = _weights(sourceweights, len(src)), _weights(destweights, len(dst))
    dist = _checked(lambda: DistGraphTopo.build(src, dst, sw, dw, st.size))
    return attach(comm.Dup(), dist)


def dist_graph(comm: Intracomm, sources: Sequence[int], degrees: Sequence[int],
               destinations: Sequence[int], weights: object) -> Any:  # fmt: skip
    """``Create_dist_graph``: from any rank's edges (collective)."""
    st = comm._state()
    src, deg = [int(s) for s in sources], [int(d) for d in degrees]
    if len(deg) != len(src):
        raise ValueError(f"expecting {len(src)} degrees, got {len(deg)}")
    dst = [int(d) for d in destinations]
    if len(dst) != sum(deg):
        raise ValueError(f"expecting {sum(deg)} destinations, got {len(dst)}")
    w = _weights(weights, len(dst))
    edges: list[tuple[int, int, int]] = []
    pos = 0
    for s, n in zip(src, deg, strict=True):
        for _ in range(n):
            edges.append((s, dst[pos], 1 if w is None else w[pos]))
            pos += 1
    specs = internal_allgather(st, (w is not None, edges))
    weighted = any(flag for flag, _ in specs)
    dist = _checked(lambda: dist_graph_edges([e for _, e in specs], st.rank, weighted,
                                             st.size))  # fmt: skip
    return attach(comm.Dup(), dist)


def cart_map(st: CommState, dims: Sequence[int], periods: Sequence[bool] | bool | None) -> int:
    """``Cart_map``: this rank's rank in such a grid, or UNDEFINED (no reordering here)."""
    return _cart(dims, periods, st.size).map_rank(st.rank)


def graph_map(st: CommState, index: Sequence[int], edges: Sequence[int]) -> int:
    """``Graph_map``: this rank's rank in such a graph, or UNDEFINED (no reordering here)."""
    index_l, edges_l = graph_from_index(index, edges)
    topo = _checked(lambda: GraphTopo.build(index_l, edges_l, st.size))
    return topo.map_rank(st.rank)
