"""MPI message matching: the posted-receive and unexpected-message queues of one rank.

A receive (context, source or ANY_SOURCE, tag or ANY_TAG) takes the earliest-arrived
unexpected message that fits; an arriving message takes the earliest-posted receive that
fits; otherwise each waits in its queue. That is all of MPI's ordering rule (MPI 4.0 §3.5):
messages from one source in one context are matched in the order they arrived, so they
cannot overtake each other, and wildcards see arrivals in arrival order. The transport below
delivers each (source, context) stream in order; this module keeps the order it is given.

Sans-IO: the caller reports posts and arrivals and acts on what is returned; nothing here
sends, waits or reads a clock. Envelopes are stored apart from payloads in one of the stores
of `emucluster.p2p.envelope` (``"lhs"``, ``"lhs-grouped"`` or ``"list"``, seed 004); all three
match identically and differ only in speed and in how deep their searches count.

Invariants:

* No posted receive fits any queued unexpected message: every input matches before it queues.
* Each receive handle and each message is returned at most once, and never after cancellation.
* Probes change nothing, not even the search statistics (they count only as probes).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import islice
from typing import Generic, TypeVar

from emucluster.p2p.envelope import (
    ANY_SOURCE,
    ANY_TAG,
    STORE_KINDS,
    Envelope,
    EnvelopeStore,
    check_fields,
    make_store,
)

__all__ = ["ANY_SOURCE", "ANY_TAG", "STORE_KINDS", "Envelope", "MatchStats", "Matcher"]

R = TypeVar("R")  # receive handle: opaque to the matcher, never None
M = TypeVar("M")  # message payload or handle: opaque to the matcher


@dataclass(frozen=True, slots=True)
class MatchStats:
    """Queue statistics of one matcher (Brightwell and Underwood's measures, seed 004 Table 1)."""

    store: str
    """Which envelope store the matcher uses."""
    posted: int
    """Receives waiting now."""
    unexpected: int
    """Unexpected messages waiting now."""
    posted_max: int
    """Longest the posted-receive queue has been."""
    unexpected_max: int
    """Longest the unexpected-message queue has been."""
    arrivals: int
    """Messages reported with `Matcher.on_arrival`."""
    unexpected_arrivals: int
    """Arrivals that found no posted receive and were queued as unexpected."""
    unexpected_ratio: float
    """unexpected_arrivals / arrivals (0.0 before any arrival)."""
    posted_searches: int
    """Searches of the posted-receive queue: one per arrival."""
    posted_depth_max: int
    """Most entries one posted-queue search examined."""
    posted_depth_mean: float
    """Mean entries examined per posted-queue search (0.0 before any)."""
    unexpected_searches: int
    """Searches of the unexpected queue: one per posted receive (probes not included)."""
    unexpected_depth_max: int
    """Most entries one unexpected-queue search examined."""
    unexpected_depth_mean: float
    """Mean entries examined per unexpected-queue search (0.0 before any)."""
    probes: int
    """Calls to `Matcher.probe`."""
    cancelled: int
    """Receives removed by `Matcher.cancel_receive`."""

    def as_dict(self) -> dict[str, object]:
        """JSON-able snapshot."""
        return asdict(self)


class Matcher(Generic[R, M]):
    """Posted-receive and unexpected-message queues of one rank, matched in MPI order.

    ``R`` is the caller's receive handle (a request; never None), ``M`` its message (payload
    or a handle to one). Search depth counts the queued entries a search examined, the match
    included, the whole queue on a miss; with ``"lhs-grouped"`` a search that names its source
    examines only that source's entries (and receives posted with ANY_SOURCE).
    """

    def __init__(self, *, store: str = "lhs") -> None:
        """Empty queues kept in an envelope store of kind ``store`` (one of `STORE_KINDS`)."""
        self._store = store
        self._posted: EnvelopeStore[R] = make_store(store)
        self._unexpected: EnvelopeStore[M] = make_store(store)
        self._posted_max = 0
        self._unexpected_max = 0
        self._arrivals = 0
        self._unexpected_arrivals = 0
        self._posted_searches = 0
        self._posted_depth_max = 0
        self._posted_depth_sum = 0
        self._unexpected_searches = 0
        self._unexpected_depth_max = 0
        self._unexpected_depth_sum = 0
        self._probes = 0
        self._cancelled = 0

    def post_receive(
        self, context: int, source: int, tag: int, handle: R
    ) -> tuple[Envelope, M] | None:
        """Post a receive: the earliest unexpected message that fits, removed, with its envelope
        (the Status source and tag); or None, and the receive is queued until a message fits.

        Raises ValueError if a field is out of range.
        """
        check_fields(context, source, tag, wildcards=True)
        slot, depth = self._unexpected.find(context, source, tag)
        self._unexpected_searches += 1
        self._unexpected_depth_sum += depth
        if depth > self._unexpected_depth_max:
            self._unexpected_depth_max = depth
        if slot is not None:
            self._unexpected.remove(slot)
            return slot.envelope, slot.item
        self._posted.append(Envelope(context, source, tag), handle)
        if len(self._posted) > self._posted_max:
            self._posted_max = len(self._posted)
        return None

    def on_arrival(self, envelope: Envelope, message: M) -> R | None:
        """A message arrived: the handle of the earliest posted receive that fits, removed; or
        None, and the message is queued as unexpected.

        Raises ValueError if the envelope holds a wildcard or a field out of range.
        """
        check_fields(envelope.context, envelope.source, envelope.tag, wildcards=False)
        handle = self.take_posted(envelope.context, envelope.source, envelope.tag)
        if handle is None:
            self.add_unexpected(envelope, message)
        return handle

    def take_posted(self, context: int, source: int, tag: int) -> R | None:
        """The first half of `on_arrival`, for a caller that has checked the fields (see
        `arrival_fields_ok`) and builds the message only if it must wait: the handle of the
        earliest posted receive that fits, removed; or None, and the caller must then call
        `add_unexpected` for this message before any other input."""
        slot, depth = self._posted.find(context, source, tag)
        self._arrivals += 1
        self._posted_searches += 1
        self._posted_depth_sum += depth
        if depth > self._posted_depth_max:
            self._posted_depth_max = depth
        if slot is None:
            return None
        self._posted.remove(slot)
        return slot.item

    def add_unexpected(self, envelope: Envelope, message: M) -> None:
        """The second half of `on_arrival`: queue a message no posted receive took."""
        unexpected = self._unexpected
        unexpected.append(envelope, message)
        self._unexpected_arrivals += 1
        if len(unexpected) > self._unexpected_max:
            self._unexpected_max = len(unexpected)

    def probe(self, context: int, source: int, tag: int) -> tuple[Envelope, M] | None:
        """The unexpected message a receive with this pattern would take now, left queued.

        Raises ValueError if a field is out of range.
        """
        check_fields(context, source, tag, wildcards=True)
        self._probes += 1
        slot, _ = self._unexpected.find(context, source, tag)
        return None if slot is None else (slot.envelope, slot.item)

    def cancel_receive(self, handle: R) -> bool:
        """Withdraw the posted receive whose handle *is* ``handle``; False if none is queued
        (it already matched, or was never posted)."""
        slot = self._posted.find_item(handle)
        if slot is None:
            return False
        self._posted.remove(slot)
        self._cancelled += 1
        return True

    def queued(self, limit: int = 16) -> dict[str, list[tuple[int, int, int]]]:
        """The envelopes (context, source, tag) of the first ``limit`` entries of each queue,
        oldest first: what a hung rank waits for and what came that nothing took."""
        return {
            "posted": [(e.context, e.source, e.tag)
                       for e in islice((s.envelope for s in self._posted), limit)],
            "unexpected": [(e.context, e.source, e.tag)
                           for e in islice((s.envelope for s in self._unexpected), limit)],
        }  # fmt: skip

    def stats(self) -> MatchStats:
        """Queue lengths, search depths and the unexpected ratio so far."""
        return MatchStats(
            store=self._store,
            posted=len(self._posted),
            unexpected=len(self._unexpected),
            posted_max=self._posted_max,
            unexpected_max=self._unexpected_max,
            arrivals=self._arrivals,
            unexpected_arrivals=self._unexpected_arrivals,
            unexpected_ratio=_ratio(self._unexpected_arrivals, self._arrivals),
            posted_searches=self._posted_searches,
            posted_depth_max=self._posted_depth_max,
            posted_depth_mean=_ratio(self._posted_depth_sum, self._posted_searches),
            unexpected_searches=self._unexpected_searches,
            unexpected_depth_max=self._unexpected_depth_max,
            unexpected_depth_mean=_ratio(self._unexpected_depth_sum, self._unexpected_searches),
            probes=self._probes,
            cancelled=self._cancelled,
        )


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0
