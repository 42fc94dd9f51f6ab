"""Loss recovery of one stream's sender, behind a name -> factory registry (``nicd --recovery``).

A recovery decides how a sender finds its lost packets; the sender (:mod:`nicd.link.sender`)
calls it at four points where the two differ, and a name picks the class, the way aioquic
registers its congestion controllers by name (``TransportConfig.recovery`` is a lookup in
:data:`RECOVERIES`; ``nicd.config.RECOVERY_MODES`` lists the same names for the flags):

* ``gbn`` (:class:`GoBackN`, the default and the papers' figures): a lost packet is found by
  the receiver's GAP NACK or by the retransmission timeout, and the sender goes back N.
* ``selective`` (:class:`Selective`, RFC 2018/6675 and RFC 8985's RACK-TLP in miniature):
  losses are found by time on every acknowledgement (:mod:`nicd.link.rack`) and only the holes
  go out again; a silent tail is probed after ~2 SRTT; the RTO counts from the last news, so it
  fires only when the receiver stops answering.

Any sender, whatever its recovery, handles a SACK (a selective receiver sends them): it marks
the packets the receiver holds (never sent again unless a refusal or a long backoff makes the
mark doubtful) and lets RACK resend what the SACK proves lost; that part is shared, in
:class:`LossRecovery`. A go-back-N receiver never SACKs, so a selective sender talking to it
goes back N on its GAP NACKs: mixed modes interoperate, the receiver decides.

Invariants: :func:`create_recovery` knows exactly :data:`RECOVERIES`; a recovery only resends
packets in flight (``[base, send_next)``) that the receiver does not hold. Pure.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Final, Protocol

from nicd.config import TransportConfig
from nicd.core.actions import TransportAction
from nicd.core.stats import TransportStats
from nicd.errors import UsageError
from nicd.link.rack import Rack
from nicd.link.rto import Rto
from nicd.link.scoreboard import Scoreboard
from nicd.link.selective import sacked

__all__ = [
    "RECOVERIES",
    "SACK_DOUBT_BACKOFF",
    "GoBackN",
    "LossRecovery",
    "RecoveryFactory",
    "Selective",
    "create_recovery",
    "register_recovery",
]

SACK_DOUBT_BACKOFF: Final = 2  # after this many timeouts in a row the SACK marks are forgotten


class LossRecovery(ABC):
    """How one stream's sender finds lost packets: four hooks, and the SACK handling every
    sender shares."""

    name: ClassVar[str]
    """The name it is registered under (``--recovery``)."""

    __slots__ = ("board", "rack", "rto", "stats")

    def __init__(
        self, *, board: Scoreboard, rto: Rto, config: TransportConfig, stats: TransportStats
    ) -> None:
        self.board = board
        self.rto = rto
        self.stats = stats
        self.rack = Rack(board=board, rto=rto, ack_delay_s=config.ack_delay_s, stats=stats)
        """Time-based loss detection and the tail-loss probe (its ``timer_at`` is this
        recovery's own timer, beside the RTO)."""

    # -- the hooks ----------------------------------------------------------------------------

    @abstractmethod
    def on_sent(self, *, now: float) -> None:
        """A burst of packets went on the link."""

    @abstractmethod
    def before_free(self, upto: int, *, now: float) -> None:
        """A cumulative ACK, SACK or NACK is about to free ``[base, upto)``."""

    @abstractmethod
    def after_ack(self, *, now: float) -> list[TransportAction]:
        """A cumulative ACK freed packets: what to resend now."""

    @abstractmethod
    def rto_deadline(self) -> float:
        """When the retransmission timer fires (packets are in flight, none refused)."""

    # -- shared by every recovery -------------------------------------------------------------

    def on_sack(
        self, upto: int, bitmap: int, before: int, *, now: float, paused: bool
    ) -> list[TransportAction]:
        """A SACK (cumulative part ``upto``, already freed) says the receiver holds the packets
        of ``bitmap``: mark them, and resend what RACK finds lost unless the receiver refuses
        the stream. ``before``: RACK's order before this SACK."""
        board, rack = self.board, self.rack
        news = False
        for held in sacked(upto, bitmap):
            if held >= board.high_sent:
                break
            entry = board[held]
            if not entry.sacked:
                entry.sacked = True
                news = True
                self.stats.recovery["sacked"] += 1
                rack.delivered(entry, now=now, before=before)
        if news:
            rack.on_news(now=now, in_flight=board.send_next > board.base)
        if paused:
            return []
        return rack.detect_losses(now=now)

    def on_timeout(self) -> None:
        """The retransmission timer fired (the RTO has backed off already): stop the
        recovery's own timers; after repeated timeouts the SACK marks are doubtful (reneging,
        or a receiver that restarted) and are forgotten."""
        if self.rto.backoff >= SACK_DOUBT_BACKOFF:
            self.board.forget_sacks()
        self.rack.stop()

    def on_timer(self, *, now: float) -> list[TransportAction]:
        """The recovery's own timer (``rack.timer_at``) is due: fire what is."""
        return self.rack.on_timer(now=now)


class GoBackN(LossRecovery):
    """Go-back-N (GRIM 4.2): GAP NACKs and the RTO find losses; nothing is found by time
    except what a SACK proves."""

    name: ClassVar[str] = "gbn"
    __slots__ = ()

    def on_sent(self, *, now: float) -> None:
        """Nothing: the RTO, armed from the oldest packet's send, covers the burst."""

    def before_free(self, upto: int, *, now: float) -> None:
        """Nothing: only the RTO estimator learns from a cumulative ACK."""

    def after_ack(self, *, now: float) -> list[TransportAction]:
        """Nothing to resend: a hole is reported by the receiver's GAP NACK."""
        return []

    def rto_deadline(self) -> float:
        """One RTO after the oldest packet in flight last went out."""
        return self.board.packets[0].last_sent + self.rto.value()


class Selective(LossRecovery):
    """Selective recovery: RACK on every acknowledgement, a tail-loss probe, an RTO that
    counts from the last news."""

    name: ClassVar[str] = "selective"
    __slots__ = ()

    def on_sent(self, *, now: float) -> None:
        """Arm the tail-loss probe unless it is armed."""
        self.rack.arm_probe(now=now)

    def before_free(self, upto: int, *, now: float) -> None:
        """Each freed packet the receiver did not hold already, and that went out, is a
        delivery RACK learns from; the news re-arms the probe."""
        board, rack = self.board, self.rack
        before = rack.order
        packets = board.packets
        for index in range(upto - board.base):
            entry = packets[index]
            if not entry.sacked and entry.sends:
                rack.delivered(entry, now=now, before=before)
        rack.on_news(now=now, in_flight=board.send_next > upto)

    def after_ack(self, *, now: float) -> list[TransportAction]:
        """Resend what RACK finds lost now that more is known delivered."""
        return self.rack.detect_losses(now=now)

    def rto_deadline(self) -> float:
        """One RTO after the oldest packet last went out or the last news, whichever is later
        (no timeout while SACKs still bring news: RFC 8985 §7.3)."""
        start = self.board.packets[0].last_sent
        news = self.rack.news_at
        return (news if news > start else start) + self.rto.value()


class RecoveryFactory(Protocol):
    """What the registry holds: builds one stream's recovery."""

    def __call__(
        self, *, board: Scoreboard, rto: Rto, config: TransportConfig, stats: TransportStats
    ) -> LossRecovery: ...


RECOVERIES: dict[str, RecoveryFactory] = {}
"""The registered recoveries by name, in registration order (the default first)."""


def register_recovery(name: str, factory: RecoveryFactory) -> None:
    """Make ``factory`` the recovery called ``name``."""
    RECOVERIES[name] = factory


def create_recovery(
    name: str, *, board: Scoreboard, rto: Rto, config: TransportConfig, stats: TransportStats
) -> LossRecovery:
    """A new recovery of the kind called ``name``; UsageError for an unknown one."""
    factory = RECOVERIES.get(name)
    if factory is None:
        known = ", ".join(RECOVERIES)
        raise UsageError(f"recovery {name!r} must be one of {known}")
    return factory(board=board, rto=rto, config=config, stats=stats)


register_recovery(GoBackN.name, GoBackN)
register_recovery(Selective.name, Selective)
