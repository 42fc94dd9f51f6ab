"""The v-collectives, Reduce_scatter(_block) and every nonblocking collective of an
intracommunicator (``Intracomm`` delegates to `VectorCollectives` and `NonblockingCollectives`).

Nonblocking calls are progress-driven: each starts the same algorithm generator the blocking
call runs (`emucluster.mpi.collective.plans`) inside a Request that the progress engine advances;
the receive buffers are filled when the algorithm completes. Reduce_scatter without
recvcounts first agrees the counts with a blocking allgather (every member calls it at the
same point of its sequence of collectives).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.buffer.spec import message
from emucluster.mpi.collective import plans as bufcoll
from emucluster.mpi.collective.calls import (
    CollectiveCalls,
    fill,
    run_plan,
    start,
    start_plan,
)
from emucluster.mpi.collective.ops import BufferCombine, Op, predefined_ops
from emucluster.mpi.constants import in_place

if TYPE_CHECKING:
    from emucluster.mpi.request.request import Request

__all__ = ["NonblockingCollectives", "VectorCollectives"]

SUM = predefined_ops["SUM"]


class VectorCollectives(CollectiveCalls):
    """Blocking v-collectives and Reduce_scatter(_block)."""

    __slots__ = ()

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                algorithm: str | None = None) -> None:  # fmt: skip
        """Gather with per-rank counts and displacements at the root."""
        st = self._root(root)
        run_plan(st, algorithm, bufcoll.gatherv(st, sendbuf, recvbuf, root))

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                 algorithm: str | None = None) -> None:  # fmt: skip
        """Scatter with per-rank counts and displacements at the root."""
        st = self._root(root)
        run_plan(st, algorithm, bufcoll.scatterv(st, sendbuf, recvbuf, root))

    def Allgatherv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """Allgather with per-rank counts and displacements."""
        st = self._state()
        run_plan(st, algorithm, bufcoll.allgatherv(st, sendbuf, recvbuf))

    def Alltoallv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """Alltoall with per-rank counts and displacements on both sides."""
        st = self._state()
        run_plan(st, algorithm, bufcoll.alltoallv(st, sendbuf, recvbuf))

    def Alltoallw(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """Alltoall with per-rank counts, byte displacements and datatypes."""
        st = self._state()
        run_plan(st, algorithm, bufcoll.alltoallw(st, sendbuf, recvbuf))

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
                             algorithm: str | None = None) -> None:  # fmt: skip
        """Elementwise ``op`` of every rank's buffer; rank i keeps block i."""
        st = self._state()
        run_plan(st, algorithm, bufcoll.reduce_scatter_block(st, sendbuf, recvbuf, op))

    def Reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                       op: Op = SUM, *, algorithm: str | None = None) -> None:  # fmt: skip
        """Elementwise ``op`` of every rank's buffer; rank i keeps ``recvcounts[i]`` elements."""
        st = self._state()
        plan = bufcoll.reduce_scatter(st, sendbuf, recvbuf, recvcounts, op, self._counts_of(st))
        run_plan(st, algorithm, plan)


class NonblockingCollectives(CollectiveCalls):
    """Nonblocking collectives (progress-driven)."""

    __slots__ = ()

    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Gather."""
        st = self._root(root)
        return start_plan(st, algorithm, bufcoll.gather(st, sendbuf, recvbuf, root))

    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                 algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Gatherv."""
        st = self._root(root)
        return start_plan(st, algorithm, bufcoll.gatherv(st, sendbuf, recvbuf, root))

    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                 algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Scatter."""
        st = self._root(root)
        return start_plan(st, algorithm, bufcoll.scatter(st, sendbuf, recvbuf, root))

    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                  algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Scatterv."""
        st = self._root(root)
        return start_plan(st, algorithm, bufcoll.scatterv(st, sendbuf, recvbuf, root))

    def Iallgather(self, sendbuf: Any, recvbuf: Any, *,
                   algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Allgather."""
        st = self._state()
        return start_plan(st, algorithm, bufcoll.allgather(st, sendbuf, recvbuf))

    def Iallgatherv(self, sendbuf: Any, recvbuf: Any, *,
                    algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Allgatherv."""
        st = self._state()
        return start_plan(st, algorithm, bufcoll.allgatherv(st, sendbuf, recvbuf))

    def Ialltoall(self, sendbuf: Any, recvbuf: Any, *,
                  algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Alltoall."""
        st = self._state()
        return start_plan(st, algorithm, bufcoll.alltoall(st, sendbuf, recvbuf))

    def Ialltoallv(self, sendbuf: Any, recvbuf: Any, *,
                   algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Alltoallv."""
        st = self._state()
        return start_plan(st, algorithm, bufcoll.alltoallv(st, sendbuf, recvbuf))

    def Ialltoallw(self, sendbuf: Any, recvbuf: Any, *,
                   algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Alltoallw."""
        st = self._state()
        return start_plan(st, algorithm, bufcoll.alltoallw(st, sendbuf, recvbuf))

    def Ireduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
                              algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Reduce_scatter_block."""
        st = self._state()
        return start_plan(st, algorithm, bufcoll.reduce_scatter_block(st, sendbuf, recvbuf, op))

    def Ireduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                        op: Op = SUM, *, algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Reduce_scatter."""
        st = self._state()
        plan = bufcoll.reduce_scatter(st, sendbuf, recvbuf, recvcounts, op, self._counts_of(st))
        return start_plan(st, algorithm, plan)

    def Iscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
              algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Scan."""
        return self._iprefix("scan", sendbuf, recvbuf, op, algorithm)

    def Iexscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
                algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Exscan (rank 0's recvbuf is left alone)."""
        return self._iprefix("exscan", sendbuf, recvbuf, op, algorithm)

    def _iprefix(self, operation: str, sendbuf: Any, recvbuf: Any, op: Op,
                 algorithm: str | None) -> Request:  # fmt: skip
        st = self._state()
        rmsg = message(recvbuf, writable=True)
        smsg = rmsg if in_place(sendbuf) else message(sendbuf, writable=False)
        combine = BufferCombine(op, smsg.datatype)

        def post(result: bytes | None) -> None:
            if result is not None:
                fill(rmsg, result)

        return start(st, operation, algorithm, (bytes(smsg.view), combine), post)
