"""Envelope stores: every store finds what a plain reference list finds, at the same depth."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emucluster.p2p.envelope import (
    ANY_SOURCE,
    ANY_TAG,
    MAX_RANK,
    MAX_TAG,
    STORE_KINDS,
    Envelope,
    EnvelopeStore,
    GroupedLhsStore,
    LhsStore,
    ListStore,
    check_fields,
    fits,
    make_store,
)

SETTINGS = settings(max_examples=60, deadline=None)


class Item:
    """An opaque item compared by identity, as stores compare them."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Item({self.n})"


class Reference:
    """The specification: a list of (envelope, item) in arrival order, scanned linearly."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.entries: list[tuple[Envelope, Item]] = []

    def find(self, context: int, source: int, tag: int) -> tuple[Item | None, int]:
        query = Envelope(context, source, tag)
        same = [e for e in self.entries if e[0].context == context]
        if self.kind != "lhs-grouped" or source == ANY_SOURCE:
            return _first(same, query)
        own = [e for e in same if e[0].source == source]
        wild = [e for e in same if e[0].source == ANY_SOURCE]
        hit, depth = _first(own, query)
        if wild:
            other, more = _first(wild, query)
            depth += more
            if other is not None and (hit is None or self.order(other) < self.order(hit)):
                hit = other
        return hit, depth

    def order(self, item: Item) -> int:
        return next(i for i, e in enumerate(self.entries) if e[1] is item)

    def remove(self, item: Item) -> None:
        del self.entries[self.order(item)]


def _first(entries: list[tuple[Envelope, Item]], query: Envelope) -> tuple[Item | None, int]:
    for depth, (envelope, item) in enumerate(entries, 1):
        if fits(envelope, query):
            return item, depth
    return None, len(entries)


# -- fields --------------------------------------------------------------------------------------


def test_fits_truth_table() -> None:
    message = Envelope(3, 1, 7)
    assert fits(message, Envelope(3, 1, 7))
    assert fits(message, Envelope(3, ANY_SOURCE, 7))
    assert fits(message, Envelope(3, 1, ANY_TAG))
    assert fits(Envelope(3, ANY_SOURCE, ANY_TAG), message)
    assert not fits(message, Envelope(4, ANY_SOURCE, ANY_TAG))
    assert not fits(message, Envelope(3, 2, ANY_TAG))
    assert not fits(message, Envelope(3, ANY_SOURCE, 8))


@pytest.mark.parametrize("fields", [(0, 0, 0), (9, MAX_RANK, MAX_TAG), (-4, 5, 6)])
def test_check_fields_accepts_the_range(fields: tuple[int, int, int]) -> None:
    check_fields(*fields, wildcards=False)
    check_fields(*fields, wildcards=True)


@pytest.mark.parametrize(
    ("fields", "wildcards"),
    [
        ((0, MAX_RANK + 1, 0), True),
        ((0, 0, MAX_TAG + 1), True),
        ((0, -2, 0), True),
        ((0, 0, -2), True),
        ((0, ANY_SOURCE, 0), False),
        ((0, 0, ANY_TAG), False),
        (("0", 0, 0), True),
    ],
)
def test_check_fields_rejects(fields: tuple[int, int, int], wildcards: bool) -> None:
    with pytest.raises(ValueError, match=r"source|tag|context"):
        check_fields(*fields, wildcards=wildcards)


def test_make_store_kinds() -> None:
    assert isinstance(make_store("list"), ListStore)
    assert isinstance(make_store("lhs"), LhsStore)
    assert isinstance(make_store("lhs-grouped"), GroupedLhsStore)
    with pytest.raises(ValueError, match="unknown envelope store"):
        make_store("hash")


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_store_is_true_exactly_while_an_entry_is_live(kind: str) -> None:
    """Truth follows ``len`` (compiled, a truth test calls ``__bool__``, never ``__len__``)."""
    store: EnvelopeStore[Item] = make_store(kind)
    assert not store
    slot = store.append(Envelope(0, 1, 2), Item(0))
    assert store
    assert len(store) == 1
    store.remove(slot)
    assert not store
    assert len(store) == 0


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_extreme_values_pack_apart(kind: str) -> None:
    """Largest, smallest and wildcard values never alias in the packed entries."""
    store: EnvelopeStore[Item] = make_store(kind)
    values = [(0, 0), (MAX_RANK, MAX_TAG), (MAX_RANK, 0), (0, MAX_TAG), (1, 1), (127, 128)]
    items = {v: Item(i) for i, v in enumerate(values)}
    for (source, tag), item in items.items():
        store.append(Envelope(0, source, tag), item)
    for (source, tag), item in items.items():
        slot, _ = store.find(0, source, tag)
        assert slot is not None
        assert slot.item is item
    assert store.find(0, MAX_RANK - 1, MAX_TAG)[0] is None
    assert store.find(0, 2, ANY_TAG)[0] is None
    assert store.find(0, ANY_SOURCE, MAX_TAG - 1)[0] is None


# -- every store against the reference ------------------------------------------------------------

contexts = st.integers(0, 2)
sources = st.integers(0, 3)
tags = st.integers(0, 3)
wild_sources = st.one_of(st.just(ANY_SOURCE), sources)
wild_tags = st.one_of(st.just(ANY_TAG), tags)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), contexts, wild_sources, wild_tags),
        st.tuples(st.just("find"), contexts, wild_sources, wild_tags),
        st.tuples(st.just("take"), contexts, wild_sources, wild_tags),
        st.tuples(st.just("drop"), st.integers(0, 1000), st.just(0), st.just(0)),
    ),
    max_size=120,
)


def run_against_reference(
    kind: str, compact_min: int, ops: list[tuple[str, int, int, int]]
) -> None:
    store: EnvelopeStore[Item] = make_store(kind, compact_min=compact_min)
    reference = Reference(kind)
    for n, (op, a, b, c) in enumerate(ops):
        if op == "append":
            item = Item(n)
            assert store.append(Envelope(a, b, c), item).item is item
            reference.entries.append((Envelope(a, b, c), item))
        elif op in ("find", "take"):
            found, depth = store.find(a, b, c)
            expected, expected_depth = reference.find(a, b, c)
            assert (None if found is None else found.item) is expected, (op, a, b, c)
            assert depth == expected_depth, (op, a, b, c)
            if op == "take" and found is not None:
                store.remove(found)
                reference.remove(found.item)
        elif reference.entries:  # drop: remove any live entry, found by its item
            item = reference.entries[a % len(reference.entries)][1]
            slot = store.find_item(item)
            assert slot is not None
            assert slot.item is item
            store.remove(slot)
            reference.remove(item)
        assert len(store) == len(reference.entries)
        assert [s.item for s in store] == [e[1] for e in reference.entries]
    assert store.find_item(Item(-1)) is None


@pytest.mark.parametrize("compact_min", [1, 3, 32])
@pytest.mark.parametrize("kind", STORE_KINDS)
@SETTINGS
@given(ops=operations)
def test_store_matches_reference(
    kind: str, compact_min: int, ops: list[tuple[str, int, int, int]]
) -> None:
    run_against_reference(kind, compact_min, ops)


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_long_random_history_matches_reference(kind: str) -> None:
    """Thousands of operations with out-of-order removals: compaction and cutting both run."""
    rng = random.Random(4)
    ops: list[tuple[str, int, int, int]] = []
    for _ in range(3000):
        roll = rng.random()
        op = "append" if roll < 0.45 else "take" if roll < 0.8 else "drop" if roll < 0.9 else "find"
        source = ANY_SOURCE if op != "append" and rng.random() < 0.2 else rng.randrange(6)
        tag = ANY_TAG if rng.random() < 0.1 else rng.randrange(5)
        ops.append((op, rng.randrange(2), source, tag))
    run_against_reference(kind, 8, ops)


@pytest.mark.parametrize("kind", ["lhs", "lhs-grouped"])
def test_garbage_stays_bounded_behind_a_stuck_head(kind: str) -> None:
    """An entry nobody takes sits at the head while traffic flows behind it."""
    store: EnvelopeStore[Item] = make_store(kind, compact_min=16)
    assert isinstance(store, LhsStore | GroupedLhsStore)
    stuck = Item(-1)
    store.append(Envelope(0, 9, 9), stuck)
    for n in range(4998):
        store.append(Envelope(0, n % 4, 1), Item(n))
        if n % 3 == 2:  # take three at a time, oldest first
            for _ in range(3):
                slot, _ = store.find(0, ANY_SOURCE, 1)
                assert slot is not None
                store.remove(slot)
    assert len(store) == 1
    assert store.footprint() <= 2 * 16
    slot, depth = store.find(0, 9, 9)
    assert slot is not None
    assert slot.item is stuck
    assert depth == 1


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_depth_counts_live_entries_only(kind: str) -> None:
    store: EnvelopeStore[Item] = make_store(kind, compact_min=1000)
    slots = [store.append(Envelope(0, 0, tag), Item(tag)) for tag in range(10)]
    for slot in slots[1:9:2]:  # tombstones between live entries
        store.remove(slot)
    found, depth = store.find(0, 0, 9)
    assert found is slots[9] or (found is not None and found.item is slots[9].item)
    assert depth == 6  # tags 0, 2, 4, 6, 8, 9
    assert store.find(0, 0, 1) == (None, 6)
    assert store.find(1, 0, 1) == (None, 0)


def test_grouped_depth_scans_only_the_named_source() -> None:
    store: GroupedLhsStore[Item] = GroupedLhsStore()
    for n in range(64):
        store.append(Envelope(0, n % 8, 0), Item(n))
    slot, depth = store.find(0, 7, 0)
    assert slot is not None
    assert slot.item.n == 7
    assert depth == 1
    _, depth = store.find(0, 7, 1)
    assert depth == 8
    _, depth = store.find(0, ANY_SOURCE, 1)
    assert depth == 64


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_deep_queue_is_searched_past_every_slice(kind: str) -> None:
    """Deeper than one bytes.find slice (3,584 entries): hits on both sides of each boundary."""
    store: EnvelopeStore[Item] = make_store(kind)
    depth = 3 * 3584 + 5
    special = [3583, 3584, 7167, 7168, depth - 1]  # positions that hold wanted messages
    for n in range(depth):
        envelope = Envelope(0, 5, n) if n in special else Envelope(0, n % 3, 0)
        store.append(envelope, Item(n))
    for n in special:
        slot, examined = store.find(0, 5, n)
        assert slot is not None
        assert slot.item.n == n
        assert examined == (special.index(n) + 1 if kind == "lhs-grouped" else n + 1)
        assert store.find(0, ANY_SOURCE, n)[0] is slot
    assert store.find(0, 5, 1) == (None, 5 if kind == "lhs-grouped" else depth)
    assert store.find(0, 4, ANY_TAG) == (None, 0 if kind == "lhs-grouped" else depth)
