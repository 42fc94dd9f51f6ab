"""Error handlers (mpi4py's ``MPI.Errhandler``): handles to the predefined handlers and to user
functions, and what ``Call_errhandler`` does with each.

A failing MPI call raises ``MPI.Exception`` whichever handler is set (mpi4py's default,
``ERRORS_RETURN`` turned into an exception); the handler set on a communicator or session is
consulted by ``Call_errhandler``: a user function is called ``fn(obj, errorcode)``,
ERRORS_RETURN does nothing, ERRORS_ARE_FATAL and ERRORS_ABORT end the job for a code other
than SUCCESS. User handlers take one of mpi4py's `MAX_USER_ERRHANDLERS` slots (RuntimeError
when none is left) until the last handle to them is freed; handles compare equal when they
name the same handler, and only the predefined ones pickle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.errors import ERR_ERRHANDLER, SUCCESS
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.handles import Handled

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "ERRHANDLER_NULL",
    "ERRORS_ABORT",
    "ERRORS_ARE_FATAL",
    "ERRORS_RETURN",
    "MAX_USER_ERRHANDLERS",
    "Errhandler",
    "Handler",
    "call",
]

MAX_USER_ERRHANDLERS = 32  # mpi4py's registry of user error handlers holds 32
_live_user = 0


class Handler:
    """One error handler (predefined or user); handles and holders count references."""

    __slots__ = ("fn", "name", "refs")

    def __init__(self, name: str, fn: Callable[[Any, int], Any] | None = None) -> None:
        self.name = name
        self.fn = fn
        self.refs = 1

    def acquire(self) -> Handler:
        """One more reference (a handle or a communicator holding it)."""
        self.refs += 1
        return self

    def release(self) -> None:
        """One reference fewer; a user handler's slot is free at the last."""
        global _live_user
        self.refs -= 1
        if self.refs == 0 and self.fn is not None:
            _live_user -= 1


class Errhandler(Handled):
    """A handle to an error handler (ERRHANDLER_NULL when it names none)."""

    __slots__ = ("_h",)

    def _handle_key(self) -> object:
        return self._h

    _h: Handler | None

    def __new__(cls, errhandler: Errhandler | None = None) -> Errhandler:
        """A new handle to ``errhandler``'s handler (ERRHANDLER_NULL if None)."""
        if errhandler is not None and not isinstance(errhandler, Errhandler):
            raise TypeError(f"Errhandler() takes an Errhandler, not {type(errhandler).__name__}")
        self = object.__new__(cls)
        h = None if errhandler is None else errhandler._h
        self._h = None if h is None else h.acquire()
        return self

    @classmethod
    def _of(cls, handler: Handler) -> Errhandler:
        """A new handle holding a new reference to ``handler``."""
        self = object.__new__(cls)
        self._h = handler.acquire()
        return self

    @classmethod
    def _create(cls, fn: Callable[[Any, int], Any]) -> Errhandler:
        global _live_user
        if not callable(fn):
            raise TypeError(f"{type(fn).__name__} object is not callable")
        if _live_user >= MAX_USER_ERRHANDLERS:
            raise RuntimeError("cannot create too many user-defined error handlers")
        _live_user += 1
        self = object.__new__(cls)
        self._h = Handler(f"user({getattr(fn, '__name__', 'errhandler')})", fn)
        return self

    def _handler(self) -> Handler:
        if self._h is None:
            raise MPIException(ERR_ERRHANDLER, "the error handler is ERRHANDLER_NULL")
        return self._h

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Errhandler):
            return NotImplemented
        return self._h is other._h

    __hash__ = None  # type: ignore[assignment]  # unhashable, as mpi4py's handles

    def __bool__(self) -> bool:
        return self._h is not None

    def __repr__(self) -> str:
        name = "MPI_ERRHANDLER_NULL" if self._h is None else self._h.name
        return f"<emucluster.MPI.Errhandler {name}>"

    def __reduce__(self) -> tuple[Any, ...]:
        for name, predefined in _PREDEFINED.items():
            if self is predefined:
                return _restore, (name,)
        for predefined in _PREDEFINED.values():
            if self == predefined:
                return type(self), (predefined,)
        raise ValueError(f"cannot pickle {self!r}")

    @property
    def name(self) -> str:
        """The handler's name (``MPI_ERRORS_RETURN``, ``user(fn)``...)."""
        return "MPI_ERRHANDLER_NULL" if self._h is None else self._h.name

    def Free(self) -> None:
        """Release this handle (it becomes ERRHANDLER_NULL; the predefined constants stay)."""
        handler = self._handler()
        if any(self is p for p in _PREDEFINED.values()):
            return
        handler.release()
        self._h = None

    def free(self) -> None:
        """Free safely (mpi4py): the predefined constants and ERRHANDLER_NULL stay; another
        handle of a predefined handler becomes null; a user handler is freed."""
        if self._h is None or any(self is p for p in _PREDEFINED.values()):
            return
        if any(self._h is p._h for p in _PREDEFINED.values()):
            self._h = None
            return
        self.Free()


def call(handler: Handler, obj: object, errorcode: int, abort: Callable[[int], None]) -> None:
    """``Call_errhandler``: run ``handler`` for ``errorcode`` on ``obj``; the fatal handlers
    end the job with ``abort`` (the caller's: ``lifecycle.abort``, which sits above this
    module)."""
    if handler.fn is not None:
        handler.fn(obj, errorcode)
    elif handler.name in ("MPI_ERRORS_ARE_FATAL", "MPI_ERRORS_ABORT") and errorcode != SUCCESS:
        abort(errorcode)


def _restore(name: str) -> Errhandler:
    return _PREDEFINED[name]


ERRHANDLER_NULL = Errhandler()
ERRORS_RETURN = Errhandler._of(Handler("MPI_ERRORS_RETURN"))
ERRORS_ARE_FATAL = Errhandler._of(Handler("MPI_ERRORS_ARE_FATAL"))
ERRORS_ABORT = Errhandler._of(Handler("MPI_ERRORS_ABORT"))
_PREDEFINED = {
    "ERRHANDLER_NULL": ERRHANDLER_NULL,
    "ERRORS_RETURN": ERRORS_RETURN,
    "ERRORS_ARE_FATAL": ERRORS_ARE_FATAL,
    "ERRORS_ABORT": ERRORS_ABORT,
}
