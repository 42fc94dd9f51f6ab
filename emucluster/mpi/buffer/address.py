"""Memory addresses: ``Get_address``, ``Aint_add``, ``Aint_diff``, and views at absolute
addresses for messages relative to ``BOTTOM``.

An address is the real address of the first byte of a buffer in this host process (what
MPI_Get_address gives in C), so derived datatypes built from addresses (``Create_struct`` with
``Get_address`` displacements) describe memory as they do under MPICH. A ``BOTTOM`` message
reads or writes the bytes its type map spans, at those absolute addresses.
"""

from __future__ import annotations

import ctypes

import numpy as np

from emucluster.mpi.buffer.foreign import host_buffer
from emucluster.mpi.buffer.view import typed_view
from emucluster.mpi.constants import BOTTOM

__all__ = ["Aint_add", "Aint_diff", "Get_address", "absolute_view"]


def Get_address(location: object) -> int:
    """The address of ``location``'s first byte (0 for ``BOTTOM`` and for None, mpi4py's null
    buffer); the buffer rules of message specs apply (TypeError / BufferError / ValueError
    for bad buffers)."""
    if location is BOTTOM or location is None:
        return 0

    view = typed_view(host_buffer(location))
    if not view.c_contiguous and not view.f_contiguous:
        raise BufferError("Get_address: the buffer is not contiguous")
    if view.nbytes == 0:
        flat = np.frombuffer(view.cast("B") if view.ndim == 1 else view.tobytes(), np.uint8)
        return int(flat.ctypes.data) if len(flat) else 0
    array = np.asarray(view)
    return int(array.ctypes.data)


def Aint_add(base: int, disp: int) -> int:
    """``base + disp``."""
    return int(base) + int(disp)


def Aint_diff(addr1: int, addr2: int) -> int:
    """``addr1 - addr2``."""
    return int(addr1) - int(addr2)


def absolute_view(start: int, nbytes: int) -> memoryview:
    """A writable byte view of ``nbytes`` at address ``start`` (a BOTTOM message's span)."""
    if nbytes <= 0:
        return memoryview(bytearray(0))
    raw = (ctypes.c_ubyte * nbytes).from_address(start)
    return memoryview(raw).cast("B")
