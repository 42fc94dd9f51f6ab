"""``Datatype.Pack`` / ``Unpack`` / ``Pack_size`` and their ``external32`` forms (mixed into
``Datatype``). The native format is the packed data as the type map gathers them (no
header); external32 is the same with every basic element big-endian.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

from emucluster.mpi.errors import ERR_ARG, ERR_TRUNCATE
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from emucluster.mpi.datatype.typemap import TypeMap

__all__ = ["DatatypePacking"]

EXTERNAL32 = "external32"


class DatatypePacking:
    """Pack/Unpack methods of ``Datatype`` (see the module docstring)."""

    __slots__ = ()

    @property
    def typemap(self) -> TypeMap:
        raise NotImplementedError

    def Pack_size(self, count: int, comm: object = None) -> int:
        """Bytes ``Pack`` needs for ``count`` elements."""
        return int(count) * self.typemap.size

    def Pack(self, inbuf: object, outbuf: object, position: int, comm: object = None) -> int:
        """Pack all of ``inbuf`` (as elements of this type) into ``outbuf`` at ``position``;
        returns the new position."""
        return self._pack(inbuf, outbuf, position, external=False)

    def Unpack(self, inbuf: object, position: int, outbuf: object, comm: object = None) -> int:
        """Unpack ``outbuf``'s worth of elements from ``inbuf`` at ``position``; returns the
        new position."""
        return self._unpack(inbuf, position, outbuf, external=False)

    def Pack_external_size(self, datarep: str, count: int) -> int:
        """Bytes ``Pack_external`` needs for ``count`` elements."""
        _check_rep(datarep)
        return self.Pack_size(count)

    def Pack_external(self, datarep: str, inbuf: object, outbuf: object, position: int) -> int:
        """Pack in the portable big-endian ``external32`` representation."""
        _check_rep(datarep)
        return self._pack(inbuf, outbuf, position, external=True)

    def Unpack_external(self, datarep: str, inbuf: object, position: int, outbuf: object) -> int:
        """Unpack from the ``external32`` representation."""
        _check_rep(datarep)
        return self._unpack(inbuf, position, outbuf, external=True)

    def _pack(self, inbuf: object, outbuf: object, position: int, *, external: bool) -> int:
        from emucluster.mpi.buffer.spec import byte_view  # buffers imports datatypes

        m = self.typemap
        src = byte_view(inbuf, writable=False)
        dst = byte_view(outbuf, writable=True)
        count = len(src) // m.extent if m.extent > 0 else 0
        data = m.pack(src, 0, count)
        if external:
            data = _swap(m, data)
        end = position + len(data)
        if position < 0 or end > len(dst):
            raise MPIException(ERR_TRUNCATE, f"Pack: {len(data)} bytes at {position} overrun "
                                             f"a buffer of {len(dst)}")  # fmt: skip
        dst[position:end] = data
        return end

    def _unpack(self, inbuf: object, position: int, outbuf: object, *, external: bool) -> int:
        from emucluster.mpi.buffer.spec import byte_view  # buffers imports datatypes

        m = self.typemap
        src = byte_view(inbuf, writable=False)
        dst = byte_view(outbuf, writable=True)
        count = len(dst) // m.extent if m.extent > 0 else 0
        end = position + count * m.size
        if position < 0 or end > len(src):
            raise MPIException(ERR_TRUNCATE, f"Unpack: {count * m.size} bytes at {position} "
                                             f"overrun a buffer of {len(src)}")  # fmt: skip
        data = bytes(src[position:end])
        if external:
            data = _swap(m, data)
        m.unpack(dst, 0, data)
        return end


def _check_rep(datarep: str) -> None:
    if datarep != EXTERNAL32:
        raise MPIException(ERR_ARG, f"unknown data representation {datarep!r}")


def _swap(m: TypeMap, data: bytes) -> bytes:
    """Reverse the bytes of every basic element (native little-endian <-> external32)."""
    if sys.byteorder == "big" or not data:
        return data
    sizes = m.element_sizes()
    if bool((sizes <= 1).all()):
        return data
    starts = np.cumsum(sizes) - sizes
    within = np.arange(m.size, dtype=np.int64) - np.repeat(starts, sizes)
    order = np.repeat(starts, sizes) + (np.repeat(sizes, sizes) - 1 - within)
    count = len(data) // m.size
    full = (np.arange(count, dtype=np.int64)[:, None] * m.size + order[None, :]).ravel()
    swapped: bytes = np.frombuffer(data, dtype=np.uint8)[full].tobytes()
    return swapped
