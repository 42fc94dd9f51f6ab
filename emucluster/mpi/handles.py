"""Integer handles of live MPI objects (``obj.handle`` / ``cls.fromhandle``), and `Handled`.

A handle is a small integer given to an object the first time its handle is asked for; the
table keeps at most `MAX_HANDLES` of them (the oldest are forgotten, counted in `forgotten`),
so a program asking for handles forever does not grow memory without bound.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Self

__all__ = ["MAX_HANDLES", "Handled", "handle_of", "lookup"]

MAX_HANDLES = 4096

_by_handle: OrderedDict[int, tuple[Any, Any]] = OrderedDict()  # handle -> (key, value)
_by_object: dict[int, int] = {}
_next = 1
forgotten = 0


def handle_of(obj: object, value: object = None) -> int:
    """The handle of ``obj`` (0 for None); `lookup` gives back ``value`` (``obj`` if None)
    registered when the handle was last asked for: a Request registers itself under the
    operation it waits for, so two handles to one operation share one integer."""
    global _next, forgotten
    if obj is None:
        return 0
    handle = _by_object.get(id(obj))
    if handle is not None and _by_handle.get(handle, (None,))[0] is obj:
        _by_handle[handle] = (obj, obj if value is None else value)
        return handle
    handle, _next = _next, _next + 1
    _by_handle[handle] = (obj, obj if value is None else value)
    _by_object[id(obj)] = handle
    while len(_by_handle) > MAX_HANDLES:
        _, (old, _value) = _by_handle.popitem(last=False)
        _by_object.pop(id(old), None)
        forgotten += 1
    return handle


def lookup(handle: int) -> Any:
    """The value named by ``handle``; None for 0; ValueError for an unknown one."""
    if handle == 0:
        return None
    try:
        return _by_handle[handle][1]
    except KeyError:
        raise ValueError(f"no live object has handle {handle}") from None


class Handled:
    """mpi4py's handle conversions for a class of MPI objects: ``handle`` and ``fromhandle``
    name the object in this process, and so do ``toint``/``fromint`` and ``py2f``/``f2py``
    (there are no separate C or Fortran handles here). ``_handle_key`` is what two handles to
    one object share (the object itself unless a class says otherwise). Handles can be
    weakly referenced, as mpi4py's."""

    __slots__ = ("__weakref__",)

    def _handle_key(self) -> object:
        return self

    @property
    def handle(self) -> int:
        """An integer naming this object while it lives."""
        return handle_of(self._handle_key(), self)

    def tohandle(self) -> int:
        """An integer naming this object while it lives (`handle`)."""
        return self.handle

    @classmethod
    def fromhandle(cls, handle: int) -> Self:
        """The object named by ``handle`` (a null object of this class for 0)."""
        found = lookup(handle)
        if found is None:
            return cls()
        if not isinstance(found, cls):
            named = type(found).__name__
            raise TypeError(f"handle {handle} names a {named}, not a {cls.__name__}")
        return found

    def toint(self) -> int:
        """The integer naming this object (`handle`; ``fromint`` gives it back)."""
        return self.handle

    py2f = toint

    @classmethod
    def fromint(cls, arg: int, /) -> Self:
        """The object named by ``arg`` (`fromhandle`)."""
        return cls.fromhandle(arg)

    @classmethod
    def f2py(cls, arg: int, /) -> Self:
        """The object named by the Fortran handle ``arg`` (`fromhandle`)."""
        return cls.fromhandle(arg)
