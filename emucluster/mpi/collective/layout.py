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

import operator
from typing import TYPE_CHECKING

from emucluster.mpi.buffer.address import absolute_view
from emucluster.mpi.buffer.foreign import host_buffer
from emucluster.mpi.buffer.spec import (
    MessageSpecError,
    NotABuffer,
    as_datatype,
    byte_view,
    inferred_datatype,
)
from emucluster.mpi.constants import BOTTOM
from emucluster.mpi.datatype.datatype import Datatype, predefined
from emucluster.mpi.errors import ERR_ARG, ERR_BUFFER, ERR_COUNT, ERR_TRUNCATE, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException

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
    if not dt:  # DATATYPE_NULL or freed: an MPI.Exception that is also mpi4py's ValueError
        raise MessageSpecError(ERR_TYPE, "message: datatype is null")
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
    """A vector spec: per-block counts and displacements (in extents), read as mpi4py's
    ``message_vector`` reads them."""
    buf, counts_spec, displs_spec, dt = _split_vector(spec)
    view, datatype = _base(buf, dt, readonly)
    if counts_spec is None:
        entries = _entries(view, datatype) if len(view) else 0
        counts = [entries // blocks + (entries % blocks > i) for i in range(blocks)]
    elif _integral(counts_spec):
        counts = [operator.index(counts_spec)] * blocks  # type: ignore[arg-type]
    else:
        counts = _ints(counts_spec, blocks, "counts")
    if displs_spec is None:
        displs = [sum(counts[:i]) for i in range(blocks)]
    elif _integral(displs_spec):
        displs = [operator.index(displs_spec) * i for i in range(blocks)]  # type: ignore[arg-type]
    else:
        displs = _ints(displs_spec, blocks, "displacements")
    extent = datatype.extent
    return Layout(view, [d * extent for d in displs], counts, [datatype] * blocks)


def _split_vector(spec: object) -> tuple[object, object, object, object]:
    if not isinstance(spec, list | tuple):
        if spec is not None and not _buffer_like(spec):
            raise NotABuffer(ERR_BUFFER, "message: expecting buffer or list/tuple")
        return spec, None, None, None
    parts = list(spec)
    counts: object = None
    displs: object = None
    dt: object = None
    if len(parts) == 2:
        buf, counts = parts
        if isinstance(counts, Datatype | str):
            counts, dt = None, counts
        elif isinstance(counts, tuple):
            counts, displs = counts
    elif len(parts) == 3:
        buf, counts, dt = parts
        if isinstance(counts, tuple):
            counts, displs = counts
    elif len(parts) == 4:
        buf, counts, displs, dt = parts
    else:
        raise MessageSpecError(ERR_ARG, "message: expecting 2 to 4 items")
    return buf, counts, displs, dt


def _buffer_like(obj: object) -> bool:
    try:
        memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        return hasattr(obj, "__dlpack__") or hasattr(obj, "__cuda_array_interface__")
    return True


def _integral(value: object) -> bool:
    try:
        operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


def vector_w(spec: object, *, readonly: bool, blocks: int) -> Layout:
    """A ``w`` spec: per-block counts, byte displacements and datatypes (mpi4py's
    ``message_vector_w``)."""
    if not isinstance(spec, list | tuple) or not 2 <= len(spec) <= 4:
        raise MessageSpecError(ERR_ARG, "message: expecting 2 to 4 items")
    parts = list(spec)
    c: object = None
    d: object = None
    if len(parts) == 2:
        buf, types = parts
    elif len(parts) == 3:
        buf, (c, d), types = parts
    else:
        buf, c, d, types = parts
    if buf is BOTTOM and (c is None or d is None):
        raise MessageSpecError(ERR_ARG, "message: BOTTOM requires counts and displs")
    if c is None and d is None:
        counts, displs = [1] * blocks, [0] * blocks
    else:
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
    # offsets are negative here (the type maps carry the addresses), so Layout's bounds check,
    # which measures from the offset, does not apply: the view spans exactly what is reached
    layout = Layout.__new__(Layout)
    layout.view = absolute_view(base, end - base)
    layout.offsets = [d - base for d in displs]
    layout.counts, layout.datatypes = counts, datatypes
    return layout


def _ints(seq: object, blocks: int, what: str) -> list[int]:
    if seq is None or isinstance(seq, str | bytes):
        raise NotABuffer(ERR_ARG, f"expecting a sequence of {what}")
    values = [operator.index(x) for x in seq]  # type: ignore[attr-defined]
    if len(values) != blocks:
        raise MessageSpecError(ERR_ARG, f"expecting {blocks} {what}, got {len(values)}")
    return values
