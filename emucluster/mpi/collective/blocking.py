"""The blocking collective calls of an intracommunicator, lowercase and uppercase.

Lowercase calls pickle objects; uppercase calls move the raw bytes of buffer specs and reduce
elementwise on their numpy dtype. Each runs one collective call (``emucluster.mpi.collective.
calls``) to completion; ``Intracomm`` delegates to `Collectives` (``emucluster.mpi.comm.
delegate``).
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

from emucluster.mpi.buffer.spec import MessageSpecError, Msg, message
from emucluster.mpi.collective import plans as bufcoll
from emucluster.mpi.collective.calls import (
    CollectiveCalls,
    dump_object,
    fill,
    object_items,
    run,
    run_plan,
    start,
)
from emucluster.mpi.collective.ops import BufferCombine, ObjectCombine, Op, predefined_ops
from emucluster.mpi.constants import in_place
from emucluster.mpi.errors import (
    ERR_COUNT,
    ERR_TYPE,
)

if TYPE_CHECKING:
    from emucluster.mpi.request.request import Request

__all__ = ["Collectives"]

SUM = predefined_ops["SUM"]


class Collectives(CollectiveCalls):
    """The blocking collective calls of an intracommunicator (``Intracomm`` delegates here)."""

    __slots__ = ()

    # -- lowercase (pickled objects) ----------------------------------------------------------

    def barrier(self, *, algorithm: str | None = None) -> None:
        """Wait until every rank has entered."""
        run(self._state(), "barrier", algorithm)

    def bcast(self, obj: Any = None, root: int = 0, *, algorithm: str | None = None) -> Any:
        """``obj`` of the root, on every rank."""
        st = self._root(root)
        data = dump_object(obj) if st.rank == root else None
        with st.lock("bcast"):
            return pickle.loads(run(st, "bcast", algorithm, data, root))

    def gather(self, sendobj: Any, root: int = 0, *, algorithm: str | None = None) -> Any:
        """The list of every rank's object at the root; None elsewhere."""
        st = self._root(root)
        with st.lock("gather"):
            blocks = run(st, "gather", algorithm, dump_object(sendobj), root)
        return None if blocks is None else [pickle.loads(b) for b in blocks]

    def scatter(self, sendobj: Any = None, root: int = 0, *, algorithm: str | None = None) -> Any:
        """Item ``rank`` of the root's sequence."""
        st = self._root(root)
        blocks = None
        if st.rank == root:
            blocks = [dump_object(item) for item in object_items(sendobj, st.size)]
        with st.lock("scatter"):
            return pickle.loads(run(st, "scatter", algorithm, blocks, root))

    def allgather(self, sendobj: Any, *, algorithm: str | None = None) -> list[Any]:
        """The list of every rank's object, on every rank."""
        st = self._state()
        with st.lock("allgather"):
            blocks = run(st, "allgather", algorithm, dump_object(sendobj))
        return [pickle.loads(b) for b in blocks]

    def alltoall(self, sendobj: Any, *, algorithm: str | None = None) -> list[Any]:
        """Item j of rank i's sequence goes to rank j, at position i."""
        st = self._state()
        blocks = [dump_object(item) for item in object_items(sendobj, st.size)]
        with st.lock("alltoall"):
            return [pickle.loads(b) for b in run(st, "alltoall", algorithm, blocks)]

    def reduce(self, sendobj: Any, op: Op = SUM, root: int = 0, *,
               algorithm: str | None = None) -> Any:  # fmt: skip
        """``op`` over every rank's object, in rank order, at the root; None elsewhere."""
        st = self._root(root)
        result = run(st, "reduce", algorithm, dump_object(sendobj), ObjectCombine(op), root)
        return None if result is None else pickle.loads(result)

    def allreduce(self, sendobj: Any, op: Op = SUM, *, algorithm: str | None = None) -> Any:
        """``op`` over every rank's object, on every rank."""
        result = run(self._state(), "allreduce", algorithm, dump_object(sendobj), ObjectCombine(op))
        return pickle.loads(result)

    def scan(self, sendobj: Any, op: Op = SUM, *, algorithm: str | None = None) -> Any:
        """Inclusive prefix reduction: ranks 0..rank."""
        result = run(self._state(), "scan", algorithm, dump_object(sendobj), ObjectCombine(op))
        return pickle.loads(result)

    def exscan(self, sendobj: Any, op: Op = SUM, *, algorithm: str | None = None) -> Any:
        """Exclusive prefix reduction: ranks 0..rank-1 (None on rank 0)."""
        result = run(self._state(), "exscan", algorithm, dump_object(sendobj), ObjectCombine(op))
        return None if result is None else pickle.loads(result)

    # -- uppercase (buffers) ------------------------------------------------------------------

    def Barrier(self, *, algorithm: str | None = None) -> None:
        """Wait until every rank has entered."""
        run(self._state(), "barrier", algorithm)

    def Bcast(self, buf: Any, root: int = 0, *, algorithm: str | None = None) -> None:
        """The root's buffer into every rank's buffer."""
        st = self._root(root)
        msg = message(buf, writable=st.rank != root, staged=True)
        data = msg.view if st.rank == root else None
        result = run(st, "bcast", algorithm, data, root)
        if st.rank != root:
            fill(msg, result)
            if msg.deliver is not None:
                msg.deliver(len(result))

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0, *,
               algorithm: str | None = None) -> None:  # fmt: skip
        """Elementwise ``op`` of every rank's buffer, into the root's ``recvbuf``."""
        st = self._root(root)
        is_root = st.rank == root
        rmsg = message(recvbuf, writable=True) if is_root else None
        smsg = rmsg if in_place(sendbuf) and rmsg is not None else message(sendbuf, writable=False)
        assert smsg is not None
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)
        result = run(st, "reduce", algorithm, bytes(smsg.view), combine, root)
        if rmsg is not None:
            fill(rmsg, result)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
                  algorithm: str | None = None) -> None:  # fmt: skip
        """Elementwise ``op`` of every rank's buffer, into every ``recvbuf``."""
        st = self._state()
        rmsg = message(recvbuf, writable=True)
        smsg = rmsg if in_place(sendbuf) else message(sendbuf, writable=False)
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)
        fill(rmsg, run(st, "allreduce", algorithm, bytes(smsg.view), combine))

    def Scan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
             algorithm: str | None = None) -> None:  # fmt: skip
        """Inclusive elementwise prefix reduction."""
        st = self._state()
        rmsg = message(recvbuf, writable=True)
        smsg = rmsg if in_place(sendbuf) else message(sendbuf, writable=False)
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)
        fill(rmsg, run(st, "scan", algorithm, bytes(smsg.view), combine))

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
               algorithm: str | None = None) -> None:  # fmt: skip
        """Exclusive elementwise prefix reduction (rank 0's recvbuf is left alone)."""
        st = self._state()
        rmsg = message(recvbuf, writable=True)
        smsg = rmsg if in_place(sendbuf) else message(sendbuf, writable=False)
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)
        result = run(st, "exscan", algorithm, bytes(smsg.view), combine)
        if result is not None:
            fill(rmsg, result)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
               algorithm: str | None = None) -> None:  # fmt: skip
        """Every rank's buffer, in rank order, into the root's ``recvbuf``."""
        st = self._root(root)
        run_plan(st, algorithm, bufcoll.gather(st, sendbuf, recvbuf, root))

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                algorithm: str | None = None) -> None:  # fmt: skip
        """Block ``rank`` of the root's ``sendbuf`` into every ``recvbuf``."""
        st = self._root(root)
        run_plan(st, algorithm, bufcoll.scatter(st, sendbuf, recvbuf, root))

    def Allgather(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """Every rank's buffer, in rank order, into every ``recvbuf``."""
        st = self._state()
        run_plan(st, algorithm, bufcoll.allgather(st, sendbuf, recvbuf))

    def Alltoall(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """Block j of rank i's ``sendbuf`` into block i of rank j's ``recvbuf``."""
        st = self._state()
        run_plan(st, algorithm, bufcoll.alltoall(st, sendbuf, recvbuf))

    # -- nonblocking --------------------------------------------------------------------------

    def Ibarrier(self, *, algorithm: str | None = None) -> Request:
        """Nonblocking barrier."""
        return start(self._state(), "barrier", algorithm, (), lambda _: None)

    def Ibcast(self, buf: Any, root: int = 0, *, algorithm: str | None = None) -> Request:
        """Nonblocking Bcast (leave ``buf`` alone until the request completes)."""
        st = self._root(root)
        msg = message(buf, writable=st.rank != root, staged=True)
        data = bytes(msg.view) if st.rank == root else None

        def post(result: bytes) -> None:
            if st.rank != root:
                fill(msg, result)
                if msg.deliver is not None:
                    msg.deliver(len(result))

        return start(st, "bcast", algorithm, (data, root), post)

    def Ireduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0, *,
                algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Reduce."""
        st = self._root(root)
        rmsg = message(recvbuf, writable=True) if st.rank == root else None
        smsg = rmsg if in_place(sendbuf) and rmsg is not None else message(sendbuf, writable=False)
        assert smsg is not None
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)

        def post(result: bytes | None) -> None:
            if rmsg is not None and result is not None:
                fill(rmsg, result)

        return start(st, "reduce", algorithm, (bytes(smsg.view), combine, root), post)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
                   algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Allreduce."""
        st = self._state()
        rmsg = message(recvbuf, writable=True)
        smsg = rmsg if in_place(sendbuf) else message(sendbuf, writable=False)
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)
        return start(st, "allreduce", algorithm, (bytes(smsg.view), combine),
                     lambda result: fill(rmsg, result))  # fmt: skip


def _check_reduce(smsg: Msg, rmsg: Msg | None) -> None:
    """mpi4py's chk_cro_args: send and receive agree on datatype and count (ValueError-
    compatible MPI.Exceptions); nothing to check in place or without a receive buffer."""
    if rmsg is None or smsg is rmsg:
        return
    if smsg.datatype != rmsg.datatype:
        raise MessageSpecError(ERR_TYPE, "mismatch in send and receive MPI datatypes")
    if smsg.elements != rmsg.elements:
        raise MessageSpecError(ERR_COUNT, f"mismatch in send count {smsg.elements} "
                                          f"and receive count {rmsg.elements}")  # fmt: skip


def _blocks(view: memoryview, size: int) -> list[memoryview]:
    block, rest = divmod(len(view), size)
    if rest:
        raise ValueError(f"buffer of {len(view)} bytes does not split into {size} blocks")
    return [view[i * block : (i + 1) * block] for i in range(size)]
