"""mpi4py's private object-model queries: ``MPI._sizeof``, ``MPI._addressof``, ``MPI._handleof``.

mpi4py's objects hold a C handle (``MPI_Comm``, ...) and these give its size, the address of
the field that holds it, and its value. Here an object's handle is the integer of
`emucluster.mpi.handles` (a ``Status`` gets one too); ``_addressof`` is the address of a
64-bit cell holding that integer, so reading the cell (ctypes) gives ``_handleof``. Writing
the cell does not change the object: there is no C handle behind it.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict

from emucluster.mpi.comm.comm import Comm
from emucluster.mpi.handles import MAX_HANDLES, Handled, handle_of
from emucluster.mpi.request.request import Request
from emucluster.mpi.request.status import Status

__all__ = ["addressof", "handleof", "sizeof"]

_KINDS = (Handled, Comm, Request, Status)
"""The classes of MPI objects (every handle class derives from one of them)."""
_cells: OrderedDict[int, ctypes.c_uint64] = OrderedDict()
"""handle -> the cell holding it, the most recent `MAX_HANDLES` (the handle table's bound)."""


def _check(arg: object) -> None:
    cls = arg if isinstance(arg, type) else type(arg)
    if not issubclass(cls, _KINDS):
        raise TypeError(f"expecting an MPI object or class, got {arg!r}")


def sizeof(arg: object) -> int:
    """Bytes of an object's handle (an MPI object or its class): 8 for every kind here."""
    _check(arg)
    return ctypes.sizeof(ctypes.c_uint64)


def handleof(obj: object) -> int:
    """The integer handle of ``obj`` (``obj.handle``; a Status gets one of its own)."""
    _check(obj)
    if isinstance(obj, type):
        raise TypeError("expecting an MPI object, not a class")
    handle = getattr(obj, "handle", None)
    return int(handle) if handle is not None else handle_of(obj)


def addressof(obj: object) -> int:
    """The address of a cell holding ``obj``'s handle (never 0)."""
    handle = handleof(obj)
    cell = _cells.get(handle)
    if cell is None:
        cell = _cells[handle] = ctypes.c_uint64(handle)
        while len(_cells) > MAX_HANDLES:
            _cells.popitem(last=False)
    return ctypes.addressof(cell)
