"""What a Request waits for: the `Pending` operations (a p2p send or receive, two as one, a
nonblocking collective's `CollDriver`, an operation already complete) and how each finishes.

Each `Pending` answers ``done()`` (advancing it if it can), ``finish(status)`` (its result,
the status filled, MPI.Exception if it failed) and ``cancel()``. ``emucluster.mpi.request.
request`` wraps them in ``MPI.Request`` handles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from emucluster.mpi.buffer.serial import PICKLE
from emucluster.mpi.constants import ANY_SOURCE, ANY_TAG
from emucluster.mpi.errors import ERR_PROC_FAILED, ERR_REVOKED, ERR_TRUNCATE
from emucluster.mpi.errors import Exception as MPIException
from emucluster.p2p.protocol import Outcome, RecvOp, SendOp

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from emucluster.coll.context import CollGen, CollRequest
    from emucluster.mpi.request.request import Request
    from emucluster.mpi.request.status import Status
    from emucluster.port.progress import Progress

__all__ = [
    "BothPending",
    "CollDriver",
    "Completed",
    "Pending",
    "RecvPending",
    "SendPending",
    "check_failed",
    "peek_status",
]


_CODES = {Outcome.TRUNCATED: ERR_TRUNCATE, Outcome.REVOKED: ERR_REVOKED}
"""The error class of a failed collective's p2p outcome (any other: ERR_PROC_FAILED)."""


class Pending(Protocol):
    """One operation a Request waits for."""

    def done(self) -> bool:
        """Whether it finished (may advance it)."""
        ...

    def finish(self, status: Status | None) -> object:
        """Its result; fills ``status``; raises MPI.Exception if it failed."""
        ...

    def cancel(self) -> None:
        """Try to cancel it."""
        ...


class SendPending:
    """A p2p send."""

    __slots__ = ("op",)

    def __init__(self, op: SendOp) -> None:
        self.op = op

    def done(self) -> bool:
        return self.op.done

    def finish(self, status: Status | None) -> object:
        op = self.op
        if op.outcome is not Outcome.OK:
            raise MPIException(ERR_PROC_FAILED, f"send to node {op.dst_node}: {op.reason}")
        if status is not None:
            status.set(ANY_SOURCE, ANY_TAG, 0)
        return None

    def cancel(self) -> None:
        return None  # sends are not cancelled (MPI 4 deprecates it)


class RecvPending:
    """A p2p receive; ``unpickle`` for lowercase receives."""

    __slots__ = ("deliver", "engine", "op", "unpickle")

    def __init__(self, op: RecvOp, engine: Progress, *, unpickle: bool,
                 deliver: Callable[[int], None] | None = None) -> None:  # fmt: skip
        self.op = op
        self.engine = engine  # the engine the receive was posted to (Cancel goes there)
        self.unpickle = unpickle
        self.deliver = deliver  # a staged receive's unpack into a derived datatype

    def done(self) -> bool:
        return self.op.done

    def finish(self, status: Status | None) -> object:
        op = self.op
        outcome = op.outcome
        if outcome is Outcome.CANCELLED:
            if status is not None:
                status.set(ANY_SOURCE, ANY_TAG, 0, cancelled=True)
            return None
        if outcome is Outcome.PEER_FAILED or outcome is Outcome.REVOKED:
            code = ERR_PROC_FAILED if outcome is Outcome.PEER_FAILED else ERR_REVOKED
            if status is not None:
                status.set(op.msg_source, op.msg_tag, 0, code)
            raise MPIException(code, op.reason)
        if outcome is Outcome.TRUNCATED:
            got = len(op.buf) if op.buf is not None else op.count
            if status is not None:
                status.set(op.msg_source, op.msg_tag, got, ERR_TRUNCATE)
            raise MPIException(
                ERR_TRUNCATE,
                f"message from rank {op.msg_source} tag {op.msg_tag} has {op.count} bytes; "
                f"the receive buffer holds {got}",
            )
        if status is not None:
            status.set(op.msg_source, op.msg_tag, op.count)
        if self.deliver is not None:
            self.deliver(op.count)
            self.deliver = None
        if not self.unpickle:
            return None
        data = op.data
        return None if data is None else PICKLE.loads(data)

    def cancel(self) -> None:
        self.engine.cancel(self.op)


