"""Retransmission timeout: RTT estimation (RFC 6298), Karn's rule, exponential backoff, bounds.

Two small classes. :class:`RttEstimator` keeps SRTT and RTTVAR for one peer (the path is the
peer's, so every stream towards it feeds and reads the same estimate). :class:`Rto` is one
stream's timer value: the peer's estimate times that stream's own backoff, so one stream's
timeouts do not inflate another's timer.

Invariants: ``RttEstimator.rto()`` and ``Rto.value()`` always lie in ``[min_s, max_s]``; a
sample from a retransmitted packet never changes SRTT or RTTVAR (Karn's rule: its ACK may
answer either copy); backoff doubles the value on each timeout until it reaches ``max_s`` and
returns to zero only when a valid (unambiguous) sample arrives (RFC 6298 §5.5, §5.7).
Pure: no clock, callers pass ``now``.
"""

from __future__ import annotations

from typing import Final

from nicd.errors import UsageError

__all__ = ["ALPHA", "BETA", "GRANULARITY_S", "K", "Rto", "RttEstimator"]

ALPHA: Final = 1 / 8  # SRTT gain (RFC 6298 §2.3)
BETA: Final = 1 / 4  # RTTVAR gain (RFC 6298 §2.3)
K: Final = 4  # RTTVAR multiplier in the RTO (RFC 6298 §2.2)
GRANULARITY_S: Final = 1e-6  # clock granularity G in seconds: a monotonic float clock


class RttEstimator:
    """Smoothed round-trip time and its variation for one peer, with a bounded RTO."""

    __slots__ = ("ignored", "initial_s", "max_s", "min_s", "rto_s", "rttvar", "samples", "srtt")

    def __init__(self, *, initial_s: float, min_s: float, max_s: float) -> None:
        if not 0 < min_s <= max_s:
            raise UsageError(f"RTO bounds must satisfy 0 < min ({min_s}) <= max ({max_s})")
        if initial_s <= 0:
            raise UsageError(f"initial RTO must be positive, not {initial_s}")
        self.initial_s = initial_s
        self.min_s = min_s
        self.max_s = max_s
        self.srtt: float | None = None
        """Smoothed RTT in seconds; None before the first sample."""
        self.rttvar = 0.0
        """RTT variation in seconds."""
        self.samples = 0
        """Samples taken."""
        self.ignored = 0
        """Samples refused by Karn's rule."""
        self.rto_s = min(max_s, max(min_s, initial_s))
        """``rto()``, kept current by ``on_sample`` (every timer query reads it; read-only)."""

    def on_sample(self, rtt_s: float) -> None:
        """Fold one unambiguous RTT measurement in (RFC 6298 §2.2-2.3)."""
        rtt_s = max(rtt_s, 0.0)
        self.samples += 1
        if self.srtt is None:
            self.srtt = rtt_s
            self.rttvar = rtt_s / 2
        else:
            self.rttvar = (1 - BETA) * self.rttvar + BETA * abs(self.srtt - rtt_s)
            self.srtt = (1 - ALPHA) * self.srtt + ALPHA * rtt_s
        value = self.srtt + max(GRANULARITY_S, K * self.rttvar)
        self.rto_s = min(self.max_s, max(self.min_s, value))

    def on_ack(self, *, sent_at: float, now: float, retransmitted: bool) -> bool:
        """An ACK covered a packet sent at ``sent_at``; sample it unless it was retransmitted
        (Karn's rule). Return True when the sample was taken."""
        if retransmitted:
            self.ignored += 1
            return False
        self.on_sample(now - sent_at)
        return True

    def rto(self) -> float:
        """The retransmission timeout without backoff, within the bounds."""
        return self.rto_s


class Rto:
    """One stream's retransmission timeout: the peer's estimate with this stream's backoff."""

    __slots__ = ("backoff", "estimator")

    def __init__(self, estimator: RttEstimator) -> None:
        self.estimator = estimator
        self.backoff = 0
        """Timeouts since the last valid sample, as long as doubling still changed the value."""

    def value(self) -> float:
        """Current timeout in seconds: ``rto() * 2**backoff``, capped at ``max_s``."""
        est = self.estimator
        if not self.backoff:
            return est.rto_s
        return min(est.max_s, est.rto_s * (1 << self.backoff))

    def round_trip(self) -> float:
        """The round trip to plan with: the peer's SRTT, or the initial RTO before the first
        sample (how long a rollback guards against a repeated NACK, how far apart two window
        cuts are, RACK's reordering window and the tail-loss probe's delay)."""
        srtt = self.estimator.srtt
        return srtt if srtt is not None else self.estimator.initial_s

    def on_timeout(self) -> None:
        """The timer expired: double the timeout (RFC 6298 §5.5), up to the upper bound."""
        if self.value() < self.estimator.max_s:
            self.backoff += 1

    def on_progress(self) -> None:
        """New data was acknowledged, even ambiguously: end the backoff.

        RFC 6298 keeps the backoff until a valid sample; without timestamps, go-back-N under
        heavy loss rarely gets one (every rollback makes the next ACKs ambiguous), so the
        backoff would ratchet up while the peer answers. QUIC (RFC 9002 §6.2.1) resets its
        backoff on any acknowledgement; the estimate itself still takes only Karn-valid
        samples, so a grown RTT is still learned from packets sent once."""
        self.backoff = 0

    def on_ack(self, *, sent_at: float, now: float, retransmitted: bool) -> bool:
        """Offer a sample (Karn's rule applies); a valid one also ends the backoff."""
        taken = self.estimator.on_ack(sent_at=sent_at, now=now, retransmitted=retransmitted)
        if taken:
            self.backoff = 0
        return taken
