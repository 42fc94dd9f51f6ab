"""The accessors every stateful MPI object shares: its error handler and its hints.

Communicators, windows, files and sessions each keep an ``errhandler`` (a `Handler` holding a
reference) and an ``info`` dict in their state. Their handle classes hand
``Get_errhandler``/``Set_errhandler``/``Call_errhandler`` to `ErrorHandling` and
``Get_info``/``Set_info`` to `Hints` (``delegate``, as a communicator's other concerns), so
the reference counting of handlers and the checking of Info arguments live here once. What
differs stays in the class: a file's FILE_NULL holds the handler new files start with.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from emucluster.mpi import errhandler, lifecycle
from emucluster.mpi.errhandler import Errhandler, Handler
from emucluster.mpi.info import INFO_NULL, Info

__all__ = ["ErrorHandling", "Hints", "hints_of"]


class _WithErrhandler(Protocol):
    errhandler: Handler


class _WithInfo(Protocol):
    info: dict[str, str]


S = TypeVar("S", covariant=True)


class _Stated(Protocol[S]):
    def _state(self) -> S: ...


def hints_of(info: object) -> dict[str, str]:
    """The hints an ``info`` argument carries (INFO_NULL or None: none); TypeError otherwise."""
    if info is None or info is INFO_NULL:
        return {}
    if not isinstance(info, Info):
        raise TypeError(f"expecting an Info, got {type(info).__name__}")
    return dict(info.items())


class ErrorHandling:
    """``Get_errhandler``, ``Set_errhandler`` and ``Call_errhandler`` of one handle."""

    def __init__(self, handle: _Stated[_WithErrhandler]) -> None:
        self.handle = handle

    def Get_errhandler(self) -> Errhandler:
        """A new handle to the object's error handler (see `emucluster.mpi.errhandler`:
        failing calls raise MPI.Exception whichever is set)."""
        return Errhandler._of(self.handle._state().errhandler)

    def Set_errhandler(self, errhandler: Errhandler) -> None:
        """Set the handler ``Call_errhandler`` runs; ERR_ERRHANDLER for ERRHANDLER_NULL."""
        st = self.handle._state()
        handler = errhandler._handler()
        st.errhandler.release()
        st.errhandler = handler.acquire()

    def Call_errhandler(self, errorcode: int) -> None:
        """Run the object's error handler for ``errorcode``."""
        errhandler.call(self.handle._state().errhandler, self.handle, errorcode, lifecycle.abort)


class Hints:
    """``Get_info`` and ``Set_info`` of one handle (hints are kept, never acted on)."""

    def __init__(self, handle: _Stated[_WithInfo]) -> None:
        self.handle = handle

    def Get_info(self) -> Info:
        """A new info object with the object's hints."""
        return Info.Create(self.handle._state().info)

    def Set_info(self, info: Info) -> None:
        """Replace the object's hints (kept, never acted on)."""
        self.handle._state().info = hints_of(info)
