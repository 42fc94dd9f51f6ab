"""Matcher: MPI matching order on every store, checked against a tiny list-based matcher."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emucluster.p2p.envelope import fits
from emucluster.p2p.matching import ANY_SOURCE, ANY_TAG, STORE_KINDS, Envelope, Matcher, MatchStats

SETTINGS = settings(max_examples=80, deadline=None)


class Handle:
    """A receive handle or message, compared by identity as the matcher compares them."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Handle({self.n})"


class ReferenceMatcher:
    """The specification: two lists scanned front to back, with each store's depth rule."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.posted: list[tuple[Envelope, Handle]] = []
        self.unexpected: list[tuple[Envelope, Handle]] = []
        self.depths: dict[str, list[int]] = {"posted": [], "unexpected": []}
        self.arrivals = self.unexpected_arrivals = self.probes = self.cancelled = 0
        self.posted_max = self.unexpected_max = 0

    def search(self, queue: list[tuple[Envelope, Handle]], query: Envelope) -> tuple[int, int]:
        """Index of the earliest entry that fits (or -1), and the depth the store reports."""
        same = [i for i, (e, _) in enumerate(queue) if e.context == query.context]
        if self.kind != "lhs-grouped" or query.source == ANY_SOURCE:
            return _first(queue, same, query)
        own = [i for i in same if queue[i][0].source == query.source]
        wild = [i for i in same if queue[i][0].source == ANY_SOURCE]
        hit, depth = _first(queue, own, query)
        if wild:
            other, more = _first(queue, wild, query)
            depth += more
            if other >= 0 and (hit < 0 or other < hit):
                hit = other
        return hit, depth

    def post_receive(self, pattern: Envelope, handle: Handle) -> tuple[Envelope, Handle] | None:
        hit, depth = self.search(self.unexpected, pattern)
        self.depths["unexpected"].append(depth)
        if hit >= 0:
            return self.unexpected.pop(hit)
        self.posted.append((pattern, handle))
        self.posted_max = max(self.posted_max, len(self.posted))
        return None

    def on_arrival(self, envelope: Envelope, message: Handle) -> Handle | None:
        self.arrivals += 1
        hit, depth = self.search(self.posted, envelope)
        self.depths["posted"].append(depth)
        if hit >= 0:
            return self.posted.pop(hit)[1]
        self.unexpected.append((envelope, message))
        self.unexpected_arrivals += 1
        self.unexpected_max = max(self.unexpected_max, len(self.unexpected))
        return None

    def probe(self, pattern: Envelope) -> tuple[Envelope, Handle] | None:
        self.probes += 1
        hit, _ = self.search(self.unexpected, pattern)
        return self.unexpected[hit] if hit >= 0 else None

    def cancel_receive(self, handle: Handle) -> bool:
        for i, (_, h) in enumerate(self.posted):
            if h is handle:
                del self.posted[i]
                self.cancelled += 1
                return True
        return False

    def stats(self) -> MatchStats:
        posted, unexpected = self.depths["posted"], self.depths["unexpected"]
        return MatchStats(
            store=self.kind,
            posted=len(self.posted),
            unexpected=len(self.unexpected),
            posted_max=self.posted_max,
            unexpected_max=self.unexpected_max,
            arrivals=self.arrivals,
            unexpected_arrivals=self.unexpected_arrivals,
            unexpected_ratio=self.unexpected_arrivals / self.arrivals if self.arrivals else 0.0,
            posted_searches=len(posted),
            posted_depth_max=max(posted, default=0),
            posted_depth_mean=sum(posted) / len(posted) if posted else 0.0,
            unexpected_searches=len(unexpected),
            unexpected_depth_max=max(unexpected, default=0),
            unexpected_depth_mean=sum(unexpected) / len(unexpected) if unexpected else 0.0,
            probes=self.probes,
            cancelled=self.cancelled,
        )


def _first(
    queue: list[tuple[Envelope, Handle]], indices: list[int], query: Envelope
) -> tuple[int, int]:
    for depth, i in enumerate(indices, 1):
        if fits(queue[i][0], query):
            return i, depth
    return -1, len(indices)


Op = tuple[str, int, int, int]


def replay(kind: str, ops: list[Op]) -> None:
    """Apply ``ops`` to a Matcher and the reference; every answer and the stats must agree."""
    matcher: Matcher[Handle, Handle] = Matcher(store=kind)
    reference = ReferenceMatcher(kind)
    handles: list[Handle] = []
    for n, (op, context, source, tag) in enumerate(ops):
        if op == "post":
            handle = Handle(n)
            handles.append(handle)
            got = matcher.post_receive(context, source, tag, handle)
            assert got == reference.post_receive(Envelope(context, source, tag), handle)
        elif op == "arrive":
            message = Handle(n)
            envelope = Envelope(context, source, tag)
            assert matcher.on_arrival(envelope, message) is reference.on_arrival(envelope, message)
        elif op == "probe":
            pattern = Envelope(context, source, tag)
            assert matcher.probe(context, source, tag) == reference.probe(pattern)
        elif handles:  # cancel: any handle posted so far, matched or not
            handle = handles[context * 7 % len(handles)]
            assert matcher.cancel_receive(handle) is reference.cancel_receive(handle)
    assert matcher.stats() == reference.stats()


contexts = st.integers(0, 2)
sources = st.integers(0, 3)
tags = st.integers(0, 3)
wild_sources = st.one_of(st.just(ANY_SOURCE), sources)
wild_tags = st.one_of(st.just(ANY_TAG), tags)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("post"), contexts, wild_sources, wild_tags),
        st.tuples(st.just("arrive"), contexts, sources, tags),
        st.tuples(st.just("probe"), contexts, wild_sources, wild_tags),
        st.tuples(st.just("cancel"), st.integers(0, 50), st.just(0), st.just(0)),
    ),
    max_size=150,
)


@pytest.mark.parametrize("kind", STORE_KINDS)
@SETTINGS
@given(ops=operations)
def test_any_interleaving_matches_reference(kind: str, ops: list[Op]) -> None:
    replay(kind, ops)


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_long_random_interleaving_matches_reference(kind: str) -> None:
    """Deep queues (hundreds of entries) and out-of-order matches, so the stores compact."""
    rng = random.Random(2024)
    ops: list[Op] = []
    for phase in range(6):
        posting = phase % 2 == 0  # alternate receive-heavy and send-heavy phases
        for _ in range(400):
            roll = rng.random()
            if roll < (0.6 if posting else 0.25):
                source = ANY_SOURCE if rng.random() < 0.15 else rng.randrange(8)
                tag = ANY_TAG if rng.random() < 0.1 else rng.randrange(6)
                ops.append(("post", rng.randrange(2), source, tag))
            elif roll < 0.95:
                ops.append(("arrive", rng.randrange(2), rng.randrange(8), rng.randrange(6)))
            elif roll < 0.98:
                ops.append(("probe", rng.randrange(2), ANY_SOURCE, rng.randrange(6)))
            else:
                ops.append(("cancel", rng.randrange(1000), 0, 0))
    replay(kind, ops)


# -- MPI ordering, by example ----------------------------------------------------------------------


@pytest.fixture(params=STORE_KINDS)
def matcher(request: pytest.FixtureRequest) -> Matcher[str, str]:
    return Matcher(store=request.param)


def test_non_overtaking_same_source_and_tag(matcher: Matcher[str, str]) -> None:
    for n in range(5):
        assert matcher.on_arrival(Envelope(0, 1, 7), f"m{n}") is None
    assert [matcher.post_receive(0, 1, 7, f"r{n}") for n in range(5)] == [
        (Envelope(0, 1, 7), f"m{n}") for n in range(5)
    ]


def test_wildcards_take_arrival_order(matcher: Matcher[str, str]) -> None:
    matcher.on_arrival(Envelope(0, 2, 5), "a")
    matcher.on_arrival(Envelope(0, 1, 6), "b")
    matcher.on_arrival(Envelope(0, 1, 5), "c")
    assert matcher.post_receive(0, ANY_SOURCE, 5, "r1") == (Envelope(0, 2, 5), "a")
    assert matcher.post_receive(0, 1, ANY_TAG, "r2") == (Envelope(0, 1, 6), "b")
    assert matcher.post_receive(0, ANY_SOURCE, ANY_TAG, "r3") == (Envelope(0, 1, 5), "c")
    assert matcher.post_receive(0, ANY_SOURCE, ANY_TAG, "r4") is None


def test_arrival_takes_earliest_posted_receive(matcher: Matcher[str, str]) -> None:
    assert matcher.post_receive(0, ANY_SOURCE, ANY_TAG, "any") is None
    assert matcher.post_receive(0, 3, 4, "exact") is None
    assert matcher.on_arrival(Envelope(0, 3, 4), "m1") == "any"  # posted first wins
    assert matcher.on_arrival(Envelope(0, 3, 4), "m2") == "exact"
    assert matcher.on_arrival(Envelope(0, 3, 4), "m3") is None


def test_contexts_isolate(matcher: Matcher[str, str]) -> None:
    assert matcher.post_receive(1, ANY_SOURCE, ANY_TAG, "r-ctx1") is None
    assert matcher.on_arrival(Envelope(2, 0, 0), "m-ctx2") is None
    assert matcher.probe(1, ANY_SOURCE, ANY_TAG) is None
    assert matcher.post_receive(2, 0, 0, "r-ctx2") == (Envelope(2, 0, 0), "m-ctx2")
    assert matcher.on_arrival(Envelope(1, 5, 5), "m-ctx1") == "r-ctx1"


def test_probe_is_non_destructive(matcher: Matcher[str, str]) -> None:
    matcher.on_arrival(Envelope(0, 1, 1), "m")
    before = matcher.stats()
    assert matcher.probe(0, ANY_SOURCE, ANY_TAG) == (Envelope(0, 1, 1), "m")
    assert matcher.probe(0, 1, 1) == (Envelope(0, 1, 1), "m")
    assert matcher.probe(0, 1, 2) is None
    after = matcher.stats()
    assert after.probes == 3
    assert {**after.as_dict(), "probes": 0} == {**before.as_dict(), "probes": 0}
    assert matcher.post_receive(0, 1, 1, "r") == (Envelope(0, 1, 1), "m")


def test_cancel_withdraws_only_waiting_receives(matcher: Matcher[str, str]) -> None:
    assert matcher.post_receive(0, 1, 1, "keep") is None
    assert matcher.post_receive(0, 1, 1, "drop") is None
    assert matcher.cancel_receive("drop") is True
    assert matcher.cancel_receive("drop") is False
    assert matcher.on_arrival(Envelope(0, 1, 1), "m1") == "keep"
    assert matcher.cancel_receive("keep") is False  # already matched
    assert matcher.on_arrival(Envelope(0, 1, 1), "m2") is None
    assert matcher.stats().cancelled == 1


def test_stats_count_depths_and_ratio() -> None:
    matcher: Matcher[str, str] = Matcher(store="lhs")
    for source in range(4):
        matcher.on_arrival(Envelope(0, source, 0), f"m{source}")
    assert matcher.post_receive(0, 3, 0, "r1") is not None  # depth 4
    assert matcher.post_receive(0, 9, 0, "r2") is None  # miss: depth 3 (whole queue)
    assert matcher.on_arrival(Envelope(0, 9, 0), "m9") == "r2"  # depth 1
    stats = matcher.stats()
    assert stats.as_dict() == {
        "store": "lhs",
        "posted": 0,
        "unexpected": 3,
        "posted_max": 1,
        "unexpected_max": 4,
        "arrivals": 5,
        "unexpected_arrivals": 4,
        "unexpected_ratio": 0.8,
        "posted_searches": 5,
        "posted_depth_max": 1,
        "posted_depth_mean": 0.2,
        "unexpected_searches": 2,
        "unexpected_depth_max": 4,
        "unexpected_depth_mean": 3.5,
        "probes": 0,
        "cancelled": 0,
    }


def test_grouping_shortens_searches_that_name_a_source() -> None:
    depths = {}
    for kind in ("lhs", "lhs-grouped"):
        matcher: Matcher[str, str] = Matcher(store=kind)
        for n in range(64):
            matcher.on_arrival(Envelope(0, n % 8, 0), f"m{n}")
        assert matcher.post_receive(0, 7, 0, "r") == (Envelope(0, 7, 0), "m7")
        depths[kind] = matcher.stats().unexpected_depth_max
    assert depths == {"lhs": 8, "lhs-grouped": 1}


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("post_receive", (0, -2, 0, "r")),
        ("post_receive", (0, 0, -3, "r")),
        ("probe", (0, 1 << 20, 0)),
        ("on_arrival", (Envelope(0, ANY_SOURCE, 0), "m")),
        ("on_arrival", (Envelope(0, 0, ANY_TAG), "m")),
        ("on_arrival", (Envelope(0, 0, 1 << 31), "m")),
    ],
)
def test_misuse_raises_value_error(
    matcher: Matcher[str, str], call: str, args: tuple[object, ...]
) -> None:
    with pytest.raises(ValueError, match=r"source|tag"):
        getattr(matcher, call)(*args)
    assert matcher.stats().posted == matcher.stats().unexpected == 0


def test_unknown_store_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown envelope store"):
        Matcher(store="tree")
