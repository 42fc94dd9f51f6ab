"""DLPack buffers: a CPU (or, with no GPUs here, host-resident) DLPack tensor as a memoryview.

Follows mpi4py's ``asdlpack.pxi``: ask ``__dlpack__(max_version=(1, 0), copy=False)`` for a
versioned capsule (``dltensor_versioned``), falling back to an unversioned one
(``dltensor``) when the producer rejects the keywords; check version, shape, strides and
contiguity (BufferError otherwise); read the data pointer, size and element format. The
capsule is never consumed or renamed: it stays referenced by the view's owner, so the
producer's capsule destructor releases the tensor only when the view is gone (consuming it,
as numpy's importer does, is what once crashed a rank on mpi4py's test capsules).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["dlpack_view", "is_contiguous"]

_CPU = 1
_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
_INT, _UINT, _FLOAT, _COMPLEX, _BOOL = 0, 1, 2, 5, 6


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _ManagedVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

# (code, bits) -> numpy dtype of one element (lanes 1); mpi4py's dlpack_get_format
_FORMATS: dict[tuple[int, int], str] = {
    (_BOOL, 8): "?", (_INT, 8): "b", (_INT, 16): "h", (_INT, 32): "i", (_INT, 64): "l",
    (_UINT, 8): "B", (_UINT, 16): "H", (_UINT, 32): "I", (_UINT, 64): "L",
    (_FLOAT, 16): "e", (_FLOAT, 32): "f", (_FLOAT, 64): "d", (_FLOAT, 128): "g",
    (_COMPLEX, 64): "F", (_COMPLEX, 128): "D", (_COMPLEX, 256): "G",
}  # fmt: skip


class _Owner:
    """Keeps the capsule (and so the tensor) alive as long as the view over its data."""

    __slots__ = ("__array_interface__", "capsule")

    def __init__(self, interface: dict[str, object], capsule: object) -> None:
        self.__array_interface__ = interface
        self.capsule = capsule


def _capsule(obj: object) -> tuple[object, bool]:
    """(capsule, versioned) from ``obj.__dlpack__``, as mpi4py asks for it."""
    dlpack = obj.__dlpack__  # type: ignore[attr-defined]
    device = getattr(obj, "__dlpack_device__", None)
    if device is None:
        raise TypeError("dlpack: missing __dlpack_device__")
    device_type, device_id = device()
    if not isinstance(device_type, int) or not isinstance(device_id, int):
        raise TypeError("dlpack: bad device")
    try:
        if device_type == _CPU:
            return dlpack(max_version=(1, 0), copy=False), True
        return dlpack(stream=-1, max_version=(1, 0), copy=False), True
    except TypeError:
        return (dlpack() if device_type == _CPU else dlpack(stream=-1)), False


def dlpack_view(obj: object) -> memoryview:
    """A memoryview (element format kept) over ``obj``'s DLPack tensor; BufferError when the
    capsule or tensor is invalid or not contiguous. Read-only tensors give read-only views."""
    capsule, versioned = _capsule(obj)
    name = b"dltensor_versioned" if versioned else b"dltensor"
    if not _is_valid(capsule, name):
        raise BufferError("dlpack: invalid capsule object")
    pointer = _get_pointer(capsule, name)
    if versioned:
        managed = _ManagedVersioned.from_address(pointer)
        if managed.major < 1:
            raise BufferError("dlpack: unexpected version")
        tensor, readonly = managed.dl_tensor, bool(managed.flags & _READ_ONLY)
    else:
        tensor, readonly = _DLTensor.from_address(pointer), False
    ndim = tensor.ndim
    if ndim < 0:
        raise BufferError("dlpack: number of dimensions is negative")
    if ndim > 0 and not tensor.shape:
        raise BufferError("dlpack: shape is NULL")
    shape = [int(tensor.shape[i]) for i in range(ndim)]
    if any(d < 0 for d in shape):
        raise BufferError("dlpack: shape item is negative")
    strides = [int(tensor.strides[i]) for i in range(ndim)] if tensor.strides else None
    if strides is not None and any(s < 0 for s in strides):
        raise BufferError("dlpack: strides item is negative")
    if not is_contiguous(shape, strides, 1):
        raise BufferError("dlpack: buffer is not contiguous")
    code, bits, lanes = int(tensor.code), int(tensor.bits), int(tensor.lanes)
    if lanes == 2 and code == _FLOAT and bits in (32, 64, 128):
        code, bits, lanes = _COMPLEX, bits * 2, 1
    fmt = _FORMATS.get((code, bits)) if lanes == 1 else None
    dtype = np.dtype(fmt) if fmt is not None else np.dtype("B")
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * ((bits * lanes + 7) // 8)
    address = (tensor.data or 0) + int(tensor.byte_offset)
    interface: dict[str, object] = {
        "shape": (nbytes // dtype.itemsize,),
        "typestr": dtype.str,
        "data": (address if nbytes else 0, readonly),
        "version": 3,
    }
    if not nbytes:
        interface["data"] = (np.empty(1, np.uint8).ctypes.data, readonly)
    array = np.asarray(_Owner(interface, capsule))
    view = memoryview(array)  # type: ignore[arg-type]
    return view.toreadonly() if readonly else view


def is_contiguous(shape: Sequence[int], strides: Sequence[int] | None, unit: int) -> bool:
    """Whether ``strides`` (in units of ``unit``; None: packed) lay ``shape`` out in C or in
    Fortran order with no gaps (dimensions of extent 1 may have any stride)."""
    if strides is None:
        return True
    return any(_packed(shape, strides, unit, order) for order in "CF")


def _packed(shape: Sequence[int], strides: Sequence[int], unit: int, order: str) -> bool:
    size = unit
    dims = range(len(shape)) if order == "F" else reversed(range(len(shape)))
    for i in dims:
        if shape[i] > 1 and size != strides[i]:
            return False
        size *= shape[i]
    return True
