"""MPI 4 sessions (mpi4py's ``MPI.Session``) over the one job emurun launched.

A session names the job's process sets: ``mpi://WORLD`` (every node) and ``mpi://SELF`` (this
node), as MPICH offers them. ``Create_group`` makes their groups; a communicator then comes
from ``Intracomm.Create_from_group``. The library was initialised at import, so a session
only records its hints and error handler. Calls on ``SESSION_NULL`` raise ERR_SESSION;
an unknown process-set name or position raises ERR_ARG.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi import lifecycle
from emucluster.mpi.comm.delegate import delegate
from emucluster.mpi.comm.group import Group
from emucluster.mpi.comm.roles import ErrorHandling
from emucluster.mpi.errhandler import ERRORS_RETURN, Errhandler, Handler
from emucluster.mpi.errors import ERR_ARG, ERR_SESSION
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import INFO_NULL, Info
from emucluster.mpi.statehandle import StateHandle
from emucluster.mpi.unsupported import not_41

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["MAX_PSET_NAME_LEN", "PSETS", "SESSION_NULL", "Session"]

MAX_PSET_NAME_LEN = 256  # MPICH's MPI_MAX_PSET_NAME_LEN
PSETS = ("mpi://WORLD", "mpi://SELF")


class _SessionState:
    __slots__ = ("errhandler", "hints")

    def __init__(self, hints: dict[str, str], errhandler: Errhandler | None) -> None:
        self.hints = hints
        chosen = ERRORS_RETURN if errhandler is None else errhandler
        self.errhandler: Handler = chosen._handler().acquire()


class Session(StateHandle):
    """A session (SESSION_NULL when it has no state)."""

    __slots__ = ()
    _kind = "session"

    _st: _SessionState | None

    def __new__(cls, session: Session | None = None) -> Session:
        """A handle to ``session`` (SESSION_NULL if None)."""
        if session is not None and not isinstance(session, Session):
            raise TypeError(f"{cls.__name__}() takes a Session, not {type(session).__name__}")
        self = object.__new__(cls)
        self._st = None if session is None else session._st
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        if self is SESSION_NULL:
            return _session_null, ()
        if self._st is None:
            return type(self), ()
        raise ValueError(f"cannot serialize {self!r}")

    def _state(self) -> _SessionState:
        if self._st is None:
            raise MPIException(ERR_SESSION, "the session is SESSION_NULL (or finalized)")
        return self._st

    @classmethod
    def Init(cls, info: Info = INFO_NULL, errhandler: Errhandler | None = None) -> Session:
        """Start a session."""
        session = cls.__new__(cls)
        hints = dict(info.items()) if isinstance(info, Info) and info else {}
        session._st = _SessionState(hints, errhandler)
        return session

    def free(self) -> None:
        """Finalize the session if it is live (mpi4py's safe ``free``)."""
        if self._st is not None:
            self.Finalize()

    def Finalize(self) -> None:
        """End the session; the handle becomes SESSION_NULL."""
        self._state().errhandler.release()
        self._st = None

    def Get_num_psets(self, info: Info = INFO_NULL) -> int:
        """Number of process sets."""
        self._state()
        return len(PSETS)

    def Get_nth_pset(self, n: int, info: Info = INFO_NULL) -> str:
        """The name of process set ``n``."""
        self._state()
        if not 0 <= n < len(PSETS):
            raise MPIException(ERR_ARG, f"no process set number {n} (of {len(PSETS)})")
        return PSETS[n]

    def Get_info(self) -> Info:
        """The session's hints (a new Info)."""
        return Info.Create(self._state().hints)

    def Get_pset_info(self, pset_name: str) -> Info:
        """``mpi_size`` of a process set."""
        self._state()
        return Info.Create({"mpi_size": str(len(_members(pset_name)))})

    def Create_group(self, pset_name: str) -> Group:
        """The group of a process set."""
        self._state()
        return Group._of(_members(pset_name))

    Get_errhandler = delegate(ErrorHandling, ErrorHandling.Get_errhandler)
    Set_errhandler = delegate(ErrorHandling, ErrorHandling.Set_errhandler)

    @classmethod
    def Create_errhandler(cls, errhandler_fn: Callable[..., Any]) -> Errhandler:
        """A user error handler: ``errhandler_fn(session, errorcode)``."""
        return Errhandler._create(errhandler_fn)

    Call_errhandler = delegate(ErrorHandling, ErrorHandling.Call_errhandler)

    def Attach_buffer(self, buf: Any) -> None:
        """MPI 4.1 per-session buffers are not offered (use MPI.Attach_buffer)."""
        not_41("Session.Attach_buffer")

    def Detach_buffer(self) -> Any:
        """MPI 4.1 per-session buffers are not offered."""
        not_41("Session.Detach_buffer")

    def Flush_buffer(self) -> None:
        """MPI 4.1 per-session buffers are not offered."""
        not_41("Session.Flush_buffer")

    def Iflush_buffer(self) -> Any:
        """MPI 4.1 per-session buffers are not offered."""
        not_41("Session.Iflush_buffer")

    def Abort(self, errorcode: int = 0) -> None:
        """Terminate the whole job with ``errorcode``."""
        lifecycle.abort(errorcode)


def _members(pset_name: str) -> tuple[int, ...]:
    engine = lifecycle.current()
    if pset_name == "mpi://WORLD":
        return engine.world.nodes if engine.world is not None else (engine.node,)
    if pset_name == "mpi://SELF":
        return (engine.node,)
    raise MPIException(ERR_ARG, f"unknown process set {pset_name!r}")


SESSION_NULL = Session()


def _session_null() -> Session:
    """SESSION_NULL (what it unpickles to)."""
    return SESSION_NULL
