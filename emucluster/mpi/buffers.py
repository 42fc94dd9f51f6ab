"""Buffer message specs, as mpi4py accepts them, turned into a byte view, a type and a count.

Accepted forms (mpi4py's "message" argument of the uppercase calls)::

    buf                          any C-contiguous buffer (bytes, bytearray, numpy, array.array);
                                 the datatype is inferred from its format
    [buf, datatype]              the whole buffer as elements of ``datatype``
    [buf, count]                 ``count`` elements of the inferred type
    [buf, count, datatype]       the first ``count`` elements
    [buf, (count, disp), datatype]   ``count`` elements starting at element ``disp``
    datatype may also be a type code (``'i'``, ``'f8'``), as ``Datatype.fromcode`` takes
    None                         an empty message (also ``[None, datatype]``)

Receive buffers must be writable.
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

import numpy as np

from emucluster.mpi.datatypes import Datatype, datatype_of_buffer, predefined
from emucluster.mpi.dlpack import dlpack_view
from emucluster.mpi.errors import ERR_BUFFER, ERR_COUNT, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.foreign import host_buffer
from emucluster.mpi.typecodes import from_code

__all__ = ["EMPTY", "Msg", "byte_view", "message", "typed_view"]


class Msg(NamedTuple):
    """A parsed message spec."""

    view: memoryview
    """The bytes of the message (format 'B', C-contiguous; writable for receives)."""
    datatype: Datatype
    """Element type."""
    elements: int
    """Number of datatype elements."""
    obj: object
    """The buffer object the program passed (numpy arrays keep their dtype and shape)."""


EMPTY = Msg(memoryview(bytearray(0)), predefined["BYTE"], 0, None)
"""The null message (writable: an empty receive writes nothing)."""


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
            raise MPIException(ERR_BUFFER, f"{type(obj).__name__} is not a buffer") from exc
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
        raise MPIException(ERR_BUFFER, "the receive buffer is read-only")
    if not view.c_contiguous:
        raise MPIException(ERR_BUFFER, "the buffer is not contiguous")
    if view.format == "B" and view.ndim == 1:
        return view
    return view.cast("B")


def message(spec: object, *, writable: bool) -> Msg:
    """Parse a message spec (see the module docstring). The data of a non-contiguous derived
    datatype are packed (one copy) for sending; receiving into one needs a call that unpacks
    (the collectives do), so this raises ERR_TYPE for a writable one."""
    msg = _message(spec, writable)
    if msg.datatype.typemap.contiguous or not msg.elements:
        return msg
    if writable:
        raise MPIException(
            ERR_TYPE, f"receiving into non-contiguous {msg.datatype.name} is not supported here"
        )
    packed = msg.datatype.pack_from(msg.view, 0, msg.elements)
    return Msg(memoryview(packed), msg.datatype, msg.elements, msg.obj)


def _message(spec: object, writable: bool) -> Msg:
    if spec is None:
        return EMPTY
    spec = host_buffer(spec)  # CUDA-array-interface / DLPack memory (no GPUs: host memory)
    if isinstance(spec, list | tuple):
        return _from_sequence(list(spec), writable)
    view = byte_view(spec, writable=writable)
    datatype = datatype_of_buffer(spec, typed_view(spec))
    return Msg(view, datatype, _whole(view, datatype), spec)


def _from_sequence(parts: list[object], writable: bool) -> Msg:
    if not 1 <= len(parts) <= 3:
        raise MPIException(ERR_BUFFER, f"a message spec has 1 to 3 items, not {len(parts)}")
    buf = host_buffer(parts[0])
    if len(parts) >= 2 and isinstance(parts[-1], str):  # a type code: [buf, 'i'], [buf, n, 'd']
        parts[-1] = from_code(parts[-1])
    count_spec: object = None
    datatype: Datatype | None = None
    if len(parts) == 3:
        count_spec, dt = parts[1], parts[2]
        if not isinstance(dt, Datatype):
            raise MPIException(ERR_TYPE, f"{dt!r} is not a datatype")
        datatype = dt
    elif len(parts) == 2:
        if isinstance(parts[1], Datatype):
            datatype = parts[1]
        else:
            count_spec = parts[1]
    if buf is None:
        dt = datatype or predefined["BYTE"]
        return Msg(memoryview(bytearray(0)), dt, 0, None)
    view = byte_view(buf, writable=writable)
    if datatype is None:
        datatype = datatype_of_buffer(buf, typed_view(buf))
    else:
        datatype.Get_size()  # raises for DATATYPE_NULL
    if count_spec is None:
        return Msg(view, datatype, _whole(view, datatype), buf)
    if isinstance(count_spec, tuple):
        count, disp = (int(x) for x in count_spec)
    else:
        count, disp = int(count_spec), 0  # type: ignore[call-overload]
    if count < 0 or disp < 0:
        raise MPIException(ERR_COUNT, f"negative count or displacement ({count}, {disp})")
    extent = datatype.extent
    start, end = disp * extent, disp * extent + datatype.span(count)
    if end > len(view):
        raise MPIException(
            ERR_COUNT, f"{count} elements at {disp} need {end} bytes; the buffer has {len(view)}"
        )
    return Msg(view[start:end], datatype, count, buf)


def _whole(view: memoryview, datatype: Datatype) -> int:
    size = datatype.extent
    if size == 0:
        return 0
    if len(view) % size:
        raise MPIException(
            ERR_BUFFER, f"buffer of {len(view)} bytes is not a multiple of {datatype.name}'s {size}"
        )
    return len(view) // size
