"""Virtual-address translation for remote memory (GRIM 4.5.2, Fig 4.13): address maps and
the NIC's two-region translation cache.

A :class:`Translation` says that the ``size`` bytes at virtual address ``vaddr`` of an
endpoint live at ``offset`` of its registered segment ``region`` (our "physical" address:
segment, offset). The host library keeps every translation of its endpoint in an unbounded
:class:`AddressMap` (the "kernel" side). The NIC keeps a :class:`TranslationCache`: a static
region the library programs when it allocates a block (bounded, first come first served) and a
dynamic region filled on misses by asking the host (bounded, least recently used goes).

Invariants: a lookup answers only with a translation that contains the whole asked range
``[vaddr, vaddr + length)``, so nothing ever writes outside a block; entries never overlap
within one map (installing an overlapping one replaces the old ones); every lookup counts as
exactly one hit or one miss.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["AddressMap", "Translation", "TranslationCache"]


@dataclass(slots=True, frozen=True)
class Translation:
    """``size`` bytes at virtual ``vaddr`` live at ``offset`` of registered segment ``region``."""

    vaddr: int
    size: int
    region: int
    offset: int

    def covers(self, vaddr: int, length: int) -> bool:
        """True if ``[vaddr, vaddr + length)`` lies inside this block."""
        return self.vaddr <= vaddr and vaddr + length <= self.vaddr + self.size and length >= 0


class AddressMap:
    """Non-overlapping translations sorted by virtual address (optionally bounded)."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity
        self._bases: list[int] = []
        self._entries: dict[int, Translation] = {}

    def __len__(self) -> int:
        return len(self._bases)

    @property
    def full(self) -> bool:
        """No room for another entry."""
        return self.capacity is not None and len(self._bases) >= self.capacity

    def add(self, t: Translation) -> bool:
        """Install ``t`` (replacing entries it overlaps); False if the map is full."""
        for old in self._overlapping(t):
            self.remove(old.vaddr)
        if self.full:
            return False
        bisect.insort(self._bases, t.vaddr)
        self._entries[t.vaddr] = t
        return True

    def remove(self, vaddr: int) -> Translation | None:
        """Forget the entry starting at ``vaddr``."""
        t = self._entries.pop(vaddr, None)
        if t is not None:
            self._bases.pop(bisect.bisect_left(self._bases, vaddr))
        return t

    def find(self, vaddr: int, length: int = 1) -> Translation | None:
        """The entry containing all of ``[vaddr, vaddr + length)``, if any."""
        i = bisect.bisect_right(self._bases, vaddr) - 1
        if i < 0:
            return None
        t = self._entries[self._bases[i]]
        return t if t.covers(vaddr, max(length, 1)) else None

    def entries(self) -> list[Translation]:
        """Every entry, by address."""
        return [self._entries[b] for b in self._bases]

    def _overlapping(self, t: Translation) -> list[Translation]:
        end = t.vaddr + t.size
        i = max(0, bisect.bisect_right(self._bases, t.vaddr) - 1)
        out = []
        while i < len(self._bases) and self._bases[i] < end:
            e = self._entries[self._bases[i]]
            if e.vaddr + e.size > t.vaddr:
                out.append(e)
            i += 1
        return out


class TranslationCache:
    """The NIC's translation cache: ``static_entries`` programmed by the library,
    ``dynamic_entries`` filled on misses (LRU)."""

    def __init__(self, *, static_entries: int, dynamic_entries: int) -> None:
        self.static = AddressMap(static_entries)
        self._dynamic: OrderedDict[int, Translation] = OrderedDict()
        self.dynamic_capacity = dynamic_entries
        self.hits_static = 0
        self.hits_dynamic = 0
        self.misses = 0
        self.fills = 0
        self.evictions = 0
        self.static_full = 0
        """Static programming requests refused because the region was full."""

    def program(self, t: Translation) -> bool:
        """The library programs a static entry; False (counted) when the region is full."""
        self._dynamic.pop(t.vaddr, None)
        if self.static.add(t):
            return True
        self.static_full += 1
        return False

    def fill(self, t: Translation) -> None:
        """Install a translation the host supplied after a miss (evicting the LRU entry)."""
        for base in [b for b, e in self._dynamic.items() if _overlap(e, t)]:
            del self._dynamic[base]
        if self.dynamic_capacity <= 0:
            return
        while len(self._dynamic) >= self.dynamic_capacity:
            self._dynamic.popitem(last=False)
            self.evictions += 1
        self._dynamic[t.vaddr] = t
        self.fills += 1

    def invalidate(self, vaddr: int) -> None:
        """The block at ``vaddr`` was freed: forget it in both regions."""
        self.static.remove(vaddr)
        self._dynamic.pop(vaddr, None)

    def lookup(self, vaddr: int, length: int) -> Translation | None:
        """Translate ``[vaddr, vaddr + length)``; counts one hit or one miss."""
        t = self.static.find(vaddr, length)
        if t is not None:
            self.hits_static += 1
            return t
        for base, e in self._dynamic.items():
            if e.covers(vaddr, max(length, 1)):
                self._dynamic.move_to_end(base)
                self.hits_dynamic += 1
                return e
        self.misses += 1
        return None

    def stats(self) -> dict[str, int]:
        """Counters and occupancy, JSON-able."""
        return {
            "hits": self.hits_static + self.hits_dynamic,
            "hits_static": self.hits_static,
            "hits_dynamic": self.hits_dynamic,
            "misses": self.misses,
            "fills": self.fills,
            "evictions": self.evictions,
            "static_entries": len(self.static),
            "dynamic_entries": len(self._dynamic),
            "static_full": self.static_full,
        }


def _overlap(a: Translation, b: Translation) -> bool:
    return a.vaddr < b.vaddr + b.size and b.vaddr < a.vaddr + a.size