class BothPending:
    """Two requests completing as one (Isendrecv); its result is the receive's."""

    __slots__ = ("receive", "send")

    def __init__(self, send: Request, receive: Request) -> None:
        self.send = send
        self.receive = receive

    def done(self) -> bool:
        return all(p is None or p.done() for p in (self.send._pending, self.receive._pending))

    def finish(self, status: Status | None) -> object:
        self.send.wait()
        return self.receive.wait(status)

    def cancel(self) -> None:
        if self.receive:
            self.receive.Cancel()


class Completed:
    """An operation complete at once (PROC_NULL): its value and source."""

    __slots__ = ("source", "value")

    def __init__(self, value: object, source: int) -> None:
        self.value = value
        self.source = source

    def done(self) -> bool:
        return True

    def finish(self, status: Status | None) -> object:
        if status is not None:
            status.set(self.source, ANY_TAG, 0)
        return self.value

    def cancel(self) -> None:
        return None


def check_failed(requests: Sequence[CollRequest]) -> None:
    """Raise MPI.Exception for the first failed p2p operation among ``requests``."""
    for request in requests:
        outcome = getattr(request, "outcome", Outcome.OK)
        if outcome is Outcome.OK:
            continue
        code = _CODES.get(outcome, ERR_PROC_FAILED)
        raise MPIException(code, f"collective: {getattr(request, 'reason', '')}")


class CollDriver:
    """A collective algorithm's generator advanced by the progress engine (Ibcast, ...);
    ``post`` turns the algorithm's result into what ``wait`` returns; ``context``: the p2p
    context id of its communicator (a Free waits for the driver to finish, `commfree`)."""

    __slots__ = (
        "_error", "_gen", "_post", "_started", "_value", "_waiting", "context", "finished",
    )  # fmt: skip

    def __init__(self, gen: CollGen[Any], post: Callable[[Any], object], *,
                 context: int = -1) -> None:  # fmt: skip
        self._gen = gen
        self._post = post
        self.context = context
        self._waiting: list[CollRequest] = []
        self._started = False
        self._value: object = None
        self._error: BaseException | None = None
        self.finished = False

    def advance(self) -> bool:
        """Resume the algorithm while everything it waits for is complete."""
        if self.finished:
            return True
        try:
            while all(r.done for r in self._waiting):
                check_failed(self._waiting)
                if self._started:
                    self._waiting = self._gen.send(None)
                else:
                    self._started = True
                    self._waiting = next(self._gen)
        except StopIteration as stop:
            self.finished = True
            self._value = stop.value
        except MPIException as exc:
            self.finished = True
            self._error = exc
        return self.finished

    def done(self) -> bool:
        return self.advance()

    def finish(self, status: Status | None) -> object:
        if self._error is not None:
            raise self._error
        if status is not None:
            status.set(ANY_SOURCE, ANY_TAG, 0)
        return self._post(self._value)

    def cancel(self) -> None:
        return None


def peek_status(pending: Pending, status: Status) -> None:
    """Fill ``status`` from a complete operation without completing its request."""
    inner = getattr(pending, "_active", pending)
    op = getattr(inner, "op", None)
    if isinstance(op, RecvOp):
        if op.outcome is Outcome.CANCELLED:
            status.set(ANY_SOURCE, ANY_TAG, 0, cancelled=True)
        else:
            status.set(op.msg_source, op.msg_tag, op.count)
    elif isinstance(inner, Completed):
        status.set(inner.source, ANY_TAG, 0)
    else:
        status.set(ANY_SOURCE, ANY_TAG, 0)
