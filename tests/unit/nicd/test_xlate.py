"""Address maps and the two-region translation cache."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nicd.grim.xlate import AddressMap, Translation, TranslationCache


def t(vaddr: int, size: int, region: int = 1, offset: int = 0) -> Translation:
    return Translation(vaddr, size, region, offset)


def test_find_needs_the_whole_range_inside_one_block() -> None:
    m = AddressMap()
    m.add(t(1000, 100))
    m.add(t(1200, 50))
    assert m.find(1000, 100) == t(1000, 100)
    assert m.find(1099, 1) == t(1000, 100)
    assert m.find(1099, 2) is None  # runs past the end
    assert m.find(1100, 1) is None  # the gap
    assert m.find(999, 1) is None
    assert m.find(1249, 1) == t(1200, 50)


def test_overlapping_entries_are_replaced_and_capacity_is_enforced() -> None:
    m = AddressMap(capacity=2)
    assert m.add(t(0, 100))
    assert m.add(t(200, 100))
    assert not m.add(t(400, 10))  # full
    assert m.add(t(50, 200))  # replaces both overlapped ones
    assert m.entries() == [t(50, 200)]
    assert m.remove(50) == t(50, 200)
    assert m.remove(50) is None


def test_cache_static_then_dynamic_lru_with_counters() -> None:
    c = TranslationCache(static_entries=1, dynamic_entries=2)
    assert c.program(t(0, 10))
    assert not c.program(t(100, 10))  # static region full: counted
    assert c.lookup(5, 1) == t(0, 10)
    assert c.lookup(100, 1) is None
    c.fill(t(100, 10))
    c.fill(t(200, 10))
    assert c.lookup(105, 2) == t(100, 10)  # 100 is now most recent
    c.fill(t(300, 10))  # evicts 200
    assert c.lookup(200, 1) is None
    assert c.lookup(300, 1) == t(300, 10)
    c.invalidate(0)
    c.invalidate(300)
    assert c.lookup(0, 1) is None
    assert c.lookup(300, 1) is None
    s = c.stats()
    assert s == {
        "hits": 3,
        "hits_static": 1,
        "hits_dynamic": 2,
        "misses": 4,
        "fills": 3,
        "evictions": 1,
        "static_entries": 0,
        "dynamic_entries": 1,
        "static_full": 1,
    }


def test_zero_dynamic_entries_never_caches() -> None:
    c = TranslationCache(static_entries=0, dynamic_entries=0)
    c.fill(t(0, 10))
    assert c.lookup(0, 1) is None


@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(1, 20)), max_size=30),
    st.integers(0, 80),
    st.integers(1, 30),
)
def test_find_agrees_with_a_brute_force_model(
    adds: list[tuple[int, int]], vaddr: int, length: int
) -> None:
    m = AddressMap()
    model: list[Translation] = []
    for start, size in adds:
        new = t(start * 10, size * 10)
        model = [
            e
            for e in model
            if not (e.vaddr < new.vaddr + new.size and new.vaddr < e.vaddr + e.size)
        ]
        model.append(new)
        m.add(new)
    expect = [e for e in model if e.covers(vaddr, length)]
    assert m.find(vaddr, length) == (expect[0] if expect else None)
    assert sorted(m.entries(), key=lambda e: e.vaddr) == sorted(model, key=lambda e: e.vaddr)
