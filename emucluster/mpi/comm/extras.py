"""Communicator handle services: info hints, pickling, integer handles, attributes, and the
calls of MPI features emucluster does not have (spawn parents, per-communicator buffers).

Mixed into ``Comm``. Pickling follows mpi4py: COMM_NULL, COMM_SELF and COMM_WORLD pickle as
themselves, another handle equal to one of them as a new handle of its class, and any other
communicator raises ValueError (a context id means nothing in another process). Integer
handles (``toint``/``fromint``, ``py2f``/``f2py``) name the communicator's state in the
bounded table of `emucluster.mpi.request.handles` and come back as the class of its topology.
Attributes are per-communicator values under keyvals from ``Create_keyval``; copy and delete
callbacks run on Dup and Free/Delete_attr as MPI says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi import errhandler, predefined
from emucluster.mpi.comm import kinds
from emucluster.mpi.comm.attributes import Callback, Keyvals
from emucluster.mpi.constants import KEYVAL_INVALID
from emucluster.mpi.errhandler import Errhandler
from emucluster.mpi.errors import ERR_COMM
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import INFO_NULL, Info
from emucluster.mpi.request import handles

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.comm import Comm
    from emucluster.mpi.comm.state import CommState

__all__ = ["CommExtras"]

_PREDEFINED = ("COMM_NULL", "COMM_SELF", "COMM_WORLD")
COMM_KEYVALS = Keyvals("Comm", first=64)
"""Communicator keyvals; user keyvals start at 64 (below: the predefined attributes)."""


class CommExtras:
    """Handle services of a communicator (mixed into ``Comm``)."""

    __slots__ = ()

    _st: CommState | None

    def _state(self) -> CommState:
        raise MPIException(ERR_COMM, "not a communicator")

    # -- info hints ---------------------------------------------------------------------------

    @staticmethod
    def _hints(info: object) -> dict[str, str]:
        if info is None or info is INFO_NULL:
            return {}
        if not isinstance(info, Info):
            raise TypeError(f"expecting an Info, got {type(info).__name__}")
        return dict(info.items())

    def Get_info(self) -> Info:
        """A new info object with the communicator's hints."""
        return Info.Create(self._state().info)

    def Set_info(self, info: Info) -> None:
        """Replace the communicator's hints (kept, never acted on)."""
        self._state().info = self._hints(info)

    @property
    def info(self) -> Info:
        """The hints (a new Info object)."""
        return self.Get_info()

    @info.setter
    def info(self, info: Info) -> None:
        self.Set_info(info)

    # -- pickling and handles -----------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        found = predefined.name_of(self, _PREDEFINED)
        if found is None:
            raise ValueError(f"cannot serialize {self!r}")
        name, identical = found
        if identical:
            return predefined.lookup, (name,)
        return type(self), (predefined.lookup(name),)

    def toint(self) -> int:
        """An integer naming this communicator in this process (0 for COMM_NULL)."""
        return handles.handle_of(self._st)

    py2f = toint

    @property
    def handle(self) -> int:
        """The integer handle (``toint``)."""
        return self.toint()

    @classmethod
    def fromint(cls, arg: int, /) -> Comm:
        """The communicator named by ``arg``, as the class of its topology."""
        found: Comm = kinds.handle(handles.lookup(arg))
        return found

    f2py = fromint
    fromhandle = fromint

    # -- attributes -----------------------------------------------------------------------------

    @classmethod
    def Create_keyval(cls, copy_fn: Callback = None, delete_fn: Callback = None,
                      nopython: bool = False) -> int:  # fmt: skip
        """A new attribute key; ``copy_fn(comm, keyval, value)`` decides what Dup copies (None:
        nothing is copied), ``delete_fn(comm, keyval, value)`` runs when a value goes."""
        return COMM_KEYVALS.create(copy_fn, delete_fn)

    @classmethod
    def Free_keyval(cls, keyval: int) -> int:
        """Retire ``keyval``; returns KEYVAL_INVALID."""
        COMM_KEYVALS.free(keyval)
        return KEYVAL_INVALID

    def Set_attr(self, keyval: int, attrval: Any) -> None:
        """Attach ``attrval`` under ``keyval`` (a previous value is deleted first)."""
        COMM_KEYVALS.set(self, self._state().attrs, keyval, attrval)

    def Delete_attr(self, keyval: int) -> None:
        """Remove the value under ``keyval`` (its delete callback runs)."""
        COMM_KEYVALS.delete(self, self._state().attrs, keyval)

    def _copy_attrs(self, new: CommState) -> None:
        """Dup: copy each attribute its keyval's copy callback allows (True: as is)."""
        new.attrs.update(COMM_KEYVALS.copied(self, self._state().attrs))

    def _delete_attrs(self) -> None:
        """Free: delete every attribute (callbacks run)."""
        COMM_KEYVALS.delete_all(self, self._state().attrs)

    # -- error handlers -----------------------------------------------------------------------

    @classmethod
    def Create_errhandler(cls, errhandler_fn: Callable[..., Any]) -> Errhandler:
        """A user error handler: ``errhandler_fn(comm, errorcode)``."""
        return Errhandler._create(errhandler_fn)

    def Call_errhandler(self, errorcode: int) -> None:
        """Run the communicator's error handler for ``errorcode``."""
        errhandler.call(self._state().errhandler, self, errorcode)

    # -- what emucluster does not have --------------------------------------------------------

    def Attach_buffer(self, buf: Any) -> None:
        """MPI 4.1 per-communicator buffers are not offered (use MPI.Attach_buffer)."""
        _not_41("Comm.Attach_buffer")

    def Detach_buffer(self) -> Any:
        """MPI 4.1 per-communicator buffers are not offered."""
        _not_41("Comm.Detach_buffer")

    def Flush_buffer(self) -> None:
        """MPI 4.1 per-communicator buffers are not offered."""
        _not_41("Comm.Flush_buffer")

    def Iflush_buffer(self) -> Any:
        """MPI 4.1 per-communicator buffers are not offered."""
        _not_41("Comm.Iflush_buffer")


def _not_41(what: str) -> None:
    raise NotImplementedError(f"{what} (MPI 4.1) is not offered by emucluster, which is MPI 3.1")
