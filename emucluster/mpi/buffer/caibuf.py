"""``__cuda_array_interface__`` buffers as mpi4py reads them (``ascaibuf.pxi``).

The emulated cluster has no GPUs: the memory such an object describes is host memory, viewed
in place as a numpy array (no copy). The checks and their error types are mpi4py's: a field
of the wrong type is a TypeError, a missing one a KeyError, a bad data tuple or item size a
ValueError, and a foreign byte order, a mask, a negative size, a non-contiguous layout or a
read-only buffer that must be written a BufferError (the last is checked by the caller).
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from emucluster.mpi.buffer.dlpack import is_contiguous

__all__ = ["cai_array"]

_KINDS = "biufc"


class _Interface:
    __slots__ = ("__array_interface__", "owner")

    def __init__(self, interface: dict[str, object], owner: object) -> None:
        self.__array_interface__ = interface
        self.owner = owner


def _typed(value: object, kind: type | tuple[type, ...], what: str) -> object:
    if not isinstance(value, kind):
        raise TypeError(f"__cuda_array_interface__: {what} has the wrong type")
    return value


def cai_array(obj: object) -> np.ndarray:
    """A 1-d numpy array over the memory ``obj.__cuda_array_interface__`` describes (read-only
    if the interface says so)."""
    cai = _typed(obj.__cuda_array_interface__, dict, "the interface")  # type: ignore[attr-defined]
    assert isinstance(cai, dict)
    data = _typed(cai["data"], tuple, "data")
    typestr = _typed(cai["typestr"], str, "typestr")
    shape = _typed(cai["shape"], tuple, "shape")
    strides = _typed(cai.get("strides"), (tuple, type(None)), "strides")
    descr = _typed(cai.get("descr"), (list, type(None)), "descr")
    mask = cai.get("mask")
    assert isinstance(data, tuple)
    assert isinstance(typestr, str)
    assert isinstance(shape, tuple)
    assert strides is None or isinstance(strides, tuple)
    assert descr is None or isinstance(descr, list)
    dev_ptr, readonly = data  # ValueError unless two items
    size = 1
    for s in shape:
        size *= int(s)
    if dev_ptr is None and size == 0:
        dev_ptr = 0
    byteorder, kind, itemsize = typestr[0:1], typestr[1:2], int(typestr[2:])
    native = "<" if sys.byteorder == "little" else ">"
    if byteorder not in (native, "|"):
        how = "non-native" if byteorder in "<>" else "unrecognized"
        raise BufferError(f"__cuda_array_interface__: typestr {typestr!r} with {how} byte order")
    if mask is not None:
        raise BufferError("__cuda_array_interface__: cannot handle masked arrays")
    if size < 0:
        raise BufferError(f"__cuda_array_interface__: buffer with negative size {shape}")
    if not is_contiguous(shape, strides, itemsize):
        raise BufferError("__cuda_array_interface__: buffer is not contiguous")
    if descr is not None and (len(descr) != 1 or tuple(descr[0]) != ("", typestr)):
        warnings.warn("__cuda_array_interface__: ignoring 'descr' key", RuntimeWarning,
                      stacklevel=3)  # fmt: skip
    dtype = np.dtype(f"={kind}{itemsize}") if kind in _KINDS else np.dtype("u1")
    if dtype.itemsize != itemsize:
        dtype = np.dtype("u1")
    count = size * itemsize // dtype.itemsize
    address = int(dev_ptr) if count else np.empty(1, np.uint8).ctypes.data
    interface = {"shape": (count,), "typestr": dtype.str, "data": (address, bool(readonly)),
                 "version": 3}  # fmt: skip
    return np.asarray(_Interface(interface, obj))
