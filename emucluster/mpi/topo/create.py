"""Creating topology communicators (``Create_cart``, ``Create_graph``, ``Create_dist_graph``,
``Create_dist_graph_adjacent``) and the mapping helpers (``Compute_dims``, ``Cart_map``,
``Graph_map``).

Mixed into ``Intracomm``. Ranks are never reordered (``reorder`` is accepted; keeping the
order is always allowed), so Cart_map/Graph_map return the caller's rank, or UNDEFINED past
the topology's size, and ``Create_cart``/``Create_graph`` are a Split with those colours. A
distributed graph is a Dup with the rank's adjacency; ``Create_dist_graph`` first allgathers
every rank's edge list to learn its own in- and out-edges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from emucluster.mpi.collective.calls import internal_allgather
from emucluster.mpi.constants import UNDEFINED
from emucluster.mpi.errors import ERR_COMM
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

    from emucluster.mpi.comm.comm import Intracomm
    from emucluster.mpi.comm.state import CommState
    from emucluster.mpi.topo.topocomm import Cartcomm, Distgraphcomm, Graphcomm

__all__ = ["UNWEIGHTED", "WEIGHTS_EMPTY", "Compute_dims", "TopologyCreation"]


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
        from emucluster.mpi.topo.topocomm import topo_error

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


def _checked(build: Callable[[], T]) -> T:
    try:
        return build()
    except TopoError as exc:
        from emucluster.mpi.topo.topocomm import topo_error

        raise topo_error(exc) from None


class TopologyCreation:
    """Topology constructors of an intracommunicator (mixed into ``Intracomm``)."""

    __slots__ = ()

    def _state(self) -> CommState:
        raise MPIException(ERR_COMM, "not a communicator")

    def Create_cart(self, dims: Sequence[int], periods: Sequence[bool] | bool | None = None,
                    reorder: bool = False) -> Cartcomm:  # fmt: skip
        """A Cartesian communicator (COMM_NULL for ranks beyond ``prod(dims)``; collective)."""
        from emucluster.mpi.topo.topocomm import attach

        st = self._state()
        cart = _cart(dims, periods, st.size)
        color = 0 if st.rank < cart.nnodes else UNDEFINED
        part = _intra(self).Split(color, st.rank)
        return attach(part, cart)  # type: ignore[return-value]

    def Create_graph(self, index: Sequence[int], edges: Sequence[int],
                     reorder: bool = False) -> Graphcomm:  # fmt: skip
        """A graph communicator (COMM_NULL for ranks beyond the graph's nodes; collective)."""
        from emucluster.mpi.topo.topocomm import attach

        st = self._state()
        index_l, edges_l = graph_from_index(index, edges)
        graph = _checked(lambda: GraphTopo.build(index_l, edges_l, st.size))
        color = 0 if st.rank < graph.nnodes else UNDEFINED
        part = _intra(self).Split(color, st.rank)
        return attach(part, graph)  # type: ignore[return-value]

    def Create_dist_graph_adjacent(self, sources: Sequence[int] | None,
                                   destinations: Sequence[int] | None,
                                   sourceweights: object = None, destweights: object = None,
                                   info: object = None, reorder: bool = False,
                                   ) -> Distgraphcomm:  # fmt: skip
        """A distributed graph communicator from each rank's own neighbours (collective)."""
        from emucluster.mpi.topo.topocomm import attach

        st = self._state()
        src = [] if sources is None else [int(s) for s in sources]
        dst = [] if destinations is None else [int(d) for d in destinations]
        sw, dw = _weights(sourceweights, len(src)), _weights(destweights, len(dst))
        dist = _checked(lambda: DistGraphTopo.build(src, dst, sw, dw, st.size))
        return attach(_intra(self).Dup(), dist)  # type: ignore[return-value]

    def Create_dist_graph(self, sources: Sequence[int], degrees: Sequence[int],
                          destinations: Sequence[int], weights: object = None,
                          info: object = None, reorder: bool = False) -> Distgraphcomm:  # fmt: skip
        """A distributed graph communicator from any rank's edges (collective)."""
        from emucluster.mpi.topo.topocomm import attach

        st = self._state()
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
        return attach(_intra(self).Dup(), dist)  # type: ignore[return-value]

    def Cart_map(self, dims: Sequence[int], periods: Sequence[bool] | bool | None = None) -> int:
        """This rank's rank in such a grid, or UNDEFINED (no reordering here)."""
        st = self._state()
        return _cart(dims, periods, st.size).map_rank(st.rank)

    def Graph_map(self, index: Sequence[int], edges: Sequence[int]) -> int:
        """This rank's rank in such a graph, or UNDEFINED (no reordering here)."""
        st = self._state()
        index_l, edges_l = graph_from_index(index, edges)
        graph = _checked(lambda: GraphTopo.build(index_l, edges_l, st.size))
        return graph.map_rank(st.rank)


def _intra(obj: object) -> Intracomm:
    from emucluster.mpi.comm.comm import Intracomm

    assert isinstance(obj, Intracomm)
    return obj
