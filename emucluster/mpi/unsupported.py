"""What emucluster does not offer (dynamic processes, MPI-IO, one-sided communication).

Each name exists so unmodified programs import and test for it as with mpi4py; using one
raises ``NotImplementedError`` at once (mpi4py's answer for a call its MPI lacks), never
hangs. The null handles compare false, as mpi4py's do.
"""

from __future__ import annotations

from typing import Any, NoReturn

from emucluster.mpi.buffer.spec import MessageSpecError, message
from emucluster.mpi.errhandler import ERRORS_RETURN, Errhandler
from emucluster.mpi.errors import ERR_ARG
from emucluster.mpi.handles import Handled
from emucluster.mpi.info import INFO_NULL, Info

__all__ = [
    "FILE_NULL",
    "WIN_NULL",
    "Close_port",
    "File",
    "Get_hw_resource_info",
    "Open_port",
    "Win",
    "not_41",
    "not_offered",
]


def not_41(what: str) -> NoReturn:
    """Raise the NotImplementedError of an MPI 4.1 call (emucluster implements MPI 3.1)."""
    raise NotImplementedError(f"{what} (MPI 4.1) is not offered by emucluster, which is MPI 3.1")


def not_offered(what: str) -> NoReturn:
    """Raise the NotImplementedError of a feature emucluster does not offer."""
    raise NotImplementedError(f"{what} is not offered by emucluster (see docs/guide/mpi.md)")


class _Unoffered(Handled):
    """A class of objects emucluster cannot create; only its null handle exists."""

    __slots__ = ("_null",)
    _what = "this object"

    def __init__(self, other: Any = None) -> None:
        if other is not None and not isinstance(other, type(self)):
            raise TypeError(f"{type(self).__name__}() takes a {type(self).__name__}")
        self._null = True

    def __bool__(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unoffered) and type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def Free(self) -> None:
        """Freeing a null handle is an error in MPI; here it is a no-op."""

    def __getattr__(self, name: str) -> Any:
        not_offered(f"{self._what} ({type(self).__name__}.{name})")


class File(_Unoffered):
    """MPI-IO files (``MPI.File``): not offered."""

    __slots__ = ()
    _what = "MPI-IO"

    @classmethod
    def Open(cls, *args: Any, **kwargs: Any) -> File:
        """Not offered."""
        not_offered("MPI-IO (File.Open)")

    def Get_errhandler(self) -> Errhandler:
        """A new handle to FILE_NULL's error handler, the one new files would start with
        (ERRORS_RETURN until set)."""
        return Errhandler._of(_file_errhandler[0])

    def Set_errhandler(self, errhandler: Errhandler) -> None:
        """Set FILE_NULL's error handler; ERR_ERRHANDLER for ERRHANDLER_NULL."""
        handler = errhandler._handler().acquire()
        _file_errhandler[0].release()
        _file_errhandler[0] = handler


class Win(_Unoffered):
    """One-sided windows (``MPI.Win``): not offered."""

    __slots__ = ()
    _what = "one-sided communication"

    @classmethod
    def Create(cls, *args: Any, **kwargs: Any) -> Win:
        """Not offered."""
        not_offered("one-sided communication (Win.Create)")

    def Put(self, origin: Any, target_rank: int, target: Any = None) -> None:
        """Not offered; bad origin or target specs raise first, as in mpi4py."""
        _rma_specs(origin, target, writable=False)
        not_offered("one-sided communication (Win.Put)")

    def Get(self, origin: Any, target_rank: int, target: Any = None) -> None:
        """Not offered; bad origin or target specs raise first, as in mpi4py."""
        _rma_specs(origin, target, writable=True)
        not_offered("one-sided communication (Win.Get)")

    @classmethod
    def Allocate(cls, *args: Any, **kwargs: Any) -> Win:
        """Not offered."""
        not_offered("one-sided communication (Win.Allocate)")


_file_errhandler = [ERRORS_RETURN._handler().acquire()]  # FILE_NULL's: what files start with
FILE_NULL = File()
WIN_NULL = Win()


def _rma_specs(origin: Any, target: Any, *, writable: bool) -> None:
    """mpi4py's checks of an RMA origin message and target spec (ValueError-compatible)."""
    message(origin, writable=writable)
    if target is None or isinstance(target, int):
        return
    if not isinstance(target, list | tuple) or len(target) > 3:
        raise MessageSpecError(ERR_ARG, f"target: expecting integral or list/tuple, {target!r}")


def Open_port(info: Info = INFO_NULL) -> str:
    """Not offered (dynamic processes)."""
    not_offered("dynamic processes (Open_port)")


def Close_port(port_name: str) -> None:
    """Not offered (dynamic processes)."""
    not_offered("dynamic processes (Close_port)")


def Get_hw_resource_info() -> Info:
    """Not offered (info objects)."""
    not_offered("hardware resource info (Get_hw_resource_info)")
