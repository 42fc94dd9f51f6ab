"""Collective buffer specs (mpi4py's simple, vector and ``w`` message forms) as block layouts.

A `Layout` is a buffer's byte view and, per block (one block per rank), where the block
starts (bytes), how many elements it holds and of which datatype. ``pack(i)`` gathers block i
into one bytes object (the only copy); ``unpack(i, data)`` scatters received bytes back.

Accepted forms, as mpi4py's ``message_simple`` / ``message_vector`` / ``message_vector_w``::

    simple:  buf | [buf, type] | [buf, count] | [buf, (count, displ)] | [buf, count, type]
             | [buf, (count, displ), type] | [buf, count, displ, type]   (count per block;
             without a count the buffer splits into ``blocks`` equal blocks)
    vector:  buf | [buf, type] | [buf, counts] | [buf, (counts, displs)] | [buf, counts, type]
             | [buf, (counts, displs), type] | [buf, counts, displs, type]   (counts: an int
             for all blocks, displs: an int stride; displacements in extents)
    w:       [buf, types] | [buf, (counts, displs), types] | [buf, counts, displs, types]
             (displacements in bytes)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.mpi.address import absolute_view
from emucluster.mpi.buffers import MessageSpecError, as_datatype, byte_view, inferred_datatype
from emucluster.mpi.constants import BOTTOM
from emucluster.mpi.datatypes import Datatype, predefined
from emucluster.mpi.errors import ERR_ARG, ERR_BUFFER, ERR_COUNT, ERR_TRUNCATE, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.foreign import host_buffer

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Layout", "simple", "vector", "vector_w"]


class Layout:
    """A buffer cut into blocks (see the module docstring)."""

    __slots__ = ("counts", "datatypes", "offsets", "view")

    def __init__(self, view: memoryview, offsets: list[int], counts: list[int],
                 datatypes: list[Datatype]) -> None:  # fmt: skip
        self.view = view
        self.offsets = offsets
        self.counts = counts
        self.datatypes = datatypes
        for i, (off, count, dt) in enumerate(zip(offsets, counts, datatypes, strict=True)):
            if count < 0 or off < 0:
                raise MPIException(ERR_COUNT, f"block {i}: negative count or displacement")
            if count and off + dt.span(count) > len(view):
                raise MPIException(
                    ERR_COUNT,
                    f"block {i}: {count} x {dt.name} at byte {off} overrun a "
                    f"buffer of {len(view)} bytes",
                )

    def nbytes(self, i: int) -> int:
        """Bytes of data in block ``i``."""
        return self.counts[i] * self.datatypes[i].size

    def pack(self, i: int) -> bytes:
        """Block ``i``'s data, packed."""
        return self.datatypes[i].pack_from(self.view, self.offsets[i], self.counts[i])

    def unpack(self, i: int, data: bytes | memoryview) -> None:
        """Store ``data`` into block ``i``; ERR_TRUNCATE if it does not fit."""
        if len(data) > self.nbytes(i):
            raise MPIException(
                ERR_TRUNCATE, f"block {i}: {len(data)} bytes received, room for {self.nbytes(i)}"
            )
        self.datatypes[i].unpack_into(self.view, self.offsets[i], data)


def _split(spec: object) -> tuple[object, object, object, object]:
    """(buf, counts, displs, datatype) of a list/tuple spec or a bare buffer."""
    if not isinstance(spec, list | tuple):
        return spec, None, None, None
    parts = list(spec)
    if len(parts) == 1:
        return parts[0], None, None, None
    if len(parts) == 2:
        buf, second = parts
        if isinstance(second, Datatype | str):
            return buf, None, None, second
        if isinstance(second, tuple | list) and len(second) == 2 and not _is_types(second):
            return buf, second[0], second[1], None
        return buf, second, None, None
    if len(parts) == 3:
        buf, second, dt = parts
        if isinstance(second, tuple):
            return buf, second[0], second[1], dt
        return buf, second, None, dt
    if len(parts) == 4:
        return parts[0], parts[1], parts[2], parts[3]
    raise MPIException(ERR_ARG, "message: expecting 2 to 4 items")


def _is_types(seq: Sequence[object]) -> bool:
    return any(isinstance(x, Datatype) for x in seq)


def _base(buf: object, dt: object, readonly: bool) -> tuple[memoryview, Datatype]:
    if dt is not None:
        dt = as_datatype(dt)
    if buf is None or buf is BOTTOM:
        return memoryview(bytearray(0)), dt or predefined["BYTE"]
    buf = host_buffer(buf)
    view = byte_view(buf, writable=not readonly)
    if dt is None:
        dt = inferred_datatype(buf)
    dt.Get_size()  # raises for DATATYPE_NULL / freed
    return view, dt


