"""Buffer-like objects as memoryviews: the buffer protocol, DLPack, ``__cuda_array_interface__``.

The lowest step of reading a message buffer, below datatypes: `typed_view` keeps the element
format (what a buffer's datatype is inferred from), `byte_view` gives the flat bytes a
datatype's type map gathers from or scatters into. Both raise the MPI error mpi4py's
exception type stands for (TypeError for a non-buffer, BufferError for a read-only receive
buffer or a non-contiguous one), as an ``MPI.Exception`` of class ERR_BUFFER.
"""

from __future__ import annotations

import ctypes

import numpy as np

from emucluster.mpi.buffer.dlpack import dlpack_view
from emucluster.mpi.errors import ERR_BUFFER
from emucluster.mpi.errors import Exception as MPIException

__all__ = ["NotABuffer", "NotContiguous", "ReadOnlyBuffer", "byte_view", "typed_view"]


class NotABuffer(MPIException, TypeError):
    """The object has no buffer interface (mpi4py raises TypeError)."""


class ReadOnlyBuffer(MPIException, BufferError):
    """A receive buffer that cannot be written (mpi4py raises BufferError)."""


class NotContiguous(MPIException, BufferError):
    """A buffer whose bytes are not contiguous, or not in native byte order (BufferError)."""


def typed_view(obj: object) -> memoryview:
    """A memoryview of ``obj`` keeping its element format: the buffer protocol, else DLPack
    or ``__cuda_array_interface__`` (host memory here); ERR_BUFFER if it has none."""
    if hasattr(obj, "__dlpack__") and not isinstance(obj, np.ndarray):
        return dlpack_view(obj)
    try:
        return memoryview(obj)  # type: ignore[arg-type]
    except TypeError as exc:
        foreign = _foreign(obj)
        if foreign is None:
            raise NotABuffer(ERR_BUFFER, f"{type(obj).__name__} is not a buffer") from exc
        return foreign


def _foreign(obj: object) -> memoryview | None:
    if hasattr(obj, "__dlpack__"):
        return dlpack_view(obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if not isinstance(cai, dict):
        return None
    dtype = np.dtype(cai["typestr"])
    count = int(np.prod(cai["shape"], dtype=np.int64))
    address, nbytes = int(cai["data"][0]), count * dtype.itemsize
    if cai.get("strides") is not None:
        raise MPIException(ERR_BUFFER, "the buffer is not contiguous")
    if nbytes == 0:
        return memoryview(np.empty(0, dtype))  # type: ignore[arg-type]
    raw = (ctypes.c_ubyte * nbytes).from_address(address)
    return memoryview(np.frombuffer(memoryview(raw).cast("B"), dtype=dtype))  # type: ignore[arg-type]


def byte_view(obj: object, *, writable: bool) -> memoryview:
    """A flat byte view of ``obj``'s buffer; ERR_BUFFER if it has none, is read-only when it
    must be written, or is not contiguous."""
    view = typed_view(obj)
    if writable and view.readonly:
        raise ReadOnlyBuffer(ERR_BUFFER, "the receive buffer is read-only")
    if view.format == "B" and view.ndim == 1:
        return view
    if view.nbytes == 0:  # e.g. shape (n, 0): cast() refuses zeros in the shape
        return memoryview(bytearray(0))
    if view.c_contiguous:
        return view.cast("B")
    if view.f_contiguous:  # Fortran order: the same bytes, in memory order
        flat = np.asarray(view).reshape(-1, order="F").view(np.uint8)
        return memoryview(flat)  # type: ignore[arg-type]
    raise NotContiguous(ERR_BUFFER, "the buffer is not contiguous")
