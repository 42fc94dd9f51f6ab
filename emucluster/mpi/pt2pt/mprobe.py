"""Matched probe: ``Mprobe`` / ``Improbe`` and ``MPI.Message``.

A matched probe finds the first message a receive with the pattern would take and claims it
at once, so no other receive can take it: it posts a receive for exactly that message's
source and tag (the earliest queued message of that pair, by MPI's non-overtaking order: the
one probed) that keeps the bytes. ``Message.Recv`` / ``recv`` then hand them over (a buffer
receive copies them into the buffer once, with MPI's truncation check).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.buffer.spec import message
from emucluster.mpi.constants import ANY_SOURCE, ANY_TAG
from emucluster.mpi.errors import ERR_RANK, ERR_REQUEST, ERR_TRUNCATE
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.handles import Handled
from emucluster.mpi.pt2pt.calls import PointToPoint
from emucluster.mpi.request.pending import RecvPending
from emucluster.mpi.request.request import Request, completed
from emucluster.port.progress import DeadlockError

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.comm import Comm
    from emucluster.mpi.request.status import Status
    from emucluster.p2p.protocol import RecvOp
    from emucluster.port.progress import Progress

__all__ = ["MESSAGE_NO_PROC", "MESSAGE_NULL", "MatchedProbe", "Message"]


class Message(Handled):
    """A message claimed by a matched probe (mpi4py's ``MPI.Message``); receive it once."""

    __slots__ = ("_engine", "_op")

    def _handle_key(self) -> object:
        return self._op

    def __init__(self, message: Message | None = None) -> None:
        if message is not None and not isinstance(message, Message):
            raise TypeError(f"Message() takes a Message, not {type(message).__name__}")
        self._op: RecvOp | str | None = None if message is None else message._op
        self._engine: Progress | None = None if message is None else message._engine

    def free(self) -> None:
        """Free safely (mpi4py): MESSAGE_NO_PROC and MESSAGE_NULL stay; another handle
        becomes MESSAGE_NULL (the message is not received)."""
        if self is not MESSAGE_NO_PROC:
            self._op = None

    def __bool__(self) -> bool:
        return self._op is not None

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """MESSAGE_NULL / MESSAGE_NO_PROC pickle by name (the same object back; a copy
        handle gives a new handle); a matched message cannot be pickled (ValueError)."""
        for name, predefined in (("NULL", MESSAGE_NULL), ("NO_PROC", MESSAGE_NO_PROC)):
            if self is predefined:
                return (_predefined_message, (name, True))
            if self._op is predefined._op:
                return (type(self), (predefined,))
        raise ValueError("cannot pickle a matched message")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self._op is other._op

    __hash__ = None  # type: ignore[assignment]  # unhashable, as mpi4py's handles

    def __repr__(self) -> str:
        if self._op is None:
            return "<emucluster.MPI.Message NULL>"
        return "<emucluster.MPI.Message NO_PROC>" if self._op == "noproc" else super().__repr__()

    def _take(self) -> RecvOp | None:
        op = self._op
        if op is None:
            raise MPIException(ERR_REQUEST, "receive of MESSAGE_NULL")
        if self is not MESSAGE_NO_PROC:  # the predefined handle itself stays NO_PROC
            self._op = None
        return None if isinstance(op, str) else op

    # -- buffers --------------------------------------------------------------------------------

    def Recv(self, buf: Any, status: Status | None = None) -> None:
        """Receive the message into ``buf``."""
        self.Irecv(buf).Wait(status)

    def Irecv(self, buf: Any) -> Request:
        """Nonblocking receive of the message into ``buf`` (a non-contiguous derived type is
        received into a staging buffer and unpacked once, as ``Comm.Irecv`` does)."""
        msg = message(buf, writable=True, staged=True) if buf is not None else None
        op = self._take()
        if op is None:
            return completed(None)
        if msg is None:
            return Request._of(_IntoBuffer(op, self._engine, None, None), self._engine)
        return Request._of(_IntoBuffer(op, self._engine, msg.view, msg.deliver), self._engine)

    # -- objects --------------------------------------------------------------------------------

    def recv(self, status: Status | None = None) -> Any:
        """Receive the message as a Python object."""
        return self.irecv().wait(status)

    def irecv(self) -> Request:
        """Nonblocking receive of the message as a Python object."""
        op = self._take()
        if op is None:
            return completed(None)
        assert self._engine is not None  # set with the operation
        return Request._of(RecvPending(op, self._engine, unpickle=True), self._engine)

    @classmethod
    def Probe(cls, comm: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: Status | None = None) -> Message:  # fmt: skip
        """``comm.Mprobe``."""
        found: Message = comm.Mprobe(source, tag, status)
        return found

    @classmethod
    def Iprobe(cls, comm: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> Message | None:  # fmt: skip
        """``comm.Improbe``."""
        found: Message | None = comm.Improbe(source, tag, status)
        return found

    @classmethod
    def probe(cls, comm: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: Status | None = None) -> Message:  # fmt: skip
        """``comm.mprobe``."""
        found: Message = comm.mprobe(source, tag, status)
        return found

    @classmethod
    def iprobe(cls, comm: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> Message | None:  # fmt: skip
        """``comm.improbe``."""
        found: Message | None = comm.improbe(source, tag, status)
        return found


class _IntoBuffer:
    """Receive of a claimed message into a buffer: the bytes are copied in at completion
    (into the staging buffer of a non-contiguous type, then unpacked by ``deliver``)."""

    __slots__ = ("deliver", "engine", "op", "view")

    def __init__(self, op: RecvOp, engine: Progress | None, view: memoryview | None,
                 deliver: Callable[[int], None] | None) -> None:  # fmt: skip
        self.op = op
        self.engine = engine
        self.view = view
        self.deliver = deliver

    def done(self) -> bool:
        return self.op.done

    def finish(self, status: Status | None) -> object:
        op = self.op
        assert self.engine is not None  # set with the operation
        RecvPending(op, self.engine, unpickle=False).finish(status)
        data = op.data if op.data is not None else b""
        room = 0 if self.view is None else len(self.view)
        if len(data) > room:
            if status is not None:
                status.set(op.msg_source, op.msg_tag, room, ERR_TRUNCATE)
            raise MPIException(
                ERR_TRUNCATE, f"message from rank {op.msg_source} tag {op.msg_tag} has "
                f"{len(data)} bytes; the receive buffer holds {room}",
            )  # fmt: skip
        if self.view is not None and data:
            self.view[: len(data)] = data
        if self.deliver is not None:
            self.deliver(len(data))
        return None

    def cancel(self) -> None:
        return None


def _predefined_message(name: str, same: bool) -> Message:
    found = MESSAGE_NULL if name == "NULL" else MESSAGE_NO_PROC
    return found if same else Message(found)


MESSAGE_NULL = Message()
MESSAGE_NO_PROC = Message()
MESSAGE_NO_PROC._op = "noproc"


def _no_proc() -> Message:
    return Message(MESSAGE_NO_PROC)


class MatchedProbe:
    """``Mprobe`` / ``Improbe`` / ``mprobe`` / ``improbe`` of a communicator (``Comm``
    delegates here)."""

    __slots__ = ("_p2p",)

    def __init__(self, comm: Comm) -> None:
        self._p2p = PointToPoint(comm)

    def Improbe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                status: Status | None = None) -> Message | None:  # fmt: skip
        """Claim a matching message if one is there now; None if not."""
        st, src, tg = self._p2p._probe_args(source, tag)
        if src is None:
            completed(None).wait(status)
            return _no_proc()
        engine = st.runtime.engine
        engine.progress()
        info = engine.probe(st.context, src, tg)
        if info is None:
            return None
        if status is not None:
            status.set(info.source, info.tag, info.count)
        found = Message()
        found._engine = engine
        found._op = engine.recv(st.context, info.source, info.tag, st.nodes[info.source], None)
        return found

    def Mprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> Message:  # fmt: skip
        """Wait for a matching message and claim it."""
        st, src, tg = self._p2p._probe_args(source, tag)
        if src is not None:
            engine = st.runtime.engine
            context = st.context
            try:
                engine.wait_for(lambda: engine.probe(context, src, tg) is not None)
            except DeadlockError as exc:
                raise MPIException(ERR_RANK, f"Mprobe: {exc}") from None
        found = self.Improbe(source, tag, status)
        assert found is not None
        return found

    def improbe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
                status: Status | None = None) -> Message | None:  # fmt: skip
        """Claim a matching message (of objects) if one is there now."""
        return self.Improbe(source, tag, status)

    def mprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> Message:  # fmt: skip
        """Wait for a matching message (of objects) and claim it."""
        return self.Mprobe(source, tag, status)
