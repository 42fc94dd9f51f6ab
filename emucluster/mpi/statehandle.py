"""The handle semantics MPI objects over a state share (``Session``, ``File``): a handle
holds its object's state or None (the null handle); handles of one state are equal and hash
alike; a null handle is false; the integer handle (``toint``/``py2f``, ``fromint``/``f2py``)
names the state in this process (`emucluster.mpi.request.handles`)."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from emucluster.mpi.request import handles

__all__ = ["StateHandle"]


class StateHandle:
    """A handle: ``_st`` is the object's state, None for the null handle."""

    __slots__ = ("_st",)
    _kind: ClassVar[str] = "object"
    """What the handle names (handles of different kinds are never equal)."""

    _st: Any

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StateHandle) or other._kind != self._kind:
            return NotImplemented
        return self._st is other._st

    def __hash__(self) -> int:
        return id(self._st)

    def __bool__(self) -> bool:
        return self._st is not None

    def toint(self) -> int:
        """An integer naming this object in this process (0 for the null handle)."""
        return handles.handle_of(self._st)

    def py2f(self) -> int:
        """The integer handle (``toint``)."""
        return self.toint()

    @property
    def handle(self) -> int:
        """The integer handle (``toint``)."""
        return self.toint()

    @classmethod
    def fromint(cls, arg: int, /) -> Self:
        """A handle to the object ``arg`` names."""
        new = object.__new__(cls)
        new._st = handles.lookup(arg)
        return new

    @classmethod
    def f2py(cls, arg: int, /) -> Self:
        """The object an integer handle names (``fromint``)."""
        return cls.fromint(arg)

    @classmethod
    def fromhandle(cls, arg: int, /) -> Self:
        """The object an integer handle names (``fromint``)."""
        return cls.fromint(arg)
