"""Collectives on an intercommunicator (MPI 4.0 sec. 6.2.2), built from the local group's
intracommunicator and point-to-point between the two groups' leaders.

Both groups reach the other through the intercommunicator's *context* (`commctx.commctx_inter`:
a private duplicate, its own context id, a fresh tag per call, the local group's
intracommunicator), so no message of these calls can match the program's own. Offered:
``Barrier``/``barrier``, ``Bcast``/``bcast`` (the root's group passes ``ROOT`` at the root and
``PROC_NULL`` elsewhere; the other group passes the root's rank in the root's group),
``Allreduce``/``allreduce`` (each group receives the reduction of the *other* group's
values), ``allgather`` (each group receives the other group's objects in rank order); the other
collectives raise ERR_COMM. ``algorithm`` is accepted as the intracommunicator calls take it,
and ignored: the steps are fixed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from emucluster.mpi.buffer.spec import message
from emucluster.mpi.collective.ops import predefined_ops
from emucluster.mpi.comm.commctx import commctx_inter
from emucluster.mpi.constants import PROC_NULL, ROOT
from emucluster.mpi.errors import ERR_ROOT
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from emucluster.mpi.collective.ops import Op

__all__ = ["InterCollectives"]

_LEADER = 0
_SUM = predefined_ops["SUM"]


class InterCollectives:
    """The collectives an ``Intercomm`` offers (it delegates here)."""

    __slots__ = ("_comm",)

    def __init__(self, comm: Any) -> None:
        self._comm = comm

    def _context(self) -> tuple[Any, int, Any, bool]:
        dup, tag, local, low = commctx_inter(self._comm)
        return dup, tag, local, low

    def _check_root(self, root: int) -> None:
        if root in (ROOT, PROC_NULL):
            return
        if not 0 <= root < self._comm.Get_remote_size():
            raise MPIException(ERR_ROOT, f"invalid root {root} (remote group of "
                                         f"{self._comm.Get_remote_size()})")  # fmt: skip

    # -- barrier ---------------------------------------------------------------------------

    def Barrier(self, *, algorithm: str | None = None) -> None:
        """Return once every process of both groups has entered."""
        dup, tag, local, _ = self._context()
        local.Barrier()
        if local.Get_rank() == _LEADER:
            dup.sendrecv(None, _LEADER, tag, None, _LEADER, tag)
        local.Barrier()

    def barrier(self, *, algorithm: str | None = None) -> None:
        """Barrier."""
        self.Barrier()

    # -- broadcast -------------------------------------------------------------------------

    def bcast(self, obj: Any = None, root: int = 0, *, algorithm: str | None = None) -> Any:
        """The root's object to every process of the other group."""
        self._check_root(root)
        dup, tag, local, _ = self._context()
        if root == ROOT:
            dup.send(obj, _LEADER, tag)
            return None
        if root == PROC_NULL:
            return None
        got = dup.recv(None, root, tag) if local.Get_rank() == _LEADER else None
        return local.bcast(got, _LEADER)

    def Bcast(self, buf: Any, root: int = 0, *, algorithm: str | None = None) -> None:
        """The root's buffer to every process of the other group."""
        self._check_root(root)
        dup, tag, local, _ = self._context()
        if root == ROOT:
            dup.Send(buf, _LEADER, tag)
            return
        if root == PROC_NULL:
            return
        if local.Get_rank() == _LEADER:
            dup.Recv(buf, root, tag)
        local.Bcast(buf, _LEADER)

    # -- reductions ------------------------------------------------------------------------

    def allreduce(self, sendobj: Any, op: Op = _SUM, *, algorithm: str | None = None) -> Any:
        """The reduction of the other group's objects, at every process."""
        dup, tag, local, _ = self._context()
        mine = local.reduce(sendobj, op, _LEADER)
        theirs = dup.sendrecv(mine, _LEADER, tag, None, _LEADER, tag) if (
            local.Get_rank() == _LEADER) else None  # fmt: skip
        return local.bcast(theirs, _LEADER)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Op = _SUM, *,
                  algorithm: str | None = None) -> None:  # fmt: skip
        """The reduction of the other group's buffers into every process's ``recvbuf``."""
        dup, tag, local, _ = self._context()
        target = message(recvbuf, writable=True, staged=True)
        partial = np.empty(len(target.view), dtype=np.uint8)
        spec = [partial, target.elements, target.datatype]
        local.Reduce(sendbuf, spec, op, _LEADER)
        if local.Get_rank() == _LEADER:
            dup.Sendrecv(spec, _LEADER, tag, recvbuf, _LEADER, tag)
        local.Bcast(recvbuf, _LEADER)

    def allgather(self, sendobj: Any, *, algorithm: str | None = None) -> list[Any]:
        """The other group's objects, in its rank order, at every process."""
        dup, tag, local, _ = self._context()
        mine = local.gather(sendobj, _LEADER)
        theirs = dup.sendrecv(mine, _LEADER, tag, None, _LEADER, tag) if (
            local.Get_rank() == _LEADER) else None  # fmt: skip
        result: list[Any] = local.bcast(theirs, _LEADER)
        return result
