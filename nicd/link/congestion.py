"""Congestion control of one stream: the AIMD window the sender may fill.

The effective window ``cwnd`` starts at ``window`` and stays within ``[min(min_window,
window), window]``. A cumulative acknowledgement of ``n`` packets grows it by ``n / cwnd``
(about one packet per round trip: additive increase); a loss event halves it, at most once
per round trip (multiplicative decrease). Loss on this link is mostly injected, not
congestion, so the floor stays high (``TransportConfig.min_window``). One controller exists,
so there is no registry: a second one would get aioquic's name -> factory shape, as loss
recovery has (:mod:`nicd.link.recovery`).

Invariants: ``floor <= cwnd <= ceiling`` after every input; two cuts are at least one round
trip apart. Pure: callers pass ``now`` and the round trip.
"""

from __future__ import annotations

from nicd.config import TransportConfig
from nicd.link.rto import Rto

__all__ = ["Aimd"]


class Aimd:
    """Additive increase, multiplicative decrease of one stream's window."""

    __slots__ = ("ceiling", "cut_until", "cwnd", "floor")

    def __init__(self, config: TransportConfig) -> None:
        self.ceiling = float(config.window)
        """The configured window: growth stops here."""
        self.floor = float(min(config.min_window, config.window))
        """A cut never goes below this."""
        self.cwnd = self.ceiling
        """The effective window in packets (the sender uses its integer part)."""
        self.cut_until = float("-inf")
        """No cut before this (one per round trip)."""

    def on_acked(self, count: int) -> None:
        """``count`` packets were newly acknowledged: grow by ``count / cwnd``."""
        cwnd = self.cwnd + count / self.cwnd
        self.cwnd = cwnd if cwnd < self.ceiling else self.ceiling  # min() without the call

    def on_loss(self, *, now: float, rto: Rto) -> bool:
        """A loss event (a timeout, a GAP NACK): halve the window unless it was cut less than
        a round trip ago. Return whether it was cut."""
        if now < self.cut_until:
            return False
        self.cwnd = max(self.floor, self.cwnd / 2)
        self.cut_until = now + rto.round_trip()
        return True
