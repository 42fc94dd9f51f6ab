"""``MPI.buffer``: mpi4py's byte-buffer object over any buffer-like memory.

A 1-d ``uint8`` numpy array subclass, so it speaks the buffer protocol on Python 3.11 (a
pure-Python class cannot), viewing the memory of the object it was made from (buffer
protocol, DLPack or CUDA array interface: host memory here) or of an address, without a copy.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from emucluster.mpi.buffer.foreign import host_buffer
from emucluster.mpi.buffer.view import typed_view

__all__ = ["buffer"]


class buffer(np.ndarray):
    """Raw memory as bytes (mpi4py's ``MPI.buffer``)."""

    _owner: object = None
    _device: bool = False  # memory of a (emulated) GPU: no host-side access, as in mpi4py

    def __new__(cls, obj: object = None) -> buffer:
        if obj is None:
            return cls.allocate(0)
        return cls.frombuffer(obj)

    @classmethod
    def _wrap(cls, view: memoryview, owner: object) -> buffer:
        flat = np.frombuffer(view.cast("B") if view.format != "B" or view.ndim != 1 else view,
                             dtype=np.uint8)  # fmt: skip
        new = flat.view(cls)
        new._owner = owner
        return new

    @classmethod
    def allocate(cls, nbytes: int, clear: bool = False) -> buffer:
        """``nbytes`` new bytes (zeroed either way here)."""
        if nbytes < 0:
            raise ValueError("expecting non-negative size")
        data = bytearray(nbytes)
        return cls._wrap(memoryview(data), data)

    @classmethod
    def frombuffer(cls, obj: object, readonly: bool = False) -> buffer:
        """A view of ``obj``'s memory."""

        view = typed_view(host_buffer(obj))
        if not view.c_contiguous:
            raise BufferError("buffer: not contiguous")
        if view.ndim != 1 or view.format != "B":
            view = view.cast("B") if view.c_contiguous else view
        new = cls._wrap(view, obj)
        new._device = _on_device(obj)
        if readonly or view.readonly:
            new.flags.writeable = False
        return new

    @classmethod
    def fromaddress(cls, address: int, nbytes: int, readonly: bool = False) -> buffer:
        """``nbytes`` of memory at ``address``."""
        if nbytes < 0:
            raise ValueError("expecting non-negative buffer length")
        if address == 0 and nbytes > 0:
            raise ValueError("expecting non-NULL address")
        if nbytes == 0:
            return cls.allocate(0)
        raw = (ctypes.c_ubyte * nbytes).from_address(address)
        new = cls._wrap(memoryview(raw), raw)
        if readonly:
            new.flags.writeable = False
        return new

    @property
    def address(self) -> int:
        """Address of the first byte."""
        return int(self.ctypes.data) if self.size else 0

    @property
    def obj(self) -> object:
        """The object whose memory this is."""
        return self._owner

    @property
    def readonly(self) -> bool:
        """Whether writes are refused."""
        return not self.flags.writeable

    @property
    def format(self) -> str:
        """Always ``'B'``."""
        return "B"

    def _host(self) -> None:
        if self._device:
            raise BufferError("buffer: device memory is not accessible from the host")

    def __getitem__(self, item: Any) -> Any:
        self._host()
        return super().__getitem__(item)

    def __setitem__(self, item: Any, value: Any) -> None:
        self._host()
        super().__setitem__(item, value)

    def cast(self, format: str = "B", shape: Any = None) -> memoryview:
        """A memoryview of these bytes as ``format`` items."""
        self._host()
        view: Any = memoryview(self)  # type: ignore[arg-type]
        cast: memoryview = view.cast(format) if shape is None else view.cast(format, shape)
        return cast

    def tobytes(self, order: Any = None) -> bytes:
        """A copy of the bytes."""
        self._host()
        return bytes(memoryview(self))  # type: ignore[arg-type]

    def toreadonly(self) -> buffer:
        """A read-only view of the same bytes."""
        new = self.view(type(self))
        new._owner = self._owner
        new.flags.writeable = False
        return new

    def __bool__(self) -> bool:
        """True if it has any bytes (as mpi4py's buffer, which has a length)."""
        return bool(self.size)

    def release(self) -> None:
        """Forget the owner (the memory stays valid while other views hold it)."""
        self._owner = None


def _on_device(obj: object) -> bool:
    """Whether ``obj`` says its memory is on a GPU (DLPack device not CPU, or CUDA array
    interface): such memory is host memory here, but mpi4py's buffer refuses host access."""
    device = getattr(obj, "__dlpack_device__", None)
    if callable(device):
        try:
            return int(device()[0]) != 1
        except (TypeError, ValueError, IndexError):
            return False
    return hasattr(obj, "__cuda_array_interface__")
