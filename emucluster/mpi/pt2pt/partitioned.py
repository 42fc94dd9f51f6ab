"""Partitioned point-to-point (MPI 4.0): ``Psend_init`` / ``Precv_init``, ``Pready*``,
``Parrived``.

A partitioned send is a persistent request over a buffer cut into ``partitions`` equal parts;
after each ``Start`` the program marks parts ready (``Pready``, ``Pready_range``,
``Pready_list``). Here the message leaves as one point-to-point message, on the
communicator's point-to-point context with the given tag, once the last part is marked
ready; so ``Parrived`` on the receiver turns true for every part together, when the whole
message has arrived (the standard allows this: it says when a part *may* be reported, not
that parts travel separately). Matching is by source and tag, in order, as for other
point-to-point messages: a plain receive with the same source and tag on the same
communicator could take a partitioned message, which MPI programs must not rely on either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.errors import ERR_ARG, ERR_REQUEST
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import INFO_NULL, Info
from emucluster.mpi.pt2pt.persistent import persistent
from emucluster.mpi.request.request import Request

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.comm import Comm
    from emucluster.mpi.pt2pt.persistent import Prequest
    from emucluster.mpi.request.status import Status

__all__ = ["PartitionedP2P", "PartitionedRecv", "PartitionedSend"]


def _check_partitions(partitions: int) -> int:
    if partitions < 1:
        raise MPIException(ERR_ARG, f"partitions must be positive, not {partitions}")
    return partitions


class PartitionedSend:
    """One started partitioned send: parts marked ready; the message once all are."""

    __slots__ = ("_inner", "_partitions", "_post", "_ready")

    def __init__(self, post: Callable[[], Request], partitions: int) -> None:
        self._post = post
        self._partitions = partitions
        self._ready: set[int] = set()
        self._inner: Request | None = None

    def ready(self, partition: int) -> None:
        """Mark ``partition`` ready; the last one sends the message."""
        if not 0 <= partition < self._partitions:
            raise MPIException(ERR_ARG, f"partition {partition} of {self._partitions}")
        self._ready.add(partition)
        if len(self._ready) == self._partitions and self._inner is None:
            self._inner = self._post()

    def arrived(self, partition: int) -> bool:
        raise MPIException(ERR_REQUEST, "Parrived: not a partitioned receive")

    def done(self) -> bool:
        inner = self._inner
        if inner is None:
            return False
        return inner._pending is None or inner._pending.done()

    def finish(self, status: Status | None) -> object:
        inner = self._inner
        if inner is None:
            raise MPIException(ERR_REQUEST, "a partitioned send completed before Pready")
        return inner.wait(status)

    def cancel(self) -> None:
        return None


class PartitionedRecv:
    """One started partitioned receive: the receive of the whole message."""

    __slots__ = ("_inner", "_partitions")

    def __init__(self, inner: Request, partitions: int) -> None:
        self._inner = inner
        self._partitions = partitions

    def ready(self, partition: int) -> None:
        raise MPIException(ERR_REQUEST, "Pready: not a partitioned send")

    def arrived(self, partition: int) -> bool:
        """Whether ``partition`` has arrived (every part arrives with the message)."""
        if not 0 <= partition < self._partitions:
            raise MPIException(ERR_ARG, f"partition {partition} of {self._partitions}")
        return self._inner.Get_status()

    def done(self) -> bool:
        pending = self._inner._pending
        return pending is None or pending.done()

    def finish(self, status: Status | None) -> object:
        return self._inner.wait(status)

    def cancel(self) -> None:
        self._inner.Cancel()


class PartitionedP2P:
    """``Psend_init`` / ``Precv_init`` of a communicator (``Comm`` delegates here)."""

    __slots__ = ("_comm", "_engine")

    def __init__(self, comm: Comm) -> None:
        self._engine = comm._state().runtime.engine  # COMM_NULL raises here, not at Start
        self._comm = comm

    def Psend_init(self, buf: Any, partitions: int, dest: int, tag: int = 0,
                   info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A partitioned send of ``buf`` in ``partitions`` equal parts."""
        parts = _check_partitions(partitions)
        engine, comm = self._engine, self._comm

        def start() -> Request:
            send = PartitionedSend(lambda: comm.Isend(buf, dest, tag), parts)
            return Request._of(send, engine)

        return persistent(engine, start)

    def Precv_init(self, buf: Any, partitions: int, source: int, tag: int = 0,
                   info: Info = INFO_NULL) -> Prequest:  # fmt: skip
        """A partitioned receive into ``buf`` in ``partitions`` equal parts."""
        parts = _check_partitions(partitions)
        engine, comm = self._engine, self._comm

        def start() -> Request:
            return Request._of(PartitionedRecv(comm.Irecv(buf, source, tag), parts), engine)

        return persistent(engine, start)
