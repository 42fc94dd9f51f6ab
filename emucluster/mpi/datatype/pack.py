"""Packing by a type map: ``Datatype.Pack`` / ``Unpack`` / ``Pack_size`` and their
``external32`` forms, as plain functions on a `TypeMap` and byte views.

The native format is the packed data as the type map gathers them (no header); external32 is
the same with every basic element big-endian. The callers (``Datatype``'s methods) turn the
program's buffers into byte views first (`buffer.view.byte_view`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

from emucluster.mpi.errors import ERR_ARG, ERR_TRUNCATE
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from emucluster.mpi.datatype.typemap import TypeMap

__all__ = ["EXTERNAL32", "check_rep", "pack", "pack_size", "unpack"]

EXTERNAL32 = "external32"


def pack_size(m: TypeMap, count: int) -> int:
    """Bytes packing ``count`` elements of ``m`` takes."""
    return int(count) * m.size


def check_rep(datarep: str) -> None:
    """ERR_ARG unless ``datarep`` is the one portable representation, external32."""
    if datarep != EXTERNAL32:
        raise MPIException(ERR_ARG, f"unknown data representation {datarep!r}")


def pack(m: TypeMap, src: memoryview, dst: memoryview, position: int, *, external: bool) -> int:
    """Pack all of ``src`` (whole elements of ``m``) into ``dst`` at ``position``; returns the
    new position (ERR_TRUNCATE when ``dst`` is too small)."""
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


def unpack(m: TypeMap, src: memoryview, position: int, dst: memoryview, *, external: bool) -> int:
    """Unpack ``dst``'s worth of elements of ``m`` from ``src`` at ``position``; returns the
    new position (ERR_TRUNCATE when ``src`` holds too few bytes)."""
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
