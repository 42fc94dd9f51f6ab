"""Type maps: where the basic elements of one datatype element lie, and gather/scatter by them.

A `TypeMap` is the MPI type map of one element: a displacement (bytes) and a basic kind (an
index into `BASICS`, the predefined datatypes' item sizes) for each basic element, with the
lower and upper bounds that give the extent. Constructors compose maps with numpy (one array
operation per constructor, no Python loop over elements); `pack` gathers ``count`` elements
from a buffer into one contiguous bytes object and `unpack` scatters packed bytes back, each
with one fancy-indexing copy, or a plain slice when the map is contiguous.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["BASIC_SIZES", "TypeMap", "register_basic"]

BASIC_SIZES: list[int] = []
"""Item size of each basic kind (predefined datatype), by kind index."""
_I64 = np.int64


def register_basic(itemsize: int) -> int:
    """A new basic kind of ``itemsize`` bytes; returns its index."""
    BASIC_SIZES.append(itemsize)
    return len(BASIC_SIZES) - 1


class TypeMap:
    """The type map of one element (see the module docstring)."""

    __slots__ = ("_index", "disps", "kinds", "lb", "size", "true_lb", "true_ub", "ub")

    def __init__(self, disps: np.ndarray, kinds: np.ndarray, lb: int, ub: int) -> None:
        self.disps = disps.astype(_I64, copy=False)
        self.kinds = kinds.astype(np.int32, copy=False)
        self.lb = lb
        self.ub = ub
        sizes = np.asarray(BASIC_SIZES, dtype=_I64)[self.kinds] if len(kinds) else np.zeros(0)
        self.size = int(sizes.sum())
        if len(disps):
            self.true_lb = int(self.disps.min())
            self.true_ub = int((self.disps + sizes).max())
        else:
            self.true_lb = self.true_ub = 0
        self._index: np.ndarray | None = None

    @classmethod
    def basic(cls, kind: int) -> TypeMap:
        """The map of a predefined type."""
        return cls(np.zeros(1, _I64), np.full(1, kind), 0, BASIC_SIZES[kind])

    @property
    def extent(self) -> int:
        """Upper minus lower bound."""
        return self.ub - self.lb

    @property
    def contiguous(self) -> bool:
        """Whether the data of consecutive elements are consecutive bytes from offset 0."""
        return self.lb == 0 and self.ub == self.size and self.true_lb == 0 and (
            len(self.disps) <= 1 or bool(np.array_equal(self.byte_index(), np.arange(self.size)))
        )

    def homogeneous(self) -> int | None:
        """The one basic kind of every element, or None for a mixed (or empty) map."""
        if not len(self.kinds):
            return None
        first = int(self.kinds[0])
        return first if bool((self.kinds == first).all()) else None

    def byte_index(self) -> np.ndarray:
        """Offsets of the data bytes of one element, in type-map order."""
        if self._index is None:
            sizes = np.asarray(BASIC_SIZES, dtype=_I64)[self.kinds]
            starts = np.cumsum(sizes) - sizes
            within = np.arange(self.size, dtype=_I64) - np.repeat(starts, sizes)
            self._index = np.repeat(self.disps, sizes) + within
        return self._index

    # -- constructors --------------------------------------------------------------------------

    def replicate(self, offsets: np.ndarray) -> TypeMap:
        """Copies of this map at byte ``offsets`` (bounds from the copies' bounds)."""
        offsets = np.asarray(offsets, dtype=_I64)
        if not len(offsets):
            return TypeMap(np.zeros(0, _I64), np.zeros(0, np.int32), 0, 0)
        disps = (offsets[:, None] + self.disps[None, :]).ravel()
        kinds = np.tile(self.kinds, len(offsets))
        return TypeMap(disps, kinds, int(offsets.min()) + self.lb, int(offsets.max()) + self.ub)

    def blocks(self, blocklengths: Sequence[int], displacements: Sequence[int]) -> TypeMap:
        """Blocks of ``blocklengths[i]`` elements at byte ``displacements[i]``."""
        lengths = np.asarray(blocklengths, dtype=_I64)
        starts = np.asarray(displacements, dtype=_I64)
        block_of = np.repeat(np.arange(len(lengths)), lengths)
        first = np.cumsum(lengths) - lengths
        within = np.arange(int(lengths.sum()), dtype=_I64) - np.repeat(first, lengths)
        return self.replicate(starts[block_of] + within * self.extent)

    def resized(self, lb: int, extent: int) -> TypeMap:
        """Same data, bounds ``lb`` and ``lb + extent``."""
        return TypeMap(self.disps, self.kinds, lb, lb + extent)

    @staticmethod
    def concat(parts: Sequence[TypeMap]) -> TypeMap:
        """The union of several maps (a struct's blocks), in order."""
        parts = [p for p in parts if len(p.disps)]
        if not parts:
            return TypeMap(np.zeros(0, _I64), np.zeros(0, np.int32), 0, 0)
        disps = np.concatenate([p.disps for p in parts])
        kinds = np.concatenate([p.kinds for p in parts])
        return TypeMap(disps, kinds, min(p.lb for p in parts), max(p.ub for p in parts))

    # -- moving data ----------------------------------------------------------------------------

    def span(self, count: int) -> int:
        """Bytes from the buffer's start that ``count`` elements reach."""
        return (count - 1) * self.extent + max(self.true_ub, self.ub) if count > 0 else 0

    def _indices(self, offset: int, count: int) -> np.ndarray:
        starts = offset + np.arange(count, dtype=_I64) * self.extent
        index: np.ndarray = (starts[:, None] + self.byte_index()[None, :]).ravel()
        return index

    def pack(self, view: memoryview, offset: int, count: int) -> bytes:
        """The data of ``count`` elements at byte ``offset`` of ``view``, packed."""
        if self.contiguous:
            return bytes(view[offset : offset + count * self.size])
        raw = np.frombuffer(view, dtype=np.uint8)
        packed: bytes = raw[self._indices(offset, count)].tobytes()
        return packed

    def unpack(self, view: memoryview, offset: int, data: bytes | memoryview) -> None:
        """Store packed ``data`` (whole elements, maybe fewer than fit) at byte ``offset``."""
        if self.contiguous:
            view[offset : offset + len(data)] = data
            return
        count = len(data) // self.size if self.size else 0
        raw = np.frombuffer(view, dtype=np.uint8)
        raw[self._indices(offset, count)] = np.frombuffer(data, dtype=np.uint8)[: count * self.size]
