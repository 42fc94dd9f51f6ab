"""Type maps: where the basic elements of one datatype element lie, and gather/scatter by them.

A `TypeMap` is the MPI type map of one element, stored run-length: each run is ``count``
consecutive basic elements of one kind (an index into `BASIC_SIZES`, the predefined
datatypes' item sizes) starting at a byte displacement, in type-map order, with the lower and
upper bounds that give the extent. A contiguous type of 2^31 bytes is one run, not 2^31
entries. Constructors compose maps with numpy (one array operation per constructor, no Python
loop over elements) and merge runs that continue each other; `pack` gathers ``count`` elements
from a buffer into one contiguous bytes object and `unpack` scatters packed bytes back, each
with one fancy-indexing copy, or a plain slice when the map is contiguous.

Invariants: runs are never empty; two neighbouring runs of the same kind never continue each
other (they would have been merged); ``size`` is the sum of the runs' bytes.
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


def _itemsizes(kinds: np.ndarray) -> np.ndarray:
    sizes: np.ndarray = np.asarray(BASIC_SIZES, dtype=_I64)[kinds]
    return sizes


class TypeMap:
    """The type map of one element (see the module docstring)."""

    __slots__ = (
        "_contiguous", "_index", "counts", "disps", "elements", "kinds", "lb", "size",
        "true_lb", "true_ub", "ub",
    )  # fmt: skip

    def __init__(self, disps: np.ndarray, kinds: np.ndarray, lb: int, ub: int,
                 counts: np.ndarray | None = None) -> None:  # fmt: skip
        disps = np.asarray(disps, dtype=_I64)
        kinds = np.asarray(kinds, dtype=np.int32)
        counts = np.ones(len(disps), _I64) if counts is None else np.asarray(counts, _I64)
        self.disps, self.kinds, self.counts = _merge(disps, kinds, counts)
        self.lb = lb
        self.ub = ub
        run_bytes = self.run_bytes()
        self.size = int(run_bytes.sum())
        self.elements = int(self.counts.sum())
        if len(self.disps):
            self.true_lb = int(self.disps.min())
            self.true_ub = int((self.disps + run_bytes).max())
        else:
            self.true_lb = self.true_ub = 0
        self._index: np.ndarray | None = None
        self._contiguous: bool | None = None

    @classmethod
    def basic(cls, kind: int) -> TypeMap:
        """The map of a predefined type."""
        return cls(np.zeros(1, _I64), np.full(1, kind), 0, BASIC_SIZES[kind])

    @classmethod
    def empty(cls) -> TypeMap:
        """The map with no data and zero extent."""
        return cls(np.zeros(0, _I64), np.zeros(0, np.int32), 0, 0)

    def run_bytes(self) -> np.ndarray:
        """Bytes of each run."""
        out: np.ndarray = self.counts * _itemsizes(self.kinds)
        return out

    def elements_in(self, nbytes: int) -> int | None:
        """Basic elements in the first ``nbytes`` of one packed element (type-map order), or
        None when ``nbytes`` ends inside a basic element (MPI's UNDEFINED for Get_elements)."""
        ends = np.cumsum(self.run_bytes())
        run = int(np.searchsorted(ends, nbytes, side="right"))
        before = int(self.counts[:run].sum())
        if run == len(ends):
            return before if nbytes == self.size else None
        start = int(ends[run - 1]) if run else 0
        whole, part = divmod(nbytes - start, BASIC_SIZES[int(self.kinds[run])])
        return None if part else before + whole

    @property
    def extent(self) -> int:
        """Upper minus lower bound."""
        return self.ub - self.lb

    @property
    def dense(self) -> bool:
        """One run exactly filling [lb, ub): copies side by side stay one run."""
        return len(self.disps) == 1 and int(self.disps[0]) == self.lb and self.size == self.extent

    @property
    def contiguous(self) -> bool:
        """Whether the data of consecutive elements are consecutive bytes from offset 0, in
        type-map order."""
        if self._contiguous is None:
            ends = self.disps + self.run_bytes()
            self._contiguous = (
                self.lb == 0
                and self.ub == self.size
                and (not len(self.disps) or int(self.disps[0]) == 0)
                and bool(np.array_equal(self.disps[1:], ends[:-1]))
            )
        return self._contiguous

    def homogeneous(self) -> int | None:
        """The one basic kind of every element, or None for a mixed (or empty) map."""
        if not len(self.kinds):
            return None
        first = int(self.kinds[0])
        return first if bool((self.kinds == first).all()) else None

    def element_sizes(self) -> np.ndarray:
        """Item size of each basic element, in type-map order."""
        out: np.ndarray = np.repeat(_itemsizes(self.kinds), self.counts)
        return out

    def byte_index(self) -> np.ndarray:
        """Offsets of the data bytes of one element, in type-map order."""
        if self._index is None:
            run_bytes = self.run_bytes()
            starts = np.cumsum(run_bytes) - run_bytes
            within = np.arange(self.size, dtype=_I64) - np.repeat(starts, run_bytes)
            self._index = np.repeat(self.disps, run_bytes) + within
        return self._index

    # -- constructors --------------------------------------------------------------------------

    def replicate(self, offsets: np.ndarray) -> TypeMap:
        """Copies of this map at byte ``offsets`` (bounds from the copies' bounds)."""
        offsets = np.asarray(offsets, dtype=_I64)
        if not len(offsets):
            return TypeMap.empty()
        lb, ub = int(offsets.min()) + self.lb, int(offsets.max()) + self.ub
        disps = (offsets[:, None] + self.disps[None, :]).ravel()
        kinds = np.tile(self.kinds, len(offsets))
        counts = np.tile(self.counts, len(offsets))
        return TypeMap(disps, kinds, lb, ub, counts)

    def blocks(self, blocklengths: Sequence[int], displacements: Sequence[int]) -> TypeMap:
        """Blocks of ``blocklengths[i]`` elements at byte ``displacements[i]``."""
        lengths = np.asarray(blocklengths, dtype=_I64)
        starts = np.asarray(displacements, dtype=_I64)
        if self.dense and self.extent > 0 and len(lengths):
            # each block is one run: no per-element expansion (a 2^31-element block is cheap)
            keep = lengths > 0
            if not keep.any():
                return TypeMap.empty()
            starts, lengths = starts[keep], lengths[keep]
            disps = starts + int(self.disps[0])
            counts = lengths * int(self.counts[0])
            kinds = np.full(len(disps), int(self.kinds[0]), np.int32)
            lb = int(starts.min()) + self.lb
            ub = int((starts + lengths * self.extent).max()) + self.lb
            return TypeMap(disps, kinds, lb, ub, counts)
        block_of = np.repeat(np.arange(len(lengths)), lengths)
        first = np.cumsum(lengths) - lengths
        within = np.arange(int(lengths.sum()), dtype=_I64) - np.repeat(first, lengths)
        return self.replicate(starts[block_of] + within * self.extent)

    def resized(self, lb: int, extent: int) -> TypeMap:
        """Same data, bounds ``lb`` and ``lb + extent``."""
        return TypeMap(self.disps, self.kinds, lb, lb + extent, self.counts)

    @staticmethod
    def concat(parts: Sequence[TypeMap]) -> TypeMap:
        """The union of several maps (a struct's blocks), in order."""
        parts = [p for p in parts if len(p.disps)]
        if not parts:
            return TypeMap.empty()
        disps = np.concatenate([p.disps for p in parts])
        kinds = np.concatenate([p.kinds for p in parts])
        counts = np.concatenate([p.counts for p in parts])
        return TypeMap(disps, kinds, min(p.lb for p in parts), max(p.ub for p in parts), counts)

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
        if not len(data):  # nothing to store (the view may be an empty read-only one)
            return
        if self.contiguous:
            view[offset : offset + len(data)] = data
            return
        count = len(data) // self.size if self.size else 0
        raw = np.frombuffer(view, dtype=np.uint8)
        raw[self._indices(offset, count)] = np.frombuffer(data, dtype=np.uint8)[: count * self.size]


def _merge(disps: np.ndarray, kinds: np.ndarray,
           counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Drop empty runs and join each run to the previous one when it continues it."""
    keep = counts > 0
    if not keep.all():
        disps, kinds, counts = disps[keep], kinds[keep], counts[keep]
    if len(disps) < 2:
        return disps, kinds, counts
    ends = disps + counts * _itemsizes(kinds)
    joins = (kinds[1:] == kinds[:-1]) & (disps[1:] == ends[:-1])
    if not joins.any():
        return disps, kinds, counts
    heads = np.flatnonzero(np.concatenate(([True], ~joins)))
    return disps[heads], kinds[heads], np.add.reduceat(counts, heads)
