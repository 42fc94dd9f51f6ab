"""RACK-TLP for one stream's sender (RFC 8985 in miniature): which packets a SACK proves lost,
by time rather than by counting, and when to probe a silent tail.

Every transmission is stamped with its order (:class:`~nicd.link.scoreboard.Scoreboard`
numbers them). A packet that went out before the newest one known delivered, and is older than
that one's round trip plus a reordering window (zero until the stream saw reordering, then
SRTT / 4), is lost and goes out again at once; a lost resend is found the same way. A packet
not yet old enough arms the reorder timer for when it will be. When no acknowledgement brings
news for a probe timeout (2 SRTT plus the receiver's delayed-ACK time), the last packet in
flight goes out once more (tail-loss probe), so a lost tail is found by the SACK it provokes.
No window cut here: the held packets keep the window from sliding past the hole anyway, and
loss on this link is injected, not congestion (timeouts still cut).

This is mechanism only; :mod:`nicd.link.recovery` decides when it runs (a selective sender on
every acknowledgement, any sender on a SACK).

Invariants: ``order`` (the newest delivered transmission) only grows; ``reordering`` once set
stays set; ``timer_at`` is always the earlier of ``tlp_at`` and ``reorder_at``; a packet the
receiver holds (SACKed) or never sent is never called lost. Pure: callers pass ``now``.
"""

from __future__ import annotations

from typing import Final

from nicd.core.actions import TransportAction
from nicd.core.stats import TransportStats
from nicd.link.rto import GRANULARITY_S, Rto
from nicd.link.scoreboard import Outgoing, Scoreboard

__all__ = ["TLP_RTTS", "Rack"]

TLP_RTTS: Final = 2.0  # the tail-loss probe goes after this many SRTTs without news


class Rack:
    """RACK's state for one stream: the newest transmission known delivered, and the timers."""

    __slots__ = (
        "ack_delay_s", "board", "min_rtt", "news_at", "order", "reorder_at", "reordering",
        "rto", "rtt", "stats", "timer_at", "tlp_at",
    )  # fmt: skip

    def __init__(
        self, *, board: Scoreboard, rto: Rto, ack_delay_s: float, stats: TransportStats
    ) -> None:
        self.board = board
        self.rto = rto
        self.ack_delay_s = ack_delay_s
        self.stats = stats
        self.order = 0
        """``order`` of the newest delivered transmission (0: none yet)."""
        self.rtt = 0.0
        """Its round trip: from its send to the ACK or SACK that reported it."""
        self.min_rtt = float("inf")
        """Shortest round trip of a packet sent once."""
        self.reordering = False
        """A packet sent once was delivered after one sent later: the network reorders."""
        self.reorder_at: float | None = None
        """When a packet not yet old enough to be called lost will be."""
        self.tlp_at: float | None = None
        """When the tail-loss probe goes (once per stretch without news)."""
        self.timer_at: float | None = None
        """The earlier of ``tlp_at`` and ``reorder_at``: when :meth:`on_timer` has work."""
        self.news_at = float("-inf")
        """When an ACK or SACK last reported new data delivered, or a tail probe went (a
        selective sender's RTO counts from here: RFC 8985 §7.3 re-arms it after the probe)."""

    # -- inputs -------------------------------------------------------------------------------

    def delivered(self, entry: Outgoing, *, now: float, before: int) -> None:
        """``entry`` was reported delivered at ``now``; ``before`` is ``order`` as it was
        before this acknowledgement (a batch does not compare with itself)."""
        rtt = now - entry.last_sent
        if entry.sends == 1:
            self.min_rtt = min(self.min_rtt, rtt)
            if entry.order < before:
                self.reordering = True
        elif rtt < self.min_rtt:
            # Too soon for this copy: an earlier one arrived (RFC 8985 §6.2 step 2), so the
            # resend was spurious: the network delays some packets past later ones.
            self.reordering = True
            return
        if entry.order > self.order:
            self.order = entry.order
            self.rtt = rtt

    def on_news(self, *, now: float, in_flight: bool) -> None:
        """New data was acknowledged or SACKed: the receiver hears us, so the probe is armed
        again from now (none with nothing in flight)."""
        self.news_at = now
        self.tlp_at = now + self.pto() if in_flight else None
        self._retime()

    def arm_probe(self, *, now: float) -> None:
        """Packets went out: arm the tail-loss probe unless it is armed already."""
        if self.tlp_at is None:
            self.tlp_at = now + self.pto()
            self._retime()

    def detect_losses(self, *, now: float) -> list[TransportAction]:
        """RACK (RFC 8985 §6.2): a packet in flight, not SACKed, that went out before the
        newest delivered one and is older than that one's round trip plus the reordering
        window is lost: resend it now (a lost resend too: it is found the same way once a
        later packet is delivered). The earliest one not old enough arms the reorder timer."""
        self.reorder_at = None
        if not self.order:
            self._retime()
            return []
        board = self.board
        wait = self.rtt + self.window(self.rto.round_trip()) - GRANULARITY_S
        out: list[TransportAction] = []
        recovery = self.stats.recovery
        packets = board.packets
        for index in range(board.send_next - board.base):
            entry = packets[index]
            if entry.sacked or not entry.sends or entry.order >= self.order:
                continue
            lost_at = entry.last_sent + wait
            if now < lost_at:
                if self.reorder_at is None or lost_at < self.reorder_at:
                    self.reorder_at = lost_at
                continue
            if entry.sends > 1:
                recovery["resends_lost"] += 1
            out.append(board.resend(entry, now=now))
            recovery["holes_resent"] += 1
        self._retime()
        return out

    def on_timer(self, *, now: float) -> list[TransportAction]:
        """Fire what is due: the reorder timer (losses found by time), then the probe."""
        out: list[TransportAction] = []
        reorder = self.reorder_at
        if reorder is not None and now >= reorder:
            out += self.detect_losses(now=now)
        if self.tlp_at is not None and now >= self.tlp_at:
            out += self._tail_probe(now=now)
        return out

    def stop(self) -> None:
        """Disarm both timers (a retransmission timeout took over)."""
        self.tlp_at = self.reorder_at = self.timer_at = None

    # -- queries ------------------------------------------------------------------------------

    def window(self, srtt: float) -> float:
        """The reordering window: none until reordering was seen, then SRTT / 4."""
        return srtt / 4 if self.reordering else 0.0

    def pto(self) -> float:
        """The tail-loss probe's delay: 2 SRTT plus the receiver's delayed-ACK allowance."""
        return TLP_RTTS * self.rto.round_trip() + self.ack_delay_s

    # -- helpers ------------------------------------------------------------------------------

    def _tail_probe(self, *, now: float) -> list[TransportAction]:
        """No news for a PTO: resend the last unacknowledged packet on the link once, so the
        receiver's SACK tells us (through RACK) which of the tail were lost (RFC 8985 §7)."""
        self.tlp_at = None
        self._retime()
        board = self.board
        for index in range(board.send_next - board.base - 1, -1, -1):
            entry = board.packets[index]
            if not entry.sacked and entry.sends:
                packet = board.resend(entry, now=now)
                self.stats.recovery["tail_probes"] += 1
                self.news_at = now  # the RTO gives the probe's answer a full RTO
                return [packet]
        return []

    def _retime(self) -> None:
        tlp, reorder = self.tlp_at, self.reorder_at
        if tlp is None or reorder is None:
            self.timer_at = tlp if reorder is None else reorder
        else:
            self.timer_at = min(tlp, reorder)
