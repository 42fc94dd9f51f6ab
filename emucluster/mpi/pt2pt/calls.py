"""Point-to-point calls of a communicator: send and receive, blocking or not, and probes.

``Comm`` delegates every call here (``emucluster.mpi.comm.delegate``): `PointToPoint` holds
the communicator's state and posts operations to the rank's engine. Lowercase calls pickle
Python objects (protocol 5); uppercase calls send the bytes of buffer message specs (see
``emucluster.mpi.buffer.spec``); a non-contiguous derived type is received into a staging
buffer and unpacked once. Buffered sends go through ``emucluster.mpi.pt2pt.bsend``.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from emucluster.mpi.buffer.serial import PICKLE
from emucluster.mpi.buffer.spec import message, plain_view
from emucluster.mpi.constants import (
    ANY_SOURCE,
    ANY_TAG,
    PROC_NULL,
    TAG_UB_VALUE,
)
from emucluster.mpi.errors import (
    ERR_COMM,
    ERR_RANK,
    ERR_TAG,
)
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.pt2pt import bsend
from emucluster.mpi.request.pending import BothPending, RecvPending, SendPending
from emucluster.mpi.request.request import Request, completed
from emucluster.p2p.envelope import ANY_SOURCE as CORE_ANY_SOURCE
from emucluster.p2p.protocol import Outcome
from emucluster.port.progress import DeadlockError

if TYPE_CHECKING:
    from emucluster.mpi.comm.comm import Comm
    from emucluster.mpi.comm.state import CommState
    from emucluster.mpi.request.status import Status
    from emucluster.p2p.protocol import RecvOp, SendOp
    from emucluster.port.progress import Progress


__all__ = ["PointToPoint"]


class PointToPoint:
    """The point-to-point calls of one communicator (``Comm`` delegates here)."""

    __slots__ = ("_st",)

    def __init__(self, comm: Comm) -> None:
        self._st: CommState | None = comm._st

    def _state(self) -> CommState:
        st = self._st
        if st is None:
            raise MPIException(ERR_COMM, "the communicator is COMM_NULL (or freed)")
        return st

    def _engine(self) -> Progress:
        """The progress engine of the communicator's rank (``_state`` inlined: a send asks
        for it on the way to the wire)."""
        st = self._st
        if st is None:
            raise MPIException(ERR_COMM, "the communicator is COMM_NULL (or freed)")
        return st.runtime.engine

    # -- lowercase point-to-point (pickled objects) -------------------------------------------

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send a Python object (blocking; returns once the object may be reused)."""
        _wait_send(self._st, self._post_send(PICKLE.dumps(obj), dest, tag, False))

    def bsend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Buffered send: returns at once; the copy leaves from the attached buffer."""
        bsend.start(self, PICKLE.dumps(obj), dest, tag)

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Synchronous send: returns once a receive has matched it."""
        _wait_send(self._st, self._post_send(PICKLE.dumps(obj), dest, tag, True))

    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking send of a Python object."""
        return self._send_request(self._post_send(PICKLE.dumps(obj), dest, tag, False))

    def ibsend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking buffered send."""
        return bsend.start(self, PICKLE.dumps(obj), dest, tag)

    def issend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking synchronous send."""
        return self._send_request(self._post_send(PICKLE.dumps(obj), dest, tag, True))

    def recv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: Status | None = None) -> Any:  # fmt: skip
        """Receive a Python object (a ``buf`` is ignored, with a warning)."""
        if buf is not None:
            _warn_buf(buf)
        op = self._post_recv(source, tag, None)
        if op is None:
            return completed(None).wait(status)
        if not op.done:
            _wait_op(self._st, op)
        if op.outcome is Outcome.OK:  # RecvPending.finish's common case, without the object
            if status is not None:
                status.set(op.msg_source, op.msg_tag, op.count)
            data = op.data
            return None if data is None else PICKLE.loads(data)
        return RecvPending(op, self._engine(), unpickle=True).finish(status)

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Nonblocking receive of a Python object; ``wait()`` returns it."""
        op = self._post_recv(source, tag, None)
        return (
            completed(None)
            if op is None
            else Request._of(RecvPending(op, self._engine(), unpickle=True), self._engine())
        )

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: Status | None = None) -> Any:  # fmt: skip
        """Send one object and receive another."""
        request = self.irecv(None, source, recvtag)
        self.send(sendobj, dest, sendtag)
        return request.wait(status)

    def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: Status | None = None) -> bool:  # fmt: skip
        """Wait until a matching message is available (not received); returns True."""
        return self.Probe(source, tag, status)

    def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> bool:  # fmt: skip
        """Whether a matching message is available now."""
        return self.Iprobe(source, tag, status)

    # -- uppercase point-to-point (buffers) ---------------------------------------------------

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Send a buffer (blocking)."""
        view = plain_view(buf, False)
        if view is None:
            view = message(buf, writable=False).view
        op = self._post_send(view, dest, tag, False)
        if op is not None and not (op.done and op.outcome is Outcome.OK):
            _wait_send(self._st, op)

    def Bsend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Buffered send: returns at once; the copy leaves from the attached buffer."""
        bsend.start(self, bytes(message(buf, writable=False).view), dest, tag)

    Rsend = Send

    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Synchronous buffer send."""
        _wait_send(self._st, self._post_send(message(buf, writable=False).view, dest, tag, True))

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking buffer send (do not modify the buffer until it completes)."""
        view = plain_view(buf, False)
        if view is None:
            view = message(buf, writable=False).view
        return self._send_request(self._post_send(view, dest, tag, False))

    def Ibsend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking buffered send."""
        return bsend.start(self, bytes(message(buf, writable=False).view), dest, tag)

    Irsend = Isend

    def Issend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking synchronous buffer send."""
        return self._send_request(
            self._post_send(message(buf, writable=False).view, dest, tag, True)
        )

    def Recv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: Status | None = None) -> None:  # fmt: skip
        """Receive into a buffer; ERR_TRUNCATE if the message is longer."""
        view = plain_view(buf, True)  # the common buffers: no staging, nothing to deliver
        deliver = None
        if view is None:
            msg = message(buf, writable=True, staged=True)
            view, deliver = msg.view, msg.deliver
        op = self._post_recv(source, tag, view)
        if op is None:
            completed(None).wait(status)
            return
        if not op.done:
            _wait_op(self._st, op)
        if deliver is None and op.outcome is Outcome.OK:  # RecvPending.finish's common case
            if status is not None:
                status.set(op.msg_source, op.msg_tag, op.count)
            return
        RecvPending(op, self._engine(), unpickle=False, deliver=deliver).finish(status)

    def Irecv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Nonblocking receive into a buffer."""
        view = plain_view(buf, True)
        deliver = None
        if view is None:
            msg = message(buf, writable=True, staged=True)
            view, deliver = msg.view, msg.deliver
        op = self._post_recv(source, tag, view)
        if op is None:
            return completed(None)
        engine = self._engine()
        return Request._of(RecvPending(op, engine, unpickle=False, deliver=deliver), engine)

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: Status | None = None) -> None:  # fmt: skip
        """Send one buffer and receive into another (both specs are checked before either
        is posted, so a bad one leaves nothing behind)."""
        outgoing = message(sendbuf, writable=False).view
        request = self.Irecv(recvbuf, source, recvtag)
        _wait_send(self._st, self._post_send(outgoing, dest, sendtag, False))
        request.Wait(status)

    def Isendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                  source: int = ANY_SOURCE, recvtag: int = ANY_TAG) -> Request:  # fmt: skip
        """Nonblocking Sendrecv: one request completing both."""
        outgoing = message(sendbuf, writable=False).view
        receive = self.Irecv(recvbuf, source, recvtag)
        op = self._post_send(outgoing, dest, sendtag, False)
        send = completed() if op is None else Request._of(SendPending(op), self._engine())
        return Request._of(BothPending(send, receive), self._engine())

    def Isendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0,
                          source: int = ANY_SOURCE, recvtag: int = ANY_TAG) -> Request:  # fmt: skip
        """Nonblocking Sendrecv_replace (the outgoing bytes are copied first)."""
        outgoing = bytes(message(buf, writable=True).view)
        receive = self.Irecv(buf, source, recvtag)
        op = self._post_send(outgoing, dest, sendtag, False)
        send = completed() if op is None else Request._of(SendPending(op), self._engine())
        return Request._of(BothPending(send, receive), self._engine())

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0,
                         source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                         status: Status | None = None) -> None:  # fmt: skip
        """Send a buffer and receive into the same buffer."""
        outgoing = bytes(message(buf, writable=True).view)
        request = self.Irecv(buf, source, recvtag)
        _wait_send(self._st, self._post_send(outgoing, dest, sendtag, False))
        request.Wait(status)

    def Probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: Status | None = None) -> bool:  # fmt: skip
        """Wait until a matching message is available; returns True."""
        st, src, tg = self._probe_args(source, tag)
        if src is None:
            completed(None).wait(status)
            return True
        engine = st.runtime.engine
        context = st.context
        info = engine.probe(context, src, tg)
        if info is None:
            try:
                engine.wait_for(lambda: engine.probe(context, src, tg) is not None)
            except DeadlockError as exc:
                raise MPIException(ERR_RANK, f"Probe: {exc}") from None
            info = engine.probe(context, src, tg)
            assert info is not None
        if status is not None:
            status.set(info.source, info.tag, info.count)
        return True

    def Iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> bool:  # fmt: skip
        """Whether a matching message is available now."""
        st, src, tg = self._probe_args(source, tag)
        if src is None:
            completed(None).wait(status)
            return True
        engine = st.runtime.engine
        engine.progress()
        info = engine.probe(st.context, src, tg)
        if info is None:
            return False
        if status is not None:
            status.set(info.source, info.tag, info.count)
        return True

    # -- internals shared with bsend and mprobe ---------------------------------------------------

    def _post_send(self, payload: bytes | memoryview, dest: int, tag: int,
                   sync: bool) -> SendOp | None:  # fmt: skip
        st = self._st
        if st is None:
            raise MPIException(ERR_COMM, "the communicator is COMM_NULL (or freed)")
        if not 0 <= tag <= TAG_UB_VALUE:
            raise MPIException(ERR_TAG, f"invalid tag {tag} (0..{TAG_UB_VALUE})")
        if not 0 <= dest < st.size:
            if dest == PROC_NULL:
                return None
            raise MPIException(ERR_RANK, f"invalid rank {dest} (communicator of {st.size})")
        return st.runtime.engine.send(st.context, st.rank, tag, st.nodes[dest], payload,
                                      sync=sync)  # fmt: skip

    def _send_request(self, op: SendOp | None) -> Request:
        """The request of a send just posted (None: to PROC_NULL, complete)."""
        if op is None:
            return completed()
        st = self._st
        assert st is not None  # the send was posted on it
        return Request._of(SendPending(op), st.runtime.engine)

    def _post_recv(self, source: int, tag: int, buf: memoryview | None) -> RecvOp | None:
        st = self._st
        if st is None:
            raise MPIException(ERR_COMM, "the communicator is COMM_NULL (or freed)")
        if not 0 <= tag <= TAG_UB_VALUE and tag != ANY_TAG:
            raise MPIException(ERR_TAG, f"invalid tag {tag} (0..{TAG_UB_VALUE} or ANY_TAG)")
        if 0 <= source < st.size:
            src_node: int | None = st.nodes[source]
        elif source == ANY_SOURCE:
            source, src_node = CORE_ANY_SOURCE, None
        elif source == PROC_NULL:
            return None
        else:
            raise MPIException(ERR_RANK, f"invalid rank {source} (communicator of {st.size})")
        return st.runtime.engine.recv(st.context, source, tag, src_node, buf)

    def _probe_args(self, source: int, tag: int) -> tuple[CommState, int | None, int]:
        st = self._state()
        if not 0 <= tag <= TAG_UB_VALUE and tag != ANY_TAG:
            raise MPIException(ERR_TAG, f"invalid tag {tag}")
        if source == ANY_SOURCE:
            return st, CORE_ANY_SOURCE, tag
        if source == PROC_NULL:
            return st, None, tag
        if not 0 <= source < st.size:
            raise MPIException(ERR_RANK, f"invalid rank {source} (communicator of {st.size})")
        return st, source, tag


def _warn_buf(buf: Any) -> None:
    if buf is not None:
        warnings.warn("the buf argument of recv is ignored: any size is received",
                      UserWarning, stacklevel=4)  # user -> delegate -> recv -> here  # fmt: skip


def _wait_op(st: CommState | None, op: RecvOp | SendOp) -> None:
    if op.done:
        return
    assert st is not None  # an operation was posted on it
    try:
        st.runtime.engine.wait_for(lambda: op.done)
    except DeadlockError as exc:
        raise MPIException(ERR_RANK, str(exc)) from None


def _wait_send(st: CommState | None, op: SendOp | None) -> None:
    if op is None:
        return
    _wait_op(st, op)
    if op.outcome is not Outcome.OK:
        SendPending(op).finish(None)
