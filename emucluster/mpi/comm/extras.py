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

from emucluster.mpi import errhandler
from emucluster.mpi.comm import fromgroup as commgroup
from emucluster.mpi.comm.attributes import Callback, Keyvals
from emucluster.mpi.errhandler import Errhandler
from emucluster.mpi.errors import ERR_COMM
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import INFO_NULL, Info
from emucluster.mpi.request import handles

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.comm import Comm, Intercomm, Intracomm
    from emucluster.mpi.comm.group import Group
    from emucluster.mpi.comm.state import CommState

__all__ = ["CommExtras", "set_world"]

_PREDEFINED = ("COMM_NULL", "COMM_SELF", "COMM_WORLD")
COMM_KEYVALS = Keyvals("Comm", first=64)
"""Communicator keyvals; user keyvals start at 64 (below: the predefined attributes)."""
_world: list[CommState] = []


def set_world(st: CommState) -> None:
    """Record COMM_WORLD's state (Create_from_group agrees on contexts over it)."""
    _world[:] = [st]


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
        from emucluster import MPI

        for name in _PREDEFINED:
            if self is getattr(MPI, name):
                return _predefined, (name,)
        for name in _PREDEFINED:
            if self == getattr(MPI, name):
                return type(self), (getattr(MPI, name),)
        raise ValueError(f"cannot serialize {self!r}")

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
        return _from_state(handles.lookup(arg))

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
        from emucluster.mpi.constants import KEYVAL_INVALID

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

    @classmethod
    def Get_parent(cls) -> Intercomm:
        """The parent intercommunicator: COMM_NULL, as no process here was spawned."""
        from emucluster.mpi.comm.comm import Intercomm

        return Intercomm()

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

    @classmethod
    def Create_from_group(cls, group: Group, stringtag: str = "org.mpi4py",
                          info: Info = INFO_NULL,
                          errhandler: object = None) -> Intracomm:  # fmt: skip
        """The communicator of ``group`` without a parent (collective over the group; the
        agreement runs over COMM_WORLD's channel under a tag derived from ``stringtag``)."""
        from emucluster.mpi.comm.comm import Intracomm

        st = commgroup.create_group(_world[0], group, _string_tag(stringtag))
        return Intracomm() if st is None else Intracomm._of(st)


def _string_tag(text: str) -> int:
    value = 0
    for byte in str(text).encode():
        value = (value * 131 + byte) % 4093
    return value


def _not_41(what: str) -> None:
    raise NotImplementedError(f"{what} (MPI 4.1) is not offered by emucluster, which is MPI 3.1")


def _predefined(name: str) -> Comm:
    from emucluster import MPI

    found: Comm = getattr(MPI, name)
    return found


def _from_state(st: CommState | None) -> Comm:
    from emucluster.mpi.comm.comm import Comm, Intracomm
    from emucluster.mpi.topo.topocomm import Cartcomm, Distgraphcomm, Graphcomm
    from emucluster.mpi.topo.topology import CART, DIST_GRAPH, GRAPH

    if st is None:
        return Comm()
    kind = None if st.topo is None else st.topo.kind
    cls: type[Intracomm] = {CART: Cartcomm, GRAPH: Graphcomm,
                            DIST_GRAPH: Distgraphcomm}.get(kind, Intracomm)  # type: ignore[arg-type]  # fmt: skip
    comm = cls.__new__(cls)
    comm._st = st
    return comm
