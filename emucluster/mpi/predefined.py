"""The predefined handles by name (COMM_WORLD, COMM_SELF, COMM_NULL, ...), for pickling.

A predefined handle pickles by name and unpickles to the same object of the receiving process,
as in mpi4py. The facade (``emucluster.MPI``) registers each handle when it builds it; the
classes below the facade find them here instead of importing it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["lookup", "name_of", "register"]

_by_name: dict[str, Any] = {}


def register(name: str, obj: object) -> None:
    """Record ``obj`` as the predefined handle ``name`` of this process."""
    _by_name[name] = obj


def lookup(name: str) -> Any:
    """The predefined handle ``name`` (KeyError if the facade has not made it)."""
    return _by_name[name]


def name_of(obj: object, names: tuple[str, ...]) -> tuple[str, bool] | None:
    """``(name, identical)`` of the first of ``names`` whose handle is ``obj`` itself or equal
    to it; None if none is."""
    for name in names:
        found = _by_name.get(name)
        if found is obj:
            return name, True
    for name in names:
        found = _by_name.get(name)
        if found is not None and found == obj:
            return name, False
    return None
