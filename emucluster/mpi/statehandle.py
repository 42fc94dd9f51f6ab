"""The handle semantics MPI objects over a state share (``Session``, ``File``): a handle
holds its object's state or None (the null handle); handles of one state are equal, hash alike
and share one integer handle (`emucluster.mpi.handles.Handled`); a null handle is false."""

from __future__ import annotations

from typing import Any, ClassVar

from emucluster.mpi.handles import Handled

__all__ = ["StateHandle"]


class StateHandle(Handled):
    """A handle: ``_st`` is the object's state, None for the null handle."""

    __slots__ = ("_st",)
    _kind: ClassVar[str] = "object"
    """What the handle names (handles of different kinds are never equal)."""

    _st: Any

    def _handle_key(self) -> object:
        return self._st

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StateHandle) or other._kind != self._kind:
            return NotImplemented
        return self._st is other._st

    __hash__ = None  # type: ignore[assignment]  # unhashable, as mpi4py's handles

    def __bool__(self) -> bool:
        return self._st is not None
