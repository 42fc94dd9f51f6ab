"""Generalized requests (``MPI.Grequest``): operations the program itself completes.

``Grequest.Start(query_fn, free_fn, cancel_fn, args, kwargs)`` returns an active request that
completes when the program calls ``Complete()`` (or ``complete(obj)``, whose ``obj`` the
lowercase ``wait``/``test`` return). At completion ``query_fn(status, *args, **kwargs)`` fills
the status (source ANY_SOURCE, tag ANY_TAG, error SUCCESS unless it sets them) and then
``free_fn(*args, **kwargs)`` runs; ``Cancel`` calls ``cancel_fn(completed, *args,
**kwargs)``. A callback's exception is printed to stderr with its traceback and raised as
``MPI.Exception`` (its own error class for an ``MPI.Exception``, ERR_OTHER otherwise), as
mpi4py does. No engine advances these requests, and the library is THREAD_SERIALIZED (no
other thread may call ``Complete`` while this one waits), so a ``Wait`` before ``Complete``
raises ERR_REQUEST at once instead of waiting forever.
"""

from __future__ import annotations

import sys
import traceback
from typing import TYPE_CHECKING, Any

from emucluster.mpi.constants import ANY_SOURCE, ANY_TAG
from emucluster.mpi.errors import ERR_OTHER, SUCCESS
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.request.request import Request
from emucluster.mpi.request.status import Status

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.request.pending import Pending

__all__ = ["GeneralizedPending", "Grequest"]


def _call(fn: Callable[..., Any] | None, *args: Any, **kwargs: Any) -> None:
    """Run a user callback; its exception becomes an MPI.Exception (traceback on stderr)."""
    if fn is None:
        return
    try:
        fn(*args, **kwargs)
    except BaseException as exc:
        traceback.print_exception(exc, file=sys.stderr)
        code = exc.Get_error_class() if isinstance(exc, MPIException) else ERR_OTHER
        raise MPIException(code, f"generalized request callback: {exc!r}") from exc


class GeneralizedPending:
    """The operation of a Grequest: complete once the program says so."""

    __slots__ = ("_args", "_cancel_fn", "_complete", "_free_fn", "_kwargs", "_query_fn",
                 "result")  # fmt: skip

    def __init__(self, query_fn: Callable[..., Any] | None, free_fn: Callable[..., Any] | None,
                 cancel_fn: Callable[..., Any] | None, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:  # fmt: skip
        self._query_fn = query_fn
        self._free_fn = free_fn
        self._cancel_fn = cancel_fn
        self._args = args
        self._kwargs = kwargs
        self._complete = False
        self.result: Any = None

    def complete(self, result: Any) -> None:
        self._complete = True
        self.result = result

    def done(self) -> bool:
        return self._complete

    def finish(self, status: Status | None) -> object:
        filled = Status() if status is None else status
        filled.set(ANY_SOURCE, ANY_TAG, 0, SUCCESS)
        try:
            _call(self._query_fn, filled, *self._args, **self._kwargs)
        finally:
            _call(self._free_fn, *self._args, **self._kwargs)
        return self.result

    def cancel(self) -> None:
        _call(self._cancel_fn, self._complete, *self._args, **self._kwargs)


class Grequest(Request):
    """A generalized request (mpi4py's ``MPI.Grequest``)."""

    __slots__ = ()

    @classmethod
    def _check(cls, pending: Pending | None) -> None:
        if pending is not None and not isinstance(pending, GeneralizedPending):
            raise TypeError("Grequest() takes a generalized request")

    @classmethod
    def Start(cls, query_fn: Callable[..., Any] | None = None,
              free_fn: Callable[..., Any] | None = None,
              cancel_fn: Callable[..., Any] | None = None,
              args: tuple[Any, ...] | None = None,
              kwargs: dict[str, Any] | None = None) -> Grequest:  # fmt: skip
        """A new active generalized request (see the module's docstring)."""
        pending = GeneralizedPending(query_fn, free_fn, cancel_fn, tuple(args or ()),
                                     dict(kwargs or {}))  # fmt: skip
        request = object.__new__(cls)
        request._pending = pending
        request._engine = None
        return request

    def _generalized(self) -> GeneralizedPending:
        pending = self._pending
        if not isinstance(pending, GeneralizedPending):
            raise MPIException(ERR_OTHER, "Complete: not an active generalized request")
        return pending

    def Complete(self) -> None:
        """Mark the operation complete (its Wait or Test then returns)."""
        self._generalized().complete(None)

    def complete(self, obj: Any = None) -> None:
        """Mark the operation complete; ``wait``/``test`` return ``obj``."""
        self._generalized().complete(obj)
