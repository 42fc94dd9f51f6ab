"""Intracommunicators: ``Intracomm`` (collectives, topology and intercommunicator constructors).

``Intracomm`` adds to ``Comm`` the collective calls, delegated to the plain objects of
``emucluster.mpi.collective`` (`Collectives`, `VectorCollectives`, `NonblockingCollectives`,
`PersistentCollectives`), the topology constructors of ``emucluster.mpi.topo.create`` and
``Create_intercomm`` (``emucluster.mpi.comm.intercomm``). `make_world` builds a rank's
COMM_WORLD and COMM_SELF over its `Runtime`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.collective.blocking import Collectives
from emucluster.mpi.collective.nonblocking import NonblockingCollectives
from emucluster.mpi.collective.persistent import PersistentCollectives
from emucluster.mpi.comm import kinds
from emucluster.mpi.comm.comm import Comm
from emucluster.mpi.comm.delegate import delegate
from emucluster.mpi.comm.intercomm import Intercomm, create_intercomm
from emucluster.mpi.comm.state import CommState
from emucluster.mpi.ft.ulfm import guard
from emucluster.mpi.info import INFO_NULL, Info
from emucluster.mpi.topo import create as topo_create

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emucluster.mpi.runtime import Runtime
    from emucluster.mpi.topo.topocomm import Cartcomm, Distgraphcomm, Graphcomm


__all__ = ["Intracomm", "make_world"]


class Intracomm(Comm):
    """An intracommunicator (mpi4py's ``MPI.Intracomm``): point-to-point and collectives."""

    __slots__ = ()

    def __new__(cls, comm: Comm | None = None) -> Intracomm:
        """A handle to ``comm`` (COMM_NULL if None); TypeError for an intercommunicator."""
        if comm is not None and comm._st is not None and comm._st.local is not None:
            raise TypeError(f"{cls.__name__}() takes an intracommunicator")
        self = super().__new__(cls, comm)
        assert isinstance(self, Intracomm)
        return self

    def Create_intercomm(self, local_leader: int, peer_comm: Comm, remote_leader: int,
                         tag: int = 0) -> Intercomm:  # fmt: skip
        """An intercommunicator between this group and the one whose leader is
        ``remote_leader`` in ``peer_comm`` (collective over both groups)."""
        return create_intercomm(self, local_leader, peer_comm, remote_leader, tag)

    # -- processes started at run time (``emucluster.mpi.dynamic``, registered at Init) -------

    def Spawn(self, command: str, args: Sequence[str] | None = None, maxprocs: int = 1,
              info: Info = INFO_NULL, root: int = 0,
              errcodes: list[Any] | None = None) -> Intercomm:  # fmt: skip
        """Start ``maxprocs`` processes of ``command`` as new nodes; the intercommunicator to
        them (collective; the arguments count at ``root``)."""
        found: Intercomm = kinds.dynamic("spawn")(self, command, args, maxprocs, info, root,
                                                  errcodes)  # fmt: skip
        return found

    def Spawn_multiple(self, command: Sequence[str], args: Sequence[Sequence[str]] | None = None,
                       maxprocs: Sequence[int] | None = None,
                       info: Sequence[Info] | Info = INFO_NULL, root: int = 0,
                       errcodes: list[Any] | None = None) -> Intercomm:  # fmt: skip
        """Start several commands as one COMM_WORLD of new nodes (collective)."""
        found: Intercomm = kinds.dynamic("spawn_multiple")(self, command, args, maxprocs, info,
                                                           root, errcodes)  # fmt: skip
        return found

    def Accept(self, port_name: str | None = None, info: Info = INFO_NULL,
               root: int = 0) -> Intercomm:  # fmt: skip
        """Wait for a group to ``Connect`` to ``port_name`` (collective)."""
        found: Intercomm = kinds.dynamic("accept")(self, port_name, info, root)
        return found

    def Connect(self, port_name: str | None = None, info: Info = INFO_NULL,
                root: int = 0) -> Intercomm:  # fmt: skip
        """Connect to the group accepting on ``port_name`` (collective)."""
        found: Intercomm = kinds.dynamic("connect")(self, port_name, info, root)
        return found

    # -- collectives only an intracommunicator has (the rest are ``Comm``'s, as in mpi4py) ----

    scan = delegate(Collectives, Collectives.scan)
    exscan = delegate(Collectives, Collectives.exscan)
    Scan = delegate(Collectives, Collectives.Scan)
    Exscan = delegate(Collectives, Collectives.Exscan)
    Iscan = delegate(NonblockingCollectives, NonblockingCollectives.Iscan)
    Iexscan = delegate(NonblockingCollectives, NonblockingCollectives.Iexscan)
    Scan_init = delegate(PersistentCollectives, PersistentCollectives.Scan_init)
    Exscan_init = delegate(PersistentCollectives, PersistentCollectives.Exscan_init)

    # -- topology constructors (``emucluster.mpi.topo.create``) --------------------------------

    def Create_cart(self, dims: Sequence[int], periods: Sequence[bool] | bool | None = None,
                    reorder: bool = False) -> Cartcomm:  # fmt: skip
        """A Cartesian communicator (COMM_NULL for ranks beyond ``prod(dims)``; collective)."""
        found: Cartcomm = topo_create.cart(self, dims, periods)
        return found

    def Create_graph(self, index: Sequence[int], edges: Sequence[int],
                     reorder: bool = False) -> Graphcomm:  # fmt: skip
        """A graph communicator (COMM_NULL for ranks beyond the graph's nodes; collective)."""
        found: Graphcomm = topo_create.graph(self, index, edges)
        return found

    def Create_dist_graph_adjacent(self, sources: Sequence[int] | None,
                                   destinations: Sequence[int] | None,
                                   sourceweights: object = None, destweights: object = None,
                                   info: object = None, reorder: bool = False,
                                   ) -> Distgraphcomm:  # fmt: skip
        """A distributed graph communicator from each rank's own neighbours (collective)."""
        found: Distgraphcomm = topo_create.dist_graph_adjacent(
            self, sources, destinations, sourceweights, destweights
        )
        return found

    def Create_dist_graph(self, sources: Sequence[int], degrees: Sequence[int],
                          destinations: Sequence[int], weights: object = None,
                          info: object = None, reorder: bool = False) -> Distgraphcomm:  # fmt: skip
        """A distributed graph communicator from any rank's edges (collective)."""
        found: Distgraphcomm = topo_create.dist_graph(self, sources, degrees, destinations,
                                                      weights)  # fmt: skip
        return found

    def Cart_map(self, dims: Sequence[int], periods: Sequence[bool] | bool | None = None) -> int:
        """This rank's rank in such a grid, or UNDEFINED (no reordering here)."""
        return topo_create.cart_map(self._state(), dims, periods)

    def Graph_map(self, index: Sequence[int], edges: Sequence[int]) -> int:
        """This rank's rank in such a graph, or UNDEFINED (no reordering here)."""
        return topo_create.graph_map(self._state(), index, edges)

    @classmethod
    def _of(cls, st: CommState) -> Intracomm:
        comm = cls()
        comm._st = st
        return comm


kinds.register(kinds.NO_TOPOLOGY, guard(Intracomm))


def make_world(rt: Runtime) -> tuple[Intracomm, Intracomm]:
    """COMM_WORLD (contexts 0/1; rank == node, but in processes started at run time, whose
    world is the nodes `HostConfig.world` names; its nodes: `HostConfig.world_of`) and
    COMM_SELF (contexts 2/3) of ``rt``."""
    node = rt.node
    first, count = rt.config.world_of(rt.num_nodes)
    nodes = tuple(range(first, first + count))
    world = CommState(rt, 0, nodes, nodes.index(node), name="MPI_COMM_WORLD")
    rt.world = world
    self_ = CommState(rt, 2, (node,), 0, name="MPI_COMM_SELF")
    return Intracomm._of(world), Intracomm._of(self_)
