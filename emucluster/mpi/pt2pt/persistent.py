"""Persistent point-to-point requests: ``Send_init`` / ``Recv_init`` ... and ``Prequest``.

A persistent request holds the arguments of one operation and starts a fresh nonblocking
operation each ``Start``. Completing it (Wait, Test ...) leaves it inactive, not
REQUEST_NULL; ``Free`` releases it. An inactive request completes at once with an empty
status, as MPI says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.constants import ANY_SOURCE, ANY_TAG
from emucluster.mpi.errors import ERR_REQUEST, SUCCESS
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.request.request import Request

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from emucluster.mpi.request.request import Pending
    from emucluster.mpi.request.status import Status

__all__ = ["PersistentP2P", "PersistentPending", "Prequest"]


class PersistentPending:
    """The operation behind a Prequest: inactive, or the one ``start`` posted last."""

    __slots__ = ("_active", "_starter")

    persistent = True  # Request.wait leaves the request alive

    def __init__(self, starter: Callable[[], Request]) -> None:
        self._starter = starter
        self._active: Pending | None = None

    def start(self) -> None:
        if self._active is not None:
            raise MPIException(ERR_REQUEST, "Start: the persistent request is already active")
        request = self._starter()
        self._active = request._pending if request._pending is not None else _Inactive()

    def done(self) -> bool:
        return self._active is None or self._active.done()

    def finish(self, status: Status | None) -> object:
        active, self._active = self._active, None
        if active is None:
            if status is not None:
                status.set(ANY_SOURCE, ANY_TAG, 0, SUCCESS)
            return None
        return active.finish(status)

    def cancel(self) -> None:
        if self._active is not None:
            self._active.cancel()


class _Inactive:
    __slots__ = ()

    def done(self) -> bool:
        return True

    def finish(self, status: Status | None) -> object:
        if status is not None:
            status.set(ANY_SOURCE, ANY_TAG, 0, SUCCESS)
        return None

    def cancel(self) -> None:
        return None


class Prequest(Request):
    """A persistent request (mpi4py's ``MPI.Prequest``)."""

    __slots__ = ()

    @classmethod
    def _check(cls, pending: Pending | None) -> None:
        if pending is not None and not isinstance(pending, PersistentPending):
            raise TypeError("Prequest: not a persistent request")

    def Start(self) -> None:
        """Start the operation (the request must be inactive)."""
        pending = self._pending
        if not isinstance(pending, PersistentPending):
            raise MPIException(ERR_REQUEST, "Start: REQUEST_NULL")
        pending.start()

    def start(self) -> None:
        """Start the operation."""
        self.Start()

    @classmethod
    def Startall(cls, requests: Sequence[Request]) -> None:
        """Start every request of the list."""
        for request in requests:
            if not isinstance(request, Prequest):
                raise MPIException(ERR_REQUEST, f"Startall: {request!r} is not persistent")
            request.Start()

    @classmethod
    def startall(cls, requests: Sequence[Request]) -> None:
        """Start every request of the list."""
        cls.Startall(requests)


def _persistent(comm: Any, starter: Callable[[], Request]) -> Prequest:
    """A Prequest of ``comm`` (validated here) whose waits go to ``comm``'s engine."""
    request = Prequest._of(PersistentPending(starter), comm._engine())
    assert isinstance(request, Prequest)
    return request


class PersistentP2P:
    """The ``*_init`` calls of ``Comm`` (mixed in; ``self`` is a Comm)."""

    __slots__ = ()

    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent standard send."""
        comm: Any = self
        return _persistent(comm, lambda: comm.Isend(buf, dest, tag))

    def Bsend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent buffered send."""
        comm: Any = self
        return _persistent(comm, lambda: comm.Ibsend(buf, dest, tag))

    def Ssend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent synchronous send."""
        comm: Any = self
        return _persistent(comm, lambda: comm.Issend(buf, dest, tag))

    def Rsend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent ready send."""
        comm: Any = self
        return _persistent(comm, lambda: comm.Irsend(buf, dest, tag))

    def Recv_init(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Prequest:
        """A persistent receive."""
        comm: Any = self
        return _persistent(comm, lambda: comm.Irecv(buf, source, tag))
