"""Topology communicators: ``Topocomm``, ``Cartcomm``, ``Graphcomm``, ``Distgraphcomm``.

A topology communicator is an intracommunicator whose state carries a `topology` record
(``CommState.topo``); the arithmetic lives in `emucluster.mpi.topo.topology`, the creation calls in
`emucluster.mpi.topo.create`. Neighbour collectives run on the communicator's collective
channel like every other collective (one fresh call number per call, so blocking and
nonblocking calls never take each other's messages): each rank posts one receive per
in-edge and one send per out-edge, with tags from `topology.exchange_tags` so that duplicate
edges between a pair of ranks land in the right blocks; PROC_NULL neighbours are skipped
(their receive blocks stay untouched, or None for objects).
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

from emucluster.coll.context import TAG_LIMIT, drive
from emucluster.mpi.collective.calls import CallContext, dump_object, object_items, waiter
from emucluster.mpi.collective.layout import simple, vector, vector_w
from emucluster.mpi.collective.persistent import PersistentCollectives
from emucluster.mpi.comm import kinds
from emucluster.mpi.comm.delegate import delegate
from emucluster.mpi.comm.intracomm import Intracomm
from emucluster.mpi.constants import PROC_NULL
from emucluster.mpi.errors import ERR_TOPOLOGY
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.ft.ulfm import guard
from emucluster.mpi.request.pending import CollDriver
from emucluster.mpi.request.request import Request
from emucluster.mpi.topo.create import attach, topo_error
from emucluster.mpi.topo.topology import (
    CART,
    DIST_GRAPH,
    GRAPH,
    CartTopo,
    DistGraphTopo,
    GraphTopo,
    TopoError,
    Topology,
    exchange_tags,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from emucluster.coll.context import CollContext, CollGen, CollRequest
    from emucluster.mpi.comm.comm import Comm

__all__ = [
    "Cartcomm",
    "Distgraphcomm",
    "Graphcomm",
    "Topocomm",
    "neighbor_exchange",
    "topo_error",
]


class Topocomm(Intracomm):
    """An intracommunicator with a virtual topology (mpi4py's ``MPI.Topocomm``)."""

    __slots__ = ()

    _kind: int | None = None  # the topology a subclass holds (None: any)

    def __new__(cls, comm: Comm | None = None) -> Topocomm:
        """A handle to ``comm``, which must be COMM_NULL or carry this class's topology."""
        self = super().__new__(cls, comm)
        st = self._st
        if st is not None:
            topo = st.topo
            if topo is None or (cls._kind is not None and topo.kind != cls._kind):
                raise TypeError(f"{cls.__name__}() takes a communicator with that topology")
        return self  # type: ignore[return-value]

    def _topo(self) -> Topology:
        topo = self._state().topo
        if topo is None:
            raise MPIException(ERR_TOPOLOGY, "the communicator has no topology")
        return topo

    # -- neighbourhood queries ----------------------------------------------------------------

    @property
    def degrees(self) -> tuple[int, int]:
        """(indegree, outdegree)."""
        return self.indegree, self.outdegree

    @property
    def indegree(self) -> int:
        """Number of in-neighbours."""
        return len(self.inedges)

    @property
    def outdegree(self) -> int:
        """Number of out-neighbours."""
        return len(self.outedges)

    @property
    def inedges(self) -> list[int]:
        """In-neighbours."""
        return self._topo().in_edges(self._state().rank)

    @property
    def outedges(self) -> list[int]:
        """Out-neighbours."""
        return self._topo().out_edges(self._state().rank)

    @property
    def inoutedges(self) -> tuple[list[int], list[int]]:
        """(in-neighbours, out-neighbours)."""
        return self.inedges, self.outedges

    # -- neighbour collectives (objects) ------------------------------------------------------

    def neighbor_allgather(self, sendobj: Any) -> list[Any]:
        """Every in-neighbour's object, in in-edge order (None from PROC_NULL)."""
        blocks = self._exchange_blocking(lambda n: [dump_object(sendobj)] * n)
        return [None if b is None else pickle.loads(b) for b in blocks]

    def neighbor_alltoall(self, sendobj: Any) -> list[Any]:
        """Item k of ``sendobj`` goes to out-neighbour k; returns one object per in-edge."""
        blocks = self._exchange_blocking(
            lambda n: [dump_object(x) for x in object_items(sendobj, n)]
        )
        return [None if b is None else pickle.loads(b) for b in blocks]

    # -- neighbour collectives (buffers) ------------------------------------------------------

    def Neighbor_allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        """``sendbuf`` to every out-neighbour; block k of ``recvbuf`` from in-neighbour k."""
        self._run(*self._plan(sendbuf, recvbuf, "allgather"))

    def Neighbor_allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
        """Neighbor_allgather with per-block counts and displacements in ``recvbuf``."""
        self._run(*self._plan(sendbuf, recvbuf, "allgatherv"))

    def Neighbor_alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        """Block k of ``sendbuf`` to out-neighbour k; block k of ``recvbuf`` from in-neighbour
        k."""
        self._run(*self._plan(sendbuf, recvbuf, "alltoall"))

    def Neighbor_alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        """Neighbor_alltoall with per-block counts and displacements."""
        self._run(*self._plan(sendbuf, recvbuf, "alltoallv"))

    def Neighbor_alltoallw(self, sendbuf: Any, recvbuf: Any) -> None:
        """Neighbor_alltoall with per-block counts, byte displacements and datatypes."""
        self._run(*self._plan(sendbuf, recvbuf, "alltoallw"))

    def Ineighbor_allgather(self, sendbuf: Any, recvbuf: Any) -> Request:
        """Nonblocking Neighbor_allgather."""
        return self._start(*self._plan(sendbuf, recvbuf, "allgather"))

    def Ineighbor_allgatherv(self, sendbuf: Any, recvbuf: Any) -> Request:
        """Nonblocking Neighbor_allgatherv."""
        return self._start(*self._plan(sendbuf, recvbuf, "allgatherv"))

    def Ineighbor_alltoall(self, sendbuf: Any, recvbuf: Any) -> Request:
        """Nonblocking Neighbor_alltoall."""
        return self._start(*self._plan(sendbuf, recvbuf, "alltoall"))

    def Ineighbor_alltoallv(self, sendbuf: Any, recvbuf: Any) -> Request:
        """Nonblocking Neighbor_alltoallv."""
        return self._start(*self._plan(sendbuf, recvbuf, "alltoallv"))

    def Ineighbor_alltoallw(self, sendbuf: Any, recvbuf: Any) -> Request:
        """Nonblocking Neighbor_alltoallw."""
        return self._start(*self._plan(sendbuf, recvbuf, "alltoallw"))

    Neighbor_allgather_init = delegate(
        PersistentCollectives, PersistentCollectives.Neighbor_allgather_init
    )
    Neighbor_allgatherv_init = delegate(
        PersistentCollectives, PersistentCollectives.Neighbor_allgatherv_init
    )
    Neighbor_alltoall_init = delegate(
        PersistentCollectives, PersistentCollectives.Neighbor_alltoall_init
    )
    Neighbor_alltoallv_init = delegate(
        PersistentCollectives, PersistentCollectives.Neighbor_alltoallv_init
    )
    Neighbor_alltoallw_init = delegate(
        PersistentCollectives, PersistentCollectives.Neighbor_alltoallw_init
    )

    # -- internals ----------------------------------------------------------------------------

    def _plan(self, sendbuf: Any, recvbuf: Any, kind: str
              ) -> tuple[list[bytes], Callable[[list[bytes | None]], None]]:  # fmt: skip
        """Pack the send blocks (one per out-edge) and say how to unpack the received ones (one
        per in-edge), parsing the specs as the world collectives do (`layout`)."""
        topo, rank = self._topo(), self._state().rank
        nin, nout = len(topo.in_edges(rank)), len(topo.out_edges(rank))
        parse = {"allgather": simple, "allgatherv": vector, "alltoall": simple,
                 "alltoallv": vector, "alltoallw": vector_w}[kind]  # fmt: skip
        recv = parse(recvbuf, readonly=False, blocks=nin) if nin else None
        if kind.startswith("allgather"):
            data = [simple(sendbuf, readonly=True).pack(0)] * nout
        else:
            send = parse(sendbuf, readonly=True, blocks=nout) if nout else None
            data = [] if send is None else [send.pack(k) for k in range(nout)]

        def fill(blocks: list[bytes | None]) -> None:
            for k, block in enumerate(blocks):
                if block is not None and recv is not None:
                    recv.unpack(k, block)

        return data, fill

    def _run(self, data: list[bytes], fill: Callable[[list[bytes | None]], None]) -> None:
        fill(self._exchange_blocking(lambda n: data))

    def _start(self, data: list[bytes], fill: Callable[[list[bytes | None]], None]) -> Request:
        return self._exchange_start(lambda n: data, fill)

    def _exchange_gen(self, payloads: Callable[[int], list[bytes]]
                      ) -> CollGen[list[bytes | None]]:  # fmt: skip
        st = self._state()
        try:
            sends, recvs = exchange_tags(self._topo(), st.rank, TAG_LIMIT)
        except TopoError as exc:
            raise topo_error(exc) from None
        data = payloads(len(sends))
        if len(data) != len(sends):
            raise ValueError(f"expecting {len(sends)} items, got {len(data)}")
        return neighbor_exchange(CallContext(st), sends, recvs, data)

    def _exchange_blocking(self, payloads: Callable[[int], list[bytes]]
                           ) -> list[bytes | None]:  # fmt: skip
        return drive(self._exchange_gen(payloads), waiter(self._engine()))

    def _exchange_start(self, payloads: Callable[[int], list[bytes]],
                        fill: Callable[[list[bytes | None]], None]) -> Request:  # fmt: skip
        driver = CollDriver(self._exchange_gen(payloads), fill, context=self._state().context)
        engine = self._engine()
        engine.add(driver)
        return Request._of(driver, engine)


class Cartcomm(Topocomm):
    """A communicator with a Cartesian topology (mpi4py's ``MPI.Cartcomm``)."""

    __slots__ = ()

    _kind = CART

    def _cart(self) -> CartTopo:
        topo = self._topo()
        assert isinstance(topo, CartTopo)
        return topo

    def Get_dim(self) -> int:
        """Number of dimensions."""
        return len(self._cart().dims)

    @property
    def dim(self) -> int:
        """Number of dimensions."""
        return self.Get_dim()

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self.Get_dim()

    def Get_topo(self) -> tuple[list[int], list[bool], list[int]]:
        """(dims, periods, coords of this rank)."""
        cart = self._cart()
        return list(cart.dims), list(cart.periods), cart.coords(self._state().rank)

    @property
    def topo(self) -> tuple[list[int], list[bool], list[int]]:
        """(dims, periods, coords)."""
        return self.Get_topo()

    @property
    def dims(self) -> list[int]:
        """Extent of each dimension."""
        return list(self._cart().dims)

    @property
    def periods(self) -> list[bool]:
        """Periodicity of each dimension."""
        return list(self._cart().periods)

    @property
    def coords(self) -> list[int]:
        """This rank's coordinates."""
        return self.Get_coords(self._state().rank)

    def Get_cart_rank(self, coords: Sequence[int]) -> int:
        """The rank at ``coords``."""
        try:
            return self._cart().rank(list(coords))
        except TopoError as exc:
            raise topo_error(exc) from None

    def Get_coords(self, rank: int) -> list[int]:
        """The coordinates of ``rank``."""
        try:
            return self._cart().coords(rank)
        except TopoError as exc:
            raise topo_error(exc) from None

    def Shift(self, direction: int, disp: int) -> tuple[int, int]:
        """(source, dest) ranks of a shift by ``disp`` along ``direction``."""
        try:
            return self._cart().shift(self._state().rank, direction, disp)
        except TopoError as exc:
            raise topo_error(exc) from None

    def Sub(self, remain_dims: Sequence[bool]) -> Cartcomm:
        """The sub-grid keeping the dimensions flagged in ``remain_dims`` (collective)."""
        try:
            sub, color, key = self._cart().sub_split(self._state().rank, list(remain_dims))
        except TopoError as exc:
            raise topo_error(exc) from None
        result = attach(self.Split(color, key), sub)
        assert isinstance(result, Cartcomm)
        return result


class Graphcomm(Topocomm):
    """A communicator with a graph topology (mpi4py's ``MPI.Graphcomm``)."""

    __slots__ = ()

    _kind = GRAPH

    def _graph(self) -> GraphTopo:
        topo = self._topo()
        assert isinstance(topo, GraphTopo)
        return topo

    def Get_dims(self) -> tuple[int, int]:
        """(number of nodes, number of edges)."""
        graph = self._graph()
        return graph.nnodes, len(graph.edges)

    @property
    def dims(self) -> tuple[int, int]:
        """(nnodes, nedges)."""
        return self.Get_dims()

    @property
    def nnodes(self) -> int:
        """Number of nodes."""
        return self._graph().nnodes

    @property
    def nedges(self) -> int:
        """Number of edges."""
        return len(self._graph().edges)

    def Get_topo(self) -> tuple[list[int], list[int]]:
        """(index, edges)."""
        graph = self._graph()
        return list(graph.index), list(graph.edges)

    @property
    def topo(self) -> tuple[list[int], list[int]]:
        """(index, edges)."""
        return self.Get_topo()

    @property
    def index(self) -> list[int]:
        """Cumulative edge counts."""
        return list(self._graph().index)

    @property
    def edges(self) -> list[int]:
        """Concatenated adjacency lists."""
        return list(self._graph().edges)

    def Get_neighbors_count(self, rank: int) -> int:
        """Number of neighbours of ``rank``."""
        return len(self.Get_neighbors(rank))

    def Get_neighbors(self, rank: int) -> list[int]:
        """Neighbours of ``rank``."""
        try:
            return self._graph().neighbors(rank)
        except TopoError as exc:
            raise topo_error(exc) from None

    @property
    def nneighbors(self) -> int:
        """Number of this rank's neighbours."""
        return len(self.neighbors)

    @property
    def neighbors(self) -> list[int]:
        """This rank's neighbours."""
        return self.Get_neighbors(self._state().rank)


class Distgraphcomm(Topocomm):
    """A communicator with a distributed graph topology (mpi4py's ``MPI.Distgraphcomm``)."""

    __slots__ = ()

    _kind = DIST_GRAPH

    def _dist(self) -> DistGraphTopo:
        topo = self._topo()
        assert isinstance(topo, DistGraphTopo)
        return topo

    def Get_dist_neighbors_count(self) -> tuple[int, int, bool]:
        """(indegree, outdegree, weighted)."""
        dist = self._dist()
        return len(dist.sources), len(dist.destinations), dist.weighted

    def Get_dist_neighbors(self) -> tuple[list[int], list[int],
                                          tuple[list[int], list[int]] | None]:  # fmt: skip
        """(sources, destinations, (sourceweights, destweights) or None)."""
        dist = self._dist()
        weights = None
        if dist.weighted:
            weights = (list(dist.source_weights or ()), list(dist.dest_weights or ()))
        return list(dist.sources), list(dist.destinations), weights


def neighbor_exchange(ctx: CollContext, sends: list[tuple[int, int]],
                      recvs: list[tuple[int, int]],
                      data: list[bytes]) -> CollGen[list[bytes | None]]:  # fmt: skip
    """The neighbour-collective algorithm: ``data[k]`` goes to ``sends[k] = (peer, tag)``; the
    result holds, per ``recvs[k]``, the bytes received (None for a PROC_NULL peer)."""
    requests: list[CollRequest] = []
    incoming: list[CollRequest | None] = []
    for peer, tag in recvs:
        request = None if peer == PROC_NULL else ctx.irecv(peer, tag)
        incoming.append(request)
        if request is not None:
            requests.append(request)
    for (peer, tag), payload in zip(sends, data, strict=True):
        if peer != PROC_NULL:
            requests.append(ctx.isend(payload, peer, tag))
    yield requests
    return [None if r is None else r.result for r in incoming]


guard(Topocomm)  # the neighborhood collectives raise ERR_REVOKED on a revoked communicator
kinds.register(CART, Cartcomm)
kinds.register(GRAPH, Graphcomm)
kinds.register(DIST_GRAPH, Distgraphcomm)
