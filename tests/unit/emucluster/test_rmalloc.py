"""Registered-memory block allocation."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emucluster.grim.rmalloc import ALIGN, VADDR_BASE, Allocator, Placement


def test_first_block_makes_a_segment_later_ones_share_it() -> None:
    a = Allocator(segment_bytes=4096)
    p1, plan = a.place(100)
    assert plan is not None
    assert plan.size == 4096
    assert plan.vaddr == VADDR_BASE
    assert p1 == Placement(plan.key, 0, 100, VADDR_BASE)
    p2, plan2 = a.place(10)
    assert plan2 is None
    assert p2.offset == 128
    assert p2.vaddr == VADDR_BASE + 128


def test_large_blocks_get_their_own_segment_and_empty_segments_go() -> None:
    a = Allocator(segment_bytes=4096)
    big, plan = a.place(10000)
    assert plan is not None
    assert plan.size == 10048
    _small, plan2 = a.place(8)
    assert plan2 is not None
    assert plan2.vaddr > big.vaddr + big.size
    assert a.release(big) == big.segment
    assert a.segments() == 1


def test_double_free_and_bad_sizes_raise() -> None:
    a = Allocator(segment_bytes=4096)
    p, _ = a.place(64)
    q, _ = a.place(64)
    a.release(p)
    with pytest.raises(ValueError, match="already free"):
        a.release(p)
    with pytest.raises(ValueError, match="cannot allocate"):
        a.place(0)
    assert a.release(q) is not None
    with pytest.raises(ValueError, match="not allocated"):
        a.release(q)


@settings(max_examples=60)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 3000)), max_size=60))
def test_blocks_never_overlap_and_space_coalesces(ops: list[tuple[bool, int]]) -> None:
    a = Allocator(segment_bytes=8192)
    live: list[Placement] = []
    for alloc, n in ops:
        if alloc or not live:
            p, _ = a.place(n)
            live.append(p)
        else:
            a.release(live.pop(n % len(live)))
        spans = sorted((p.vaddr, p.vaddr + -(-p.size // ALIGN) * ALIGN) for p in live)
        assert all(x[1] <= y[0] for x, y in itertools.pairwise(spans))
        assert all(p.vaddr % ALIGN == 0 for p in live)
    for p in live:
        a.release(p)
    assert a.segments() == 0
