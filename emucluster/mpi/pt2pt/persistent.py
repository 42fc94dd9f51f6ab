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

    from emucluster.mpi.comm.comm import Comm
    from emucluster.mpi.request.pending import Pending
    from emucluster.mpi.request.status import Status
    from emucluster.port.progress import Progress

__all__ = ["PersistentP2P", "PersistentPending", "Prequest", "persistent"]


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

    # -- partitioned requests (``emucluster.mpi.pt2pt.partitioned``) -----------------------------

    def _partitioned(self, call: str) -> Any:
        pending = self._pending
        active = pending._active if isinstance(pending, PersistentPending) else None
        if active is None or not hasattr(active, "arrived"):
            raise MPIException(ERR_REQUEST, f"{call}: not an active partitioned request")
        return active

    def Pready(self, partition: int) -> None:
        """Mark ``partition`` of a started partitioned send ready."""
        self._partitioned("Pready").ready(partition)

    def Pready_range(self, partition_low: int, partition_high: int) -> None:
        """Mark partitions ``partition_low`` .. ``partition_high`` (inclusive) ready."""
        active = self._partitioned("Pready_range")
        for partition in range(partition_low, partition_high + 1):
            active.ready(partition)

    def Pready_list(self, partitions: Sequence[int]) -> None:
        """Mark every partition of the list ready."""
        active = self._partitioned("Pready_list")
        for partition in partitions:
            active.ready(partition)

    def Parrived(self, partition: int) -> bool:
        """Whether ``partition`` of a partitioned receive has arrived (True when inactive)."""
        pending = self._pending
        if isinstance(pending, PersistentPending) and pending._active is None:
            return True
        found: bool = self._partitioned("Parrived").arrived(partition)
        return found


def persistent(engine: Progress, starter: Callable[[], Request]) -> Prequest:
    """An inactive persistent request whose every ``Start`` calls ``starter`` (a nonblocking
    call) and waits for what it started."""
    request = Prequest()
    request._pending = PersistentPending(starter)
    request._engine = engine
    return request


class PersistentP2P:
    """The ``*_init`` calls of a communicator (``Comm`` delegates here)."""

    __slots__ = ("_comm", "_engine")

    def __init__(self, comm: Comm) -> None:
        self._engine = comm._state().runtime.engine  # COMM_NULL raises here, not at Start
        self._comm = comm

    def _persistent(self, starter: Callable[[], Request]) -> Prequest:
        return persistent(self._engine, starter)

    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent standard send."""
        return self._persistent(lambda: self._comm.Isend(buf, dest, tag))

    def Bsend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent buffered send."""
        return self._persistent(lambda: self._comm.Ibsend(buf, dest, tag))

    def Ssend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent synchronous send."""
        return self._persistent(lambda: self._comm.Issend(buf, dest, tag))

    def Rsend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent ready send."""
        return self._persistent(lambda: self._comm.Irsend(buf, dest, tag))

    def Recv_init(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Prequest:
        """A persistent receive."""
        return self._persistent(lambda: self._comm.Irecv(buf, source, tag))