def _entries(view: memoryview, dt: Datatype) -> int:
    extent = dt.extent
    if not len(view):
        return 0
    if extent <= 0 or len(view) % extent:
        raise MessageSpecError(
            ERR_BUFFER, f"buffer of {len(view)} bytes is not a multiple of {dt.name}'s {extent}"
        )
    return len(view) // extent


def simple(spec: object, *, readonly: bool, blocks: int = 1) -> Layout:
    """A simple spec: ``blocks`` consecutive blocks of one count."""
    buf, count, displ, dt = _split(spec)
    view, datatype = _base(buf, dt, readonly)
    extent = datatype.extent
    start = 0
    if displ is not None and int(displ):  # type: ignore[call-overload]
        start = int(displ) * extent  # type: ignore[call-overload]
        if start < 0 or start > len(view):
            raise MessageSpecError(ERR_COUNT, f"displacement {displ} out of bounds")
    if count is None:
        entries = _entries(view[start:], datatype)
        if entries % blocks:
            raise MessageSpecError(
                ERR_BUFFER, f"{entries} entries do not split into {blocks} blocks"
            )
        n = entries // blocks
    else:
        n = int(count)  # type: ignore[call-overload]
        if n > 0 and buf is None:
            raise MessageSpecError(ERR_BUFFER, f"buffer is None but count is {n}")
    offsets = [start + i * n * extent for i in range(blocks)]
    return Layout(view, offsets, [n] * blocks, [datatype] * blocks)


def vector(spec: object, *, readonly: bool, blocks: int) -> Layout:
    """A vector spec: per-block counts and displacements (in extents)."""
    buf, counts_spec, displs_spec, dt = _split(spec)
    view, datatype = _base(buf, dt, readonly)
    counts = _counts(counts_spec, view, datatype, blocks)
    if displs_spec is None:
        displs = [sum(counts[:i]) for i in range(blocks)]
    elif isinstance(displs_spec, int):
        displs = [displs_spec * i for i in range(blocks)]
    else:
        displs = _ints(displs_spec, blocks, "displacements")
    extent = datatype.extent
    return Layout(view, [d * extent for d in displs], counts, [datatype] * blocks)


def vector_w(spec: object, *, readonly: bool, blocks: int) -> Layout:
    """A ``w`` spec: per-block counts, byte displacements and datatypes."""
    if not isinstance(spec, list | tuple) or not 2 <= len(spec) <= 4:
        raise MPIException(ERR_ARG, "message: expecting 2 to 4 items")
    parts = list(spec)
    if len(parts) == 2:
        buf, types = parts
        counts: list[int] = [1] * blocks
        displs: list[int] = [0] * blocks
    elif len(parts) == 3:
        buf, (c, d), types = parts
        counts, displs = _ints(c, blocks, "counts"), _ints(d, blocks, "displacements")
    else:
        buf, c, d, types = parts
        counts, displs = _ints(c, blocks, "counts"), _ints(d, blocks, "displacements")
    if isinstance(types, Datatype | str):
        types = [types] * blocks
    datatypes = [as_datatype(t) for t in types]
    if len(datatypes) != blocks:
        raise MessageSpecError(ERR_TYPE, f"expecting {blocks} datatypes")
    if buf is BOTTOM:
        return _absolute(displs, counts, datatypes)
    view = memoryview(bytearray(0))
    if buf is not None:
        view = byte_view(host_buffer(buf), writable=not readonly)
    return Layout(view, displs, counts, datatypes)


def _absolute(displs: list[int], counts: list[int], datatypes: list[Datatype]) -> Layout:
    """A BOTTOM ``w`` layout: displacements and type maps hold real addresses (from
    ``Get_address``); the view spans the bytes they reach."""
    spans = [
        (d + t.true_lb, d + (n - 1) * t.extent + max(t.true_ub, t.ub))
        for d, n, t in zip(displs, counts, datatypes, strict=True)
        if n > 0 and t.size > 0
    ]
    if not spans:
        return Layout(memoryview(bytearray(0)), [0] * len(displs), counts, datatypes)
    base = min(lo for lo, _ in spans)
    end = max(hi for _, hi in spans)
    return Layout(absolute_view(base, end - base), [d - base for d in displs], counts, datatypes)


def _counts(spec: object, view: memoryview, dt: Datatype, blocks: int) -> list[int]:
    if spec is None:
        entries = _entries(view, dt)
        return [entries // blocks + (entries % blocks > i) for i in range(blocks)]
    if isinstance(spec, int):
        return [spec] * blocks
    return _ints(spec, blocks, "counts")


def _ints(seq: object, blocks: int, what: str) -> list[int]:
    values = [int(x) for x in seq]  # type: ignore[attr-defined]
    if len(values) != blocks:
        raise MPIException(ERR_ARG, f"expecting {blocks} {what}, got {len(values)}")
    return values
