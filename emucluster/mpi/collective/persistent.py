"""Persistent collectives (MPI 4.0): ``Bcast_init`` ... ``Neighbor_alltoallw_init``.

Each ``*_init`` call returns an inactive `Prequest`; every ``Start`` begins the matching
nonblocking collective (``Ibcast`` ...) with the arguments given at init, and completing the
request leaves it inactive for the next ``Start``. As with MPI's, every member must start its
persistent collectives in the same order, and the buffers belong to the operation from
``Start`` to completion. The ``info`` argument is accepted and has no hints here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.collective.ops import Op, predefined_ops
from emucluster.mpi.info import INFO_NULL, Info
from emucluster.mpi.pt2pt.persistent import persistent

if TYPE_CHECKING:
    from emucluster.mpi.comm.comm import Comm
    from emucluster.mpi.pt2pt.persistent import Prequest

__all__ = ["PersistentCollectives"]

SUM = predefined_ops["SUM"]


class PersistentCollectives:
    """The persistent collective calls of a communicator (``Intracomm``, ``Intercomm`` and
    ``Topocomm`` delegate here); each starts the communicator's own nonblocking call."""

    __slots__ = ("_comm", "_engine")

    def __init__(self, comm: Comm) -> None:
        self._engine = comm._state().runtime.engine  # COMM_NULL raises here, not at Start
        self._comm: Any = comm

    def _init(self, nonblocking: str, *args: Any) -> Prequest:
        start = getattr(self._comm, nonblocking)
        return persistent(self._engine, lambda: start(*args))

    def Barrier_init(self, info: Info = INFO_NULL) -> Prequest:
        """A persistent Barrier."""
        return self._init("Ibarrier")

    def Bcast_init(self, buf: Any, root: int = 0, info: Info = INFO_NULL) -> Prequest:
        """A persistent Bcast."""
        return self._init("Ibcast", buf, root)

    def Gather_init(self, sendbuf: Any, recvbuf: Any, root: int = 0,
                    info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Gather."""
        return self._init("Igather", sendbuf, recvbuf, root)

    def Gatherv_init(self, sendbuf: Any, recvbuf: Any, root: int = 0,
                     info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Gatherv."""
        return self._init("Igatherv", sendbuf, recvbuf, root)

    def Scatter_init(self, sendbuf: Any, recvbuf: Any, root: int = 0,
                     info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Scatter."""
        return self._init("Iscatter", sendbuf, recvbuf, root)

    def Scatterv_init(self, sendbuf: Any, recvbuf: Any, root: int = 0,
                      info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Scatterv."""
        return self._init("Iscatterv", sendbuf, recvbuf, root)

    def Allgather_init(self, sendbuf: Any, recvbuf: Any, info: Info = INFO_NULL) -> Prequest:
        """A persistent Allgather."""
        return self._init("Iallgather", sendbuf, recvbuf)

    def Allgatherv_init(self, sendbuf: Any, recvbuf: Any, info: Info = INFO_NULL) -> Prequest:
        """A persistent Allgatherv."""
        return self._init("Iallgatherv", sendbuf, recvbuf)

    def Alltoall_init(self, sendbuf: Any, recvbuf: Any, info: Info = INFO_NULL) -> Prequest:
        """A persistent Alltoall."""
        return self._init("Ialltoall", sendbuf, recvbuf)

    def Alltoallv_init(self, sendbuf: Any, recvbuf: Any, info: Info = INFO_NULL) -> Prequest:
        """A persistent Alltoallv."""
        return self._init("Ialltoallv", sendbuf, recvbuf)

    def Alltoallw_init(self, sendbuf: Any, recvbuf: Any, info: Info = INFO_NULL) -> Prequest:
        """A persistent Alltoallw."""
        return self._init("Ialltoallw", sendbuf, recvbuf)

    def Reduce_init(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0,
                    info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Reduce."""
        return self._init("Ireduce", sendbuf, recvbuf, op, root)

    def Allreduce_init(self, sendbuf: Any, recvbuf: Any, op: Op = SUM,
                       info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Allreduce."""
        return self._init("Iallreduce", sendbuf, recvbuf, op)

    def Reduce_scatter_block_init(self, sendbuf: Any, recvbuf: Any, op: Op = SUM,
                                  info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Reduce_scatter_block."""
        return self._init("Ireduce_scatter_block", sendbuf, recvbuf, op)

    def Reduce_scatter_init(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                            op: Op = SUM, info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Reduce_scatter."""
        return self._init("Ireduce_scatter", sendbuf, recvbuf, recvcounts, op)

    def Scan_init(self, sendbuf: Any, recvbuf: Any, op: Op = SUM,
                  info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Scan."""
        return self._init("Iscan", sendbuf, recvbuf, op)

    def Exscan_init(self, sendbuf: Any, recvbuf: Any, op: Op = SUM,
                    info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Exscan."""
        return self._init("Iexscan", sendbuf, recvbuf, op)

    def Neighbor_allgather_init(self, sendbuf: Any, recvbuf: Any,
                                info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Neighbor_allgather (topologies)."""
        return self._init("Ineighbor_allgather", sendbuf, recvbuf)

    def Neighbor_allgatherv_init(self, sendbuf: Any, recvbuf: Any,
                                 info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Neighbor_allgatherv (topologies)."""
        return self._init("Ineighbor_allgatherv", sendbuf, recvbuf)

    def Neighbor_alltoall_init(self, sendbuf: Any, recvbuf: Any,
                               info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Neighbor_alltoall (topologies)."""
        return self._init("Ineighbor_alltoall", sendbuf, recvbuf)

    def Neighbor_alltoallv_init(self, sendbuf: Any, recvbuf: Any,
                                info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Neighbor_alltoallv (topologies)."""
        return self._init("Ineighbor_alltoallv", sendbuf, recvbuf)

    def Neighbor_alltoallw_init(self, sendbuf: Any, recvbuf: Any,
                                info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A persistent Neighbor_alltoallw (topologies)."""
        return self._init("Ineighbor_alltoallw", sendbuf, recvbuf)
