"""A communicator's attributes: the predefined keys, user keyvals, their copy and deletion.

``Comm`` delegates ``Get_attr`` / ``Set_attr`` / ``Delete_attr`` to `CommAttributes`, and Dup
and Free call `CommAttributes.copy_into` / `CommAttributes.delete_all`. The predefined keys
(TAG_UB, UNIVERSE_SIZE, WTIME_IS_GLOBAL, LASTUSEDCODE, IO, APPNUM) are answered here; user
values live in the communicator's state under keyvals from `COMM_KEYVALS` (copy and delete
callbacks run on Dup and Free/Delete_attr as MPI says; see ``emucluster.mpi.keyvals``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.constants import (
    ANY_SOURCE,
    APPNUM,
    IO,
    KEYVAL_INVALID,
    LASTUSEDCODE,
    TAG_UB,
    TAG_UB_VALUE,
    UNIVERSE_SIZE,
    WTIME_IS_GLOBAL,
)
from emucluster.mpi.errors import ERR_KEYVAL, last_used_code
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.keyvals import Keyvals

if TYPE_CHECKING:
    from emucluster.mpi.comm.comm import Comm
    from emucluster.mpi.comm.state import CommState

__all__ = ["COMM_KEYVALS", "CommAttributes"]

COMM_KEYVALS = Keyvals("Comm", first=64)
"""Communicator keyvals; user keyvals start at 64 (below: the predefined attributes)."""


class CommAttributes:
    """The attributes of one communicator (``Comm`` delegates here)."""

    __slots__ = ("_comm", "_st")

    def __init__(self, comm: Comm) -> None:
        self._st = comm._state()
        self._comm = comm  # the handle callbacks receive

    def Get_attr(self, keyval: int) -> int | bool | None:
        """TAG_UB, UNIVERSE_SIZE and WTIME_IS_GLOBAL; None for other keys."""
        if keyval == TAG_UB:
            return TAG_UB_VALUE
        if keyval == UNIVERSE_SIZE:
            rt = self._st.runtime
            world = rt.world.size if rt.world is not None else rt.num_nodes
            return max(rt.config.universe_size or 0, world)
        if keyval == WTIME_IS_GLOBAL:
            return False
        if keyval == LASTUSEDCODE:
            return last_used_code()
        if keyval == IO:
            return ANY_SOURCE  # every process may do (Python) I/O
        if keyval == APPNUM:
            return 0  # emurun launches one program
        if keyval == KEYVAL_INVALID:
            raise MPIException(ERR_KEYVAL, "Get_attr of KEYVAL_INVALID")
        return COMM_KEYVALS.get(self._st.attrs, keyval)  # type: ignore[no-any-return]

    def Set_attr(self, keyval: int, attrval: Any) -> None:
        """Attach ``attrval`` under ``keyval`` (a previous value is deleted first)."""
        COMM_KEYVALS.set(self._comm, self._st.attrs, keyval, attrval)

    def Delete_attr(self, keyval: int) -> None:
        """Remove the value under ``keyval`` (its delete callback runs)."""
        COMM_KEYVALS.delete(self._comm, self._st.attrs, keyval)

    def copy_into(self, new: CommState) -> None:
        """Dup: copy each attribute its keyval's copy callback allows (True: as is)."""
        new.attrs.update(COMM_KEYVALS.copied(self._comm, self._st.attrs))

    def delete_all(self) -> None:
        """Free: delete every attribute (callbacks run)."""
        COMM_KEYVALS.delete_all(self._comm, self._st.attrs)
