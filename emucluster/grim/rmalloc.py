"""Registered-memory allocation (GRIM 4.5.1): blocks carved out of large registered segments,
each block with a virtual address in the endpoint's 32-bit remote-memory address space.

GRIM's pinned-memory unit hands out large physically contiguous regions (4 MB); blocks live
inside them. Here a segment is one registered shared-memory region (its id is the "physical"
segment of RM-P); :class:`Allocator` decides where blocks go and which segments to create,
and the shell creates them. Pure: no I/O.

Invariants: blocks never overlap, inside a segment or in the virtual address space; a
block's virtual range is ``segment base + offset``, so translation is a subtraction; freed
space coalesces with free neighbours; virtual addresses of freed segments are never reused.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

__all__ = ["ALIGN", "SEGMENT_BYTES", "VADDR_BASE", "Allocator", "Placement", "SegmentPlan"]

ALIGN = 64  # bytes: blocks start on cache-line boundaries
SEGMENT_BYTES = 1 << 20  # registered segment size (larger blocks get a segment of their own)
VADDR_BASE = 0x1000_0000  # first virtual address handed out
_VADDR_LIMIT = 1 << 32  # addresses travel in 32-bit words


@dataclass(slots=True, frozen=True)
class SegmentPlan:
    """A segment the shell must create and register."""

    key: int
    """The allocator's name for it (the shell maps it to the registered region id)."""
    size: int
    vaddr: int


@dataclass(slots=True, frozen=True)
class Placement:
    """Where a block went."""

    segment: int
    offset: int
    size: int
    vaddr: int


@dataclass(slots=True)
class _Segment:
    key: int
    size: int
    vaddr: int
    free: list[tuple[int, int]] = field(default_factory=list)  # sorted (offset, length)
    used: int = 0


class Allocator:
    """First-fit allocation of blocks in segments."""

    def __init__(self, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.segment_bytes = segment_bytes
        self._segments: dict[int, _Segment] = {}
        self._next_key = 1
        self._next_vaddr = VADDR_BASE

    def place(self, nbytes: int) -> tuple[Placement, SegmentPlan | None]:
        """Find room for ``nbytes`` (>= 1); return the placement and, if a new segment is
        needed, its plan. Raise MemoryError when the address space is exhausted."""
        if nbytes < 1:
            raise ValueError(f"cannot allocate {nbytes} bytes")
        size = -(-nbytes // ALIGN) * ALIGN
        for seg in self._segments.values():
            offset = _take(seg, size)
            if offset is not None:
                return Placement(seg.key, offset, nbytes, seg.vaddr + offset), None
        seg_size = max(self.segment_bytes, size)
        if self._next_vaddr + seg_size > _VADDR_LIMIT:
            raise MemoryError("the 32-bit remote-memory address space is exhausted")
        seg = _Segment(self._next_key, seg_size, self._next_vaddr, [(0, seg_size)])
        self._next_key += 1
        self._next_vaddr += -(-seg_size // SEGMENT_BYTES) * SEGMENT_BYTES
        self._segments[seg.key] = seg
        offset = _take(seg, size)
        assert offset == 0
        plan = SegmentPlan(seg.key, seg.size, seg.vaddr)
        return Placement(seg.key, 0, nbytes, seg.vaddr), plan

    def release(self, p: Placement) -> int | None:
        """Free a block; return its segment's key if the segment is now empty (the shell
        may deregister it: it is forgotten here)."""
        seg = self._segments.get(p.segment)
        if seg is None:
            raise ValueError(f"block at {p.vaddr:#x} is not allocated")
        size = -(-p.size // ALIGN) * ALIGN
        free = seg.free
        i = bisect.bisect_left(free, (p.offset, 0))
        if (i < len(free) and free[i][0] < p.offset + size) or (
            i > 0 and free[i - 1][0] + free[i - 1][1] > p.offset
        ):
            raise ValueError(f"block at {p.vaddr:#x} is already free")
        start, length = p.offset, size
        if i < len(free) and free[i][0] == start + length:
            length += free.pop(i)[1]
        if i > 0 and free[i - 1][0] + free[i - 1][1] == start:
            prev = free.pop(i - 1)
            start, length, i = prev[0], prev[1] + length, i - 1
        free.insert(i, (start, length))
        seg.used -= size
        if seg.used == 0:
            del self._segments[seg.key]
            return seg.key
        return None

    def segments(self) -> int:
        """Segments in use."""
        return len(self._segments)


def _take(seg: _Segment, size: int) -> int | None:
    for i, (offset, length) in enumerate(seg.free):
        if length >= size:
            if length == size:
                seg.free.pop(i)
            else:
                seg.free[i] = (offset + size, length - size)
            seg.used += size
            return offset
    return None
