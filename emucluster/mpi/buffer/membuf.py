"""``MPI.buffer``: mpi4py's byte-buffer object over any buffer-like memory.

A 1-d ``uint8`` numpy array subclass, so it speaks the buffer protocol on Python 3.11 (a
pure-Python class cannot), viewing the memory of the object it was made from (buffer
protocol, DLPack or CUDA array interface: host memory here) or of an address, without a copy.
It behaves as mpi4py's sequence of bytes, not as an array: items are indexed by an integer or a
slice of step 1 (IndexError for other steps, TypeError for other keys), items cannot be deleted
(NotImplementedError), a read-only buffer refuses writes with TypeError, and ``release`` leaves
an empty buffer (address 0, no bytes) although other views keep the memory valid.
``memory`` is mpi4py's backward-compatibility alias of ``buffer``.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from emucluster.mpi.buffer.foreign import host_buffer
from emucluster.mpi.buffer.view import typed_view

__all__ = ["buffer", "memory"]

_NO_OBJECT = object()
"""``buffer()`` without an argument: the null buffer (``buffer(None)`` is a TypeError)."""


class buffer(np.ndarray):
    """Raw memory as bytes (mpi4py's ``MPI.buffer``)."""

    _owner: object = None
    _device: bool = False  # memory of a (emulated) GPU: no host-side access, as in mpi4py

    _released: bool = False  # release() was called, or the null buffer: address 0, no bytes

    def __new__(cls, obj: object = _NO_OBJECT) -> buffer:
        if obj is _NO_OBJECT:
            new = cls._wrap(memoryview(bytearray(0)), None)
            new._released = True
            return new
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
        if nbytes:
            data = bytearray(nbytes)
            return cls._wrap(memoryview(data), data)
        empty = memoryview(bytearray(1))[:0]  # no bytes at a real address, as malloc(0)
        return cls._wrap(empty, empty)

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
        """Address of the first byte (0 once released)."""
        return 0 if self._released else int(self.ctypes.data)

    @property
    def nbytes(self) -> int:
        """Bytes of memory (0 once released)."""
        return 0 if self._released else int(self.size)

    def __len__(self) -> int:
        return 0 if self._released else int(self.size)

    @property
    def obj(self) -> object:
        """The object whose memory this is."""
        return self._owner

    @property
    def readonly(self) -> bool:
        """Whether writes are refused (False once released)."""
        return not self._released and not self.flags.writeable

    @property
    def format(self) -> str:
        """Always ``'B'``."""
        return "B"

    def _host(self) -> None:
        if self._device:
            raise BufferError("buffer: device memory is not accessible from the host")

    def _key(self, item: Any) -> None:
        """Check an index as mpi4py's buffer does: an integer in range or a slice of step 1
        (tuples and Ellipsis pass, for numpy's own use of the array)."""
        self._host()
        if isinstance(item, slice):
            if item.step not in (None, 1):
                raise IndexError("buffer: slice step must be 1")
        elif isinstance(item, int | np.integer) and not isinstance(item, bool):
            if not -len(self) <= item < len(self):
                raise IndexError("buffer: index out of range")
        elif not isinstance(item, tuple) and item is not Ellipsis:
            raise TypeError(f"buffer: index must be an integer or a slice, not {item!r}")

    def __getitem__(self, item: Any) -> Any:
        self._key(item)
        return super().__getitem__(item)

    def __setitem__(self, item: Any, value: Any) -> None:
        self._key(item)
        if self.readonly:
            raise TypeError("buffer is read-only")
        if isinstance(value, bytes | bytearray | memoryview):
            value = np.frombuffer(value, dtype=np.uint8)
        super().__setitem__(item, value)

    def __delitem__(self, item: Any) -> None:
        raise NotImplementedError("buffer: items cannot be deleted")

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
        return bool(len(self))

    def release(self) -> None:
        """Forget the owner and become empty (the memory stays valid while other views
        hold it)."""
        self._owner = None
        self._released = True


memory = buffer
"""mpi4py's backward-compatibility alias of ``buffer`` (``MPI.memory``)."""


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
