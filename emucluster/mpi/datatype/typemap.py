"""Type maps: where the basic elements of one datatype element lie, and gather/scatter by them.

A `TypeMap` is the MPI type map of one element, stored run-length: each run is ``count``
consecutive basic elements of one kind (an index into `BASIC_SIZES`, the predefined
datatypes' item sizes) starting at a byte displacement, in type-map order, with the lower and
upper bounds that give the extent. A contiguous type of 2^31 bytes is one run, not 2^31
entries.

Maps are immutable, and a constructor's map is lazy: its bounds, true bounds, size, element
count and basic kind are computed at once by arithmetic over the blocks (a vector of ``count``
blocks from its first and last block, a subarray from each dimension's first and last index:
never a list per element or per block), and its runs are made by the eager forms (the
``_now`` methods) when something first reads them (packing, a non-contiguous message), then
kept. Programs that build and inspect many types without moving data by them (mpi4py's
``dtlib`` makes tens of thousands of struct types) never pay for the runs.

The eager forms compose maps with numpy (one array operation per constructor, no Python loop
over elements) and merge runs that continue each other; a map of few runs (``_SMALL``) is
composed with Python lists instead, which is several times cheaper at that size (numpy's cost
per call dominates) and gives the same runs; `pack` gathers ``count`` elements
from a buffer into one contiguous bytes object and `unpack` scatters packed bytes back, each
with one fancy-indexing copy, or a plain slice when the map is contiguous.

Invariants: runs are never empty; two neighbouring runs of the same kind never continue each
other (they would have been merged); ``size`` is the sum of the runs' bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    Ints: TypeAlias = np.ndarray | Sequence[int]

__all__ = ["BASIC_SIZES", "TypeMap", "register_basic"]

BASIC_SIZES: list[int] = []
"""Item size of each basic kind (predefined datatype), by kind index."""
_I64 = np.int64


_SIZES = [np.zeros(0, _I64)]
"""`BASIC_SIZES` as an array (one element, replaced when a kind is registered)."""
_SMALL = 256
"""Maps of at most this many runs are built with Python lists, not numpy: numpy's fixed cost
per call (~1-3 us) dominates for the few runs most types have (mpi4py's dtlib builds
thousands of small struct types)."""


def register_basic(itemsize: int) -> int:
    """A new basic kind of ``itemsize`` bytes; returns its index."""
    BASIC_SIZES.append(itemsize)
    _SIZES[0] = np.asarray(BASIC_SIZES, dtype=_I64)
    return len(BASIC_SIZES) - 1


def _itemsizes(kinds: np.ndarray) -> np.ndarray:
    sizes: np.ndarray = _SIZES[0][kinds]
    return sizes


def _ints(values: Ints) -> list[int]:
    """``values`` as a list of Python ints."""
    if isinstance(values, np.ndarray):
        out: list[int] = values.tolist()
        return out
    return [int(v) for v in values]


class TypeMap:
    """The type map of one element (see the module docstring)."""

    __slots__ = (
        "_build", "_contiguous", "_counts", "_disps", "_index", "_kind", "_kinds", "elements",
        "lb", "size", "true_lb", "true_ub", "ub",
    )  # fmt: skip

    def __init__(self, disps: Ints, kinds: Ints,
                 lb: int, ub: int, counts: Ints | None = None) -> None:  # fmt: skip
        self.lb = lb
        self.ub = ub
        self._index: np.ndarray | None = None
        self._contiguous: bool | None = None
        self._build: Callable[[], TypeMap] | None = None
        if len(disps) <= _SMALL:
            self._init_small(disps, kinds, counts)
            return
        disps = np.asarray(disps, dtype=_I64)
        kinds = np.asarray(kinds, dtype=np.int32)
        counts = np.ones(len(disps), _I64) if counts is None else np.asarray(counts, _I64)
        self._disps, self._kinds, self._counts = _merge(disps, kinds, counts)
        run_bytes = self.run_bytes()
        self.size = int(run_bytes.sum())
        self.elements = int(self.counts.sum())
        if len(self.disps):
            self.true_lb = int(self.disps.min())
            self.true_ub = int((self.disps + run_bytes).max())
        else:
            self.true_lb = self.true_ub = 0
        first = int(self.kinds[0]) if len(self.kinds) else -1
        self._kind = first if first >= 0 and bool((self.kinds == first).all()) else None

    def _init_small(self, disps: Ints, kinds: Ints,
                    counts: Ints | None) -> None:  # fmt: skip
        """`_merge` and the sums with Python lists (the same results as the numpy path)."""
        d_in, k_in = _ints(disps), _ints(kinds)
        c_in = [1] * len(d_in) if counts is None else _ints(counts)
        sizes = BASIC_SIZES
        d_out: list[int] = []
        k_out: list[int] = []
        c_out: list[int] = []
        end = 0
        size = elements = 0
        true_lb = true_ub = 0
        for d, k, c in zip(d_in, k_in, c_in, strict=True):
            if c <= 0:
                continue
            nbytes = c * sizes[k]
            if d_out and k == k_out[-1] and d == end:
                c_out[-1] += c
            else:
                d_out.append(d)
                k_out.append(k)
                c_out.append(c)
                if len(d_out) == 1:
                    true_lb, true_ub = d, d + nbytes
            end = d + nbytes
            size += nbytes
            elements += c
            true_lb, true_ub = min(true_lb, d), max(true_ub, end)
        self._disps = np.array(d_out, dtype=_I64)
        self._kinds = np.array(k_out, dtype=np.int32)
        self._counts = np.array(c_out, dtype=_I64)
        self.size, self.elements, self.true_lb, self.true_ub = size, elements, true_lb, true_ub
        first = k_out[0] if k_out else None
        self._kind = first if first is not None and k_out.count(first) == len(k_out) else None

    @classmethod
    def basic(cls, kind: int) -> TypeMap:
        """The map of a predefined type."""
        return cls(np.zeros(1, _I64), np.full(1, kind), 0, BASIC_SIZES[kind])

    @classmethod
    def empty(cls) -> TypeMap:
        """The map with no data and zero extent (one shared object: maps never change)."""
        return _EMPTY[0]

    @classmethod
    def _lazy(cls, build: Callable[[], TypeMap], lb: int, ub: int, size: int, elements: int,
              true: tuple[int, int], kind: int | None) -> TypeMap:  # fmt: skip
        """A map whose runs ``build()`` makes when first read; the bounds, sizes and kind
        given here are what those runs have (they are computed without the runs)."""
        m = cls.__new__(cls)
        m.lb, m.ub, m.size, m.elements = lb, ub, size, elements
        m.true_lb, m.true_ub = true
        m._kind, m._build, m._index, m._contiguous = kind, build, None, None
        return m

    def _force(self) -> None:
        """Make the runs of a lazy map (once; the builder and what it holds are dropped)."""
        build = self._build
        if build is not None:
            full = build()
            self._disps, self._kinds, self._counts = full.disps, full.kinds, full.counts
            self._build = None

    def runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(displacements, kinds, counts) of the runs, made now if this map is lazy."""
        if self._build is not None:
            self._force()
        return self._disps, self._kinds, self._counts

    @property
    def disps(self) -> np.ndarray:
        """Byte displacement of each run."""
        return self.runs()[0]

    @property
    def kinds(self) -> np.ndarray:
        """Basic kind of each run (an index into `BASIC_SIZES`)."""
        return self.runs()[1]

    @property
    def counts(self) -> np.ndarray:
        """Basic elements in each run."""
        return self.runs()[2]

    @property
    def built(self) -> bool:
        """Whether the runs exist yet (a constructor's map makes them when first read)."""
        return self._build is None

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
        return self._kind

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
    # Each returns a lazy map: bounds, sizes and kind from this map's and the arguments' by
    # arithmetic over blocks (never over elements); the runs by the eager form below (the
    # ``_now`` methods) when something reads them.

    def _copies(self, n: int, lo: int, hi: int,
                build: Callable[[], TypeMap]) -> TypeMap:  # fmt: skip
        """The lazy map of ``n`` copies of this map at offsets from ``lo`` to ``hi``."""
        if n <= 0:
            return TypeMap.empty()
        if self.elements:
            true = (lo + self.true_lb, hi + self.true_ub)
            return TypeMap._lazy(build, lo + self.lb, hi + self.ub, n * self.size,
                                 n * self.elements, true, self._kind)  # fmt: skip
        return TypeMap._lazy(build, lo + self.lb, hi + self.ub, 0, 0, (0, 0), None)

    def replicate(self, offsets: Ints) -> TypeMap:
        """Copies of this map at byte ``offsets`` (bounds from the copies' bounds)."""
        offs: Ints
        if isinstance(offsets, np.ndarray):
            array = offsets.astype(_I64)  # a copy: the caller may reuse its array
            lo, hi = (int(array.min()), int(array.max())) if len(array) else (0, 0)
            offs = array
        else:
            offs = _ints(offsets)
            lo, hi = (min(offs), max(offs)) if offs else (0, 0)
        return self._copies(len(offs), lo, hi, lambda: self._replicate_now(offs))

    def blocks(self, blocklengths: Sequence[int], displacements: Sequence[int]) -> TypeMap:
        """Blocks of ``blocklengths[i]`` elements at byte ``displacements[i]``."""
        extent = self.extent
        if len(blocklengths) <= _SMALL:
            lengths, starts = _ints(blocklengths), _ints(displacements)
            n = lo = hi = 0
            for s, k in zip(starts, lengths, strict=True):
                if k > 0:
                    last = s + (k - 1) * extent
                    a, b = (s, last) if last >= s else (last, s)
                    lo, hi = (min(lo, a), max(hi, b)) if n else (a, b)
                    n += k
        else:
            arr_len = np.asarray(blocklengths, dtype=_I64)
            arr_start = np.asarray(displacements, dtype=_I64)
            keep = arr_len > 0
            arr_len, arr_start = arr_len[keep], arr_start[keep]
            n, lo, hi = int(arr_len.sum()), 0, 0
            if n:
                ends = arr_start + (arr_len - 1) * extent
                lo = int(np.minimum(arr_start, ends).min())
                hi = int(np.maximum(arr_start, ends).max())
            lengths, starts = arr_len.tolist(), arr_start.tolist()
        return self._copies(n, lo, hi, lambda: self._blocks_now(lengths, starts))

    def block(self, length: int, start: int) -> TypeMap:
        """One block of ``length`` elements at byte ``start`` (``blocks([length], [start])``,
        a struct's member)."""
        if length <= 0:
            return TypeMap.empty()
        last = start + (length - 1) * self.extent
        lo, hi = (start, last) if last >= start else (last, start)
        return self._copies(length, lo, hi, lambda: self._blocks_now([length], [start]))

    def strided(self, count: int, blocklength: int, stride: int) -> TypeMap:
        """``count`` blocks of ``blocklength`` elements, ``stride`` bytes apart (a vector):
        bounds from the first and last block, no list of ``count`` blocks."""
        n = count * blocklength if count > 0 and blocklength > 0 else 0
        last_block, last_in = (count - 1) * stride, (blocklength - 1) * self.extent
        lo, hi = min(0, last_block) + min(0, last_in), max(0, last_block) + max(0, last_in)

        def build() -> TypeMap:
            starts = (np.arange(count, dtype=_I64) * stride).tolist()
            return self._blocks_now([blocklength] * count, starts)

        return self._copies(n, lo, hi, build)

    def resized(self, lb: int, extent: int) -> TypeMap:
        """Same data, bounds ``lb`` and ``lb + extent``."""
        true = (self.true_lb, self.true_ub)
        return TypeMap._lazy(lambda: self, lb, lb + extent, self.size, self.elements, true,
                             self._kind)  # fmt: skip

    @staticmethod
    def concat(parts: Sequence[TypeMap]) -> TypeMap:
        """The union of several maps (a struct's blocks), in order."""
        parts = [p for p in parts if p.elements]
        if not parts:
            return TypeMap.empty()
        kind = parts[0]._kind
        if kind is not None and any(p._kind != kind for p in parts):
            kind = None
        true = (min(p.true_lb for p in parts), max(p.true_ub for p in parts))
        return TypeMap._lazy(lambda: TypeMap._concat_now(parts), min(p.lb for p in parts),
                             max(p.ub for p in parts), sum(p.size for p in parts),
                             sum(p.elements for p in parts), true, kind)  # fmt: skip

    @staticmethod
    def members(lengths: list[int], starts: list[int], maps: list[TypeMap],
                align: int) -> TypeMap:  # fmt: skip
        """A struct: ``lengths[i]`` elements of ``maps[i]`` at byte ``starts[i]`` (the `concat`
        of their `block`s), the extent rounded up to a multiple of ``align``; one pass, one
        lazy map (a program may make many small structs)."""
        parts: list[tuple[int, int, TypeMap]] = []
        lb = ub = true_lb = true_ub = size = elements = 0
        kind: int | None = None
        for length, start, m in zip(lengths, starts, maps, strict=True):
            if length <= 0 or not m.elements:
                continue  # no data: no part of the bounds (as `concat` drops it)
            last = start + (length - 1) * m.extent
            lo, hi = (start, last) if last >= start else (last, start)
            if parts:
                lb, ub = min(lb, lo + m.lb), max(ub, hi + m.ub)
                true_lb, true_ub = min(true_lb, lo + m.true_lb), max(true_ub, hi + m.true_ub)
                kind = kind if m._kind == kind else None
            else:
                lb, ub, true_lb, true_ub = lo + m.lb, hi + m.ub, lo + m.true_lb, hi + m.true_ub
                kind = m._kind
            parts.append((length, start, m))
            size += length * m.size
            elements += length * m.elements
        if not parts:
            return TypeMap.empty()
        if align > 1 and (ub - lb) % align:
            ub += align - (ub - lb) % align

        def build() -> TypeMap:
            return TypeMap._concat_now([m._blocks_now([n], [d]) for n, d, m in parts])

        return TypeMap._lazy(build, lb, ub, size, elements, (true_lb, true_ub), kind)

    # -- the eager forms (the runs) --------------------------------------------------------------

    def _replicate_now(self, offsets: Ints) -> TypeMap:
        if len(offsets) * len(self.disps) <= _SMALL:
            offs = _ints(offsets)
            if not offs:
                return TypeMap.empty()
            disps = self.disps.tolist()
            return TypeMap([o + d for o in offs for d in disps], self.kinds.tolist() * len(offs),
                           min(offs) + self.lb, max(offs) + self.ub,
                           self.counts.tolist() * len(offs))  # fmt: skip
        offsets = np.asarray(offsets, dtype=_I64)
        if not len(offsets):
            return TypeMap.empty()
        lb, ub = int(offsets.min()) + self.lb, int(offsets.max()) + self.ub
        disps = (offsets[:, None] + self.disps[None, :]).ravel()
        kinds = np.tile(self.kinds, len(offsets))
        counts = np.tile(self.counts, len(offsets))
        return TypeMap(disps, kinds, lb, ub, counts)

    def _blocks_now(self, blocklengths: Sequence[int], displacements: Sequence[int]) -> TypeMap:
        if len(blocklengths) <= _SMALL:
            small = self._blocks_small(_ints(blocklengths), _ints(displacements))
            if small is not None:
                return small
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
        return self._replicate_now(starts[block_of] + within * self.extent)

    def _blocks_small(self, lengths: list[int], starts: list[int]) -> TypeMap | None:
        """`_blocks_now` with Python lists; None when the result would be large (numpy then)."""
        extent = self.extent
        if self.dense and extent > 0 and lengths:
            pairs = [(s, n) for s, n in zip(starts, lengths, strict=True) if n > 0]
            if not pairs:
                return TypeMap.empty()
            d0, k0, c0 = int(self.disps[0]), int(self.kinds[0]), int(self.counts[0])
            lb = min(s for s, _ in pairs) + self.lb
            ub = max(s + n * extent for s, n in pairs) + self.lb
            return TypeMap([s + d0 for s, _ in pairs], [k0] * len(pairs), lb, ub,
                           [n * c0 for _, n in pairs])  # fmt: skip
        if sum(lengths) * len(self.disps) > _SMALL:
            return None
        offsets = [s + j * extent for s, n in zip(starts, lengths, strict=True) for j in range(n)]
        return self._replicate_now(offsets)

    @staticmethod
    def _concat_now(parts: Sequence[TypeMap]) -> TypeMap:
        lb, ub = min(p.lb for p in parts), max(p.ub for p in parts)
        if sum(len(p.disps) for p in parts) <= _SMALL:
            return TypeMap([d for p in parts for d in p.disps.tolist()],
                           [k for p in parts for k in p.kinds.tolist()], lb, ub,
                           [c for p in parts for c in p.counts.tolist()])  # fmt: skip
        disps = np.concatenate([p.disps for p in parts])
        kinds = np.concatenate([p.kinds for p in parts])
        counts = np.concatenate([p.counts for p in parts])
        return TypeMap(disps, kinds, lb, ub, counts)

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


_EMPTY = [TypeMap(np.zeros(0, _I64), np.zeros(0, np.int32), 0, 0)]
"""`TypeMap.empty`'s one object."""


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
