"""``MPI.Request``: completion of nonblocking operations, alone or in sets.

A Request wraps one pending operation (`Pending`): a p2p send or receive of the core, a
nonblocking collective driven by `CollDriver`, or an already complete one (PROC_NULL).
Completing it (``Wait``/``wait``/``Test``... returning true) fills the status, raises
``MPI.Exception`` if the operation failed, and turns the request into REQUEST_NULL, as
mpi4py does. Every wait goes through the progress engine, so all outstanding operations
(nonblocking collectives included) advance while any one is awaited.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi import handles
from emucluster.mpi.constants import ANY_SOURCE, ANY_TAG, PROC_NULL, UNDEFINED
from emucluster.mpi.errors import ERR_REQUEST, SUCCESS
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.request.pending import (
    Completed,
    Pending,
    SendPending,
    peek_status,
)
from emucluster.mpi.request.status import Status
from emucluster.p2p.protocol import Outcome

Some = tuple[list[int] | None, list[Any] | None]

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emucluster.port.progress import Progress

__all__ = [
    "REQUEST_NULL",
    "Request",
    "completed",
]


def completed(value: object = None, source: int = PROC_NULL) -> Request:
    """A request that is already complete (an operation with PROC_NULL)."""
    return Request._of(Completed(value, source), None)


def _null_request(same: bool, cls: type[Request]) -> Request:
    return REQUEST_NULL if same else cls()


class Request:
    """A nonblocking operation (mpi4py's ``MPI.Request``); REQUEST_NULL once completed."""

    __slots__ = ("__weakref__", "_engine", "_pending")

    _pending: Pending | None
    _engine: Progress | None  # the engine that advances the operation (None: complete)

    def __new__(cls, request: Request | None = None) -> Request:
        """A handle to ``request``'s operation (REQUEST_NULL if None); done here, not in
        ``__init__``, so subclasses may override ``__new__`` as with mpi4py."""
        if request is not None and not isinstance(request, Request):
            raise TypeError(f"{cls.__name__}() takes a request, not {type(request).__name__}")
        self = object.__new__(cls)
        self._pending = None if request is None else request._pending
        self._engine = None if request is None else request._engine
        cls._check(self._pending)
        return self

    def __init__(self, request: Request | None = None) -> None:
        """Everything happens in ``__new__``."""

    @classmethod
    def _check(cls, pending: Pending | None) -> None:
        """Raise TypeError if ``pending`` cannot be held by this class (see Prequest)."""

    @classmethod
    def _of(cls, pending: Pending, engine: Progress | None) -> Request:
        """The library's own handle to ``pending``, advanced by ``engine`` (no checks)."""
        request = object.__new__(cls)
        request._pending = pending
        request._engine = engine
        return request

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return self._pending is other._pending

    __hash__ = None  # type: ignore[assignment]  # unhashable, as mpi4py's handles

    def __bool__(self) -> bool:
        return self._pending is not None

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """REQUEST_NULL pickles by name (a null copy handle to a new null handle); an active
        request cannot be pickled (ValueError, as in mpi4py)."""
        if self._pending is not None:
            raise ValueError("cannot pickle an active request")
        return (_null_request, (self is REQUEST_NULL, type(self)))

    def __repr__(self) -> str:
        return "<emucluster.MPI.Request NULL>" if self._pending is None else super().__repr__()

    def _release(self) -> None:
        """After completion: REQUEST_NULL, unless persistent (then inactive, still alive)."""
        if not getattr(self._pending, "persistent", False):
            self._pending = None

    def _active(self) -> bool:
        """Whether completing it would report an operation (not null, not inactive)."""
        pending = self._pending
        return pending is not None and getattr(pending, "_active", True) is not None

    # -- handles ----------------------------------------------------------------------------------

    @property
    def handle(self) -> int:
        """An integer naming the request while it lives (0 for REQUEST_NULL)."""
        return handles.handle_of(self._pending, self)

    def tohandle(self) -> int:
        """An integer naming the request while it lives (`handle`)."""
        return self.handle

    @classmethod
    def fromhandle(cls, handle: int) -> Request:
        """The request named by ``handle`` (REQUEST_NULL for 0)."""
        found: Request | None = handles.lookup(handle)
        request = cls.__new__(cls)
        request._pending = None if found is None else found._pending
        request._engine = None if found is None else found._engine
        return request

    def toint(self) -> int:
        """The integer handle (`handle`: there are no separate C handles here)."""
        return self.handle

    @classmethod
    def fromint(cls, arg: int) -> Request:
        """The request named by the integer ``arg`` (`fromhandle`)."""
        return cls.fromhandle(arg)

    def py2f(self) -> int:
        """The integer handle (`handle`: there are no separate Fortran handles here)."""
        return self.handle

    @classmethod
    def f2py(cls, arg: int) -> Request:
        """The request named by the integer ``arg`` (`fromhandle`)."""
        return cls.fromhandle(arg)

    # -- one request ----------------------------------------------------------------------------

    def Wait(self, status: Status | None = None) -> bool:
        """Wait for completion (buffer API); returns True. Calls ``Request.wait`` itself, not a
        subclass's override (mpi4py subclasses define ``wait`` in terms of ``Wait``)."""
        pending = self._pending
        if type(pending) is SendPending and pending.op.done and pending.op.outcome is Outcome.OK:
            self._pending = None  # the commonest case (an eager send is done at once), inlined
            if status is not None:
                status.set(ANY_SOURCE, ANY_TAG, 0)
            return True
        Request.wait(self, status)
        return True

    def wait(self, status: Status | None = None) -> Any:
        """Wait for completion; returns the received object (None for sends)."""
        pending = self._pending
        if pending is None:
            _null_status(status)
            return None
        if not pending.done():
            _engine_of((self,)).wait_for(pending.done)
        if not getattr(pending, "persistent", False):  # `_release`, inlined
            self._pending = None
        return pending.finish(status)

    def Test(self, status: Status | None = None) -> bool:
        """Whether it completed (completing it if so); ``Request.test`` itself, as Wait."""
        return Request.test(self, status)[0]

    def test(self, status: Status | None = None) -> tuple[bool, Any]:
        """``(flag, object)``: whether it completed and the received object."""
        pending = self._pending
        if pending is None:
            _null_status(status)
            return True, None
        if not pending.done():
            _progress((self,))
            if not pending.done():
                return False, None
        self._release()
        return True, pending.finish(status)

    def Get_status(self, status: Status | None = None) -> bool:
        """Whether it completed, without completing it."""
        pending = self._pending
        if pending is None:
            _null_status(status)
            return True
        _progress((self,))
        if not pending.done():
            return False
        if status is not None:
            peek_status(pending, status)
        return True

    def get_status(self, status: Status | None = None) -> bool:
        """Whether it completed, without completing it."""
        return self.Get_status(status)

    def Cancel(self) -> None:
        """Cancel a pending receive (it then completes as cancelled); ERR_REQUEST for
        REQUEST_NULL."""
        if self._pending is None:
            raise MPIException(ERR_REQUEST, "Cancel of REQUEST_NULL")
        self._pending.cancel()

    def cancel(self) -> None:
        """Cancel a pending receive."""
        self.Cancel()

    def Free(self) -> None:
        """Forget the request (the operation still completes); ERR_REQUEST for REQUEST_NULL."""
        if self._pending is None:
            raise MPIException(ERR_REQUEST, "Free of REQUEST_NULL")
        self._pending = None

    def free(self) -> None:
        """Forget the request; nothing for REQUEST_NULL (mpi4py's safe ``free``)."""
        if self._pending is not None:
            self.Free()

    # -- sets of requests -----------------------------------------------------------------------

    @classmethod
    def Get_status_all(cls, requests: Sequence[Request],
                       statuses: list[Status] | None = None) -> bool:  # fmt: skip
        """Whether all completed, without completing them (statuses filled if so)."""
        _progress(requests)
        if any(r._active() and not r._pending.done() for r in requests):  # type: ignore[union-attr]
            return False
        if statuses is not None:
            if isinstance(statuses, list):
                statuses.extend(Status() for _ in range(len(statuses), len(requests)))
            for request, status in zip(requests, statuses, strict=False):
                request.Get_status(status)
        return True

    get_status_all = Get_status_all

    @classmethod
    def Get_status_any(cls, requests: Sequence[Request],
                       status: Status | None = None) -> tuple[int, bool]:  # fmt: skip
        """``(index, flag)`` of a completed request, without completing it."""
        if not any(r._active() for r in requests):
            _null_status(status)
            return UNDEFINED, True
        _progress(requests)
        index = _first_done(requests)
        if index < 0:
            return UNDEFINED, False
        requests[index].Get_status(status)
        return index, True

    get_status_any = Get_status_any

    @classmethod
    def Get_status_some(cls, requests: Sequence[Request],
                        statuses: list[Status] | None = None) -> list[int] | None:  # fmt: skip
        """Indices of the completed requests, without completing them (None if all null)."""
        if not any(r._active() for r in requests):
            return None
        _progress(requests)
        indices = [i for i, r in enumerate(requests) if r._active() and r.Get_status()]
        if statuses is not None:
            for k, i in enumerate(indices):
                if k >= len(statuses):
                    statuses.append(Status())
                requests[i].Get_status(statuses[k])
        return indices

    get_status_some = Get_status_some

    @classmethod
    def Waitall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        """Wait for all; returns True."""
        cls.waitall(requests, statuses)
        return True

    @classmethod
    def waitall(cls, requests: Sequence[Request],
                statuses: list[Status] | None = None) -> list[Any]:  # fmt: skip
        """Wait for all; returns their objects in order."""
        live = [r._pending for r in requests if r._pending is not None]
        ready = _AllDone(live)
        if not ready():
            _engine_of(requests).wait_for(ready)
        return _finish_all(requests, statuses)

    @classmethod
    def Testall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        """Whether all completed (completing them if so)."""
        return cls.testall(requests, statuses)[0]

    @classmethod
    def testall(cls, requests: Sequence[Request],
                statuses: list[Status] | None = None) -> tuple[bool, list[Any] | None]:  # fmt: skip
        """``(flag, objects)``: all completed, and their objects (None if not all)."""
        live = [r._pending for r in requests if r._pending is not None]
        if not all(p.done() for p in live):
            _progress(requests)
            if not all(p.done() for p in live):
                return False, None
        return True, _finish_all(requests, statuses)

    @classmethod
    def Waitany(cls, requests: Sequence[Request], status: Status | None = None) -> int:
        """Wait for one; its index (UNDEFINED if all are null)."""
        return cls.waitany(requests, status)[0]

    @classmethod
    def waitany(cls, requests: Sequence[Request],
                status: Status | None = None) -> tuple[int, Any]:  # fmt: skip
        """``(index, object)`` of one completed request (UNDEFINED, None if all are null)."""
        if not any(r._active() for r in requests):
            _null_status(status)
            return UNDEFINED, None
        index = _first_done(requests)
        if index < 0:
            _engine_of(requests).wait_for(lambda: _first_done(requests) >= 0)
            index = _first_done(requests)
        return index, requests[index].wait(status)

    @classmethod
    def Testany(cls, requests: Sequence[Request],
                status: Status | None = None) -> tuple[int, bool]:  # fmt: skip
        """``(index, flag)`` of a completed request."""
        index, flag, _ = cls.testany(requests, status)
        return index, flag

    @classmethod
    def testany(cls, requests: Sequence[Request],
                status: Status | None = None) -> tuple[int, bool, Any]:  # fmt: skip
        """``(index, flag, object)``; (UNDEFINED, True, None) if all are null."""
        if not any(r._active() for r in requests):
            _null_status(status)
            return UNDEFINED, True, None
        index = _first_done(requests)
        if index < 0:
            _progress(requests)
            index = _first_done(requests)
            if index < 0:
                return UNDEFINED, False, None
        return index, True, requests[index].wait(status)

    @classmethod
    def Waitsome(cls, requests: Sequence[Request],
                 statuses: list[Status] | None = None) -> list[int] | None:  # fmt: skip
        """Wait for at least one; the indices completed (None if all are null)."""
        return cls.waitsome(requests, statuses)[0]

    @classmethod
    def waitsome(cls, requests: Sequence[Request],
                 statuses: list[Status] | None = None) -> Some:  # fmt: skip
        """``(indices, objects)`` of the requests completed (None, None if all are null)."""
        if not any(r._active() for r in requests):
            return None, None
        if _first_done(requests) < 0:
            _engine_of(requests).wait_for(lambda: _first_done(requests) >= 0)
        return _finish_some(requests, statuses)

    @classmethod
    def Testsome(cls, requests: Sequence[Request],
                 statuses: list[Status] | None = None) -> list[int] | None:  # fmt: skip
        """The indices completed now (None if all are null)."""
        return cls.testsome(requests, statuses)[0]

    @classmethod
    def testsome(cls, requests: Sequence[Request],
                 statuses: list[Status] | None = None) -> Some:  # fmt: skip
        """``(indices, objects)`` completed now (None, None if all are null)."""
        if not any(r._active() for r in requests):
            return None, None
        _progress(requests)
        return _finish_some(requests, statuses)


def _engine_of(requests: Sequence[Request]) -> Progress:
    """The engine advancing the first active request of ``requests`` (a wait calls this only
    when one is still pending, so one has an engine)."""
    for request in requests:
        if request._pending is not None and request._engine is not None:
            return request._engine
    raise MPIException(ERR_REQUEST, "waiting for a request that no engine advances")


def _progress(requests: Sequence[Request]) -> None:
    """One pass of the progress engine of ``requests`` (none if all are complete)."""
    for request in requests:
        if request._pending is not None and request._engine is not None:
            request._engine.progress()
            return


def _null_status(status: Status | None) -> None:
    if status is not None:
        status.set(ANY_SOURCE, ANY_TAG, 0, SUCCESS)


class _AllDone:
    """Whether every one of ``live`` is done, for a wait: an operation once done stays done,
    so each look resumes at the first one not yet seen done (a wait for n operations costs
    O(n) looks in all, not O(n) after every batch of events)."""

    __slots__ = ("_live", "_next")

    def __init__(self, live: list[Pending]) -> None:
        self._live = live
        self._next = 0

    def __call__(self) -> bool:
        live, i = self._live, self._next
        n = len(live)
        while i < n and live[i].done():
            i += 1
        self._next = i
        return i == n


def _first_done(requests: Sequence[Request]) -> int:
    for i, request in enumerate(requests):
        pending = request._pending
        if pending is not None and request._active() and pending.done():
            return i
    return -1


def _finish_all(requests: Sequence[Request], statuses: list[Status] | None) -> list[Any]:
    results: list[Any] = []
    error: MPIException | None = None
    if isinstance(statuses, list):
        statuses.extend(Status() for _ in range(len(statuses), len(requests)))
    for i, request in enumerate(requests):
        status = statuses[i] if statuses is not None and i < len(statuses) else None
        try:
            results.append(request.wait(status))
        except MPIException as exc:
            results.append(None)
            error = error or exc
    if error is not None:
        raise error
    return results


def _finish_some(requests: Sequence[Request],
                 statuses: list[Status] | None) -> tuple[list[int], list[Any]]:  # fmt: skip
    indices: list[int] = []
    objects: list[Any] = []
    for i, request in enumerate(requests):
        pending = request._pending
        if pending is not None and request._active() and pending.done():
            status = None
            if statuses is not None:
                if len(statuses) <= len(indices):
                    statuses.append(Status())
                status = statuses[len(indices)]
            indices.append(i)
            objects.append(request.wait(status))
    return indices, objects


def _check_request(request: object) -> Request:
    if not isinstance(request, Request):
        raise MPIException(ERR_REQUEST, f"{request!r} is not a request")
    return request


REQUEST_NULL = Request()
"""The null request (``MPI.REQUEST_NULL``)."""
