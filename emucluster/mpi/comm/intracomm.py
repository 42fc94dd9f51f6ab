"""Intracommunicators: ``Intracomm`` (collectives, topology and intercommunicator constructors).

``Intracomm`` adds to ``Comm`` the collective calls, delegated to the plain objects of
``emucluster.mpi.collective`` (`Collectives`, `VectorCollectives`, `NonblockingCollectives`,
`PersistentCollectives`), the topology constructors of ``emucluster.mpi.topo.create`` and
``Create_intercomm`` (``emucluster.mpi.comm.intercomm``). `make_world` builds a rank's
COMM_WORLD and COMM_SELF over its `Runtime`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.mpi.collective.blocking import Collectives
from emucluster.mpi.collective.nonblocking import NonblockingCollectives, VectorCollectives
from emucluster.mpi.collective.persistent import PersistentCollectives
from emucluster.mpi.comm import kinds
from emucluster.mpi.comm.comm import Comm
from emucluster.mpi.comm.delegate import delegate
from emucluster.mpi.comm.intercomm import Intercomm, create_intercomm
from emucluster.mpi.comm.state import CommState
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

    # -- collectives (``emucluster.mpi.collective``) ---------------------------------------------

    barrier = delegate(Collectives, Collectives.barrier)
    bcast = delegate(Collectives, Collectives.bcast)
    gather = delegate(Collectives, Collectives.gather)
    scatter = delegate(Collectives, Collectives.scatter)
    allgather = delegate(Collectives, Collectives.allgather)
    alltoall = delegate(Collectives, Collectives.alltoall)
    reduce = delegate(Collectives, Collectives.reduce)
    allreduce = delegate(Collectives, Collectives.allreduce)
    scan = delegate(Collectives, Collectives.scan)
    exscan = delegate(Collectives, Collectives.exscan)
    Barrier = delegate(Collectives, Collectives.Barrier)
    Bcast = delegate(Collectives, Collectives.Bcast)
    Reduce = delegate(Collectives, Collectives.Reduce)
    Allreduce = delegate(Collectives, Collectives.Allreduce)
    Scan = delegate(Collectives, Collectives.Scan)
    Exscan = delegate(Collectives, Collectives.Exscan)
    Gather = delegate(Collectives, Collectives.Gather)
    Scatter = delegate(Collectives, Collectives.Scatter)
    Allgather = delegate(Collectives, Collectives.Allgather)
    Alltoall = delegate(Collectives, Collectives.Alltoall)
    Ibarrier = delegate(Collectives, Collectives.Ibarrier)
    Ibcast = delegate(Collectives, Collectives.Ibcast)
    Ireduce = delegate(Collectives, Collectives.Ireduce)
    Iallreduce = delegate(Collectives, Collectives.Iallreduce)

    Gatherv = delegate(VectorCollectives, VectorCollectives.Gatherv)
    Scatterv = delegate(VectorCollectives, VectorCollectives.Scatterv)
    Allgatherv = delegate(VectorCollectives, VectorCollectives.Allgatherv)
    Alltoallv = delegate(VectorCollectives, VectorCollectives.Alltoallv)
    Alltoallw = delegate(VectorCollectives, VectorCollectives.Alltoallw)
    Reduce_scatter_block = delegate(VectorCollectives, VectorCollectives.Reduce_scatter_block)
    Reduce_scatter = delegate(VectorCollectives, VectorCollectives.Reduce_scatter)

    Igather = delegate(NonblockingCollectives, NonblockingCollectives.Igather)
    Igatherv = delegate(NonblockingCollectives, NonblockingCollectives.Igatherv)
    Iscatter = delegate(NonblockingCollectives, NonblockingCollectives.Iscatter)
    Iscatterv = delegate(NonblockingCollectives, NonblockingCollectives.Iscatterv)
    Iallgather = delegate(NonblockingCollectives, NonblockingCollectives.Iallgather)
    Iallgatherv = delegate(NonblockingCollectives, NonblockingCollectives.Iallgatherv)
    Ialltoall = delegate(NonblockingCollectives, NonblockingCollectives.Ialltoall)
    Ialltoallv = delegate(NonblockingCollectives, NonblockingCollectives.Ialltoallv)
    Ialltoallw = delegate(NonblockingCollectives, NonblockingCollectives.Ialltoallw)
    Ireduce_scatter_block = delegate(
        NonblockingCollectives, NonblockingCollectives.Ireduce_scatter_block
    )
    Ireduce_scatter = delegate(NonblockingCollectives, NonblockingCollectives.Ireduce_scatter)
    Iscan = delegate(NonblockingCollectives, NonblockingCollectives.Iscan)
    Iexscan = delegate(NonblockingCollectives, NonblockingCollectives.Iexscan)

    # -- persistent collectives (MPI 4.0) -------------------------------------------------------

    Barrier_init = delegate(PersistentCollectives, PersistentCollectives.Barrier_init)
    Bcast_init = delegate(PersistentCollectives, PersistentCollectives.Bcast_init)
    Gather_init = delegate(PersistentCollectives, PersistentCollectives.Gather_init)
    Gatherv_init = delegate(PersistentCollectives, PersistentCollectives.Gatherv_init)
    Scatter_init = delegate(PersistentCollectives, PersistentCollectives.Scatter_init)
    Scatterv_init = delegate(PersistentCollectives, PersistentCollectives.Scatterv_init)
    Allgather_init = delegate(PersistentCollectives, PersistentCollectives.Allgather_init)
    Allgatherv_init = delegate(PersistentCollectives, PersistentCollectives.Allgatherv_init)
    Alltoall_init = delegate(PersistentCollectives, PersistentCollectives.Alltoall_init)
    Alltoallv_init = delegate(PersistentCollectives, PersistentCollectives.Alltoallv_init)
    Alltoallw_init = delegate(PersistentCollectives, PersistentCollectives.Alltoallw_init)
    Reduce_init = delegate(PersistentCollectives, PersistentCollectives.Reduce_init)
    Allreduce_init = delegate(PersistentCollectives, PersistentCollectives.Allreduce_init)
    Reduce_scatter_block_init = delegate(
        PersistentCollectives, PersistentCollectives.Reduce_scatter_block_init
    )
    Reduce_scatter_init = delegate(PersistentCollectives, PersistentCollectives.Reduce_scatter_init)
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


kinds.register(kinds.NO_TOPOLOGY, Intracomm)


def make_world(rt: Runtime) -> tuple[Intracomm, Intracomm]:
    """COMM_WORLD (contexts 0/1, rank == node) and COMM_SELF (contexts 2/3) of ``rt``."""
    node = rt.node
    world = CommState(rt, 0, tuple(range(rt.num_nodes)), node, name="MPI_COMM_WORLD")
    rt.world = world
    self_ = CommState(rt, 2, (node,), 0, name="MPI_COMM_SELF")
    return Intracomm._of(world), Intracomm._of(self_)
