"""The sending side of one stream (GRIM 4.2-4.3, adapted to lossy UDP): the inputs that drive
its scoreboard, loss recovery, window and refusal state.

A stream is one (source LC, destination node, destination LC) triple: GRIM 4.3.2's any-to-any
sequencing, so a NACK or a rollback here never touches another stream. :class:`StreamSender`
takes the three kinds of input (a local request, a control packet from the receiver, a timer)
and composes four parts, each in its own module: the packets and the window arithmetic
(:mod:`~nicd.link.scoreboard`), how losses are found (:mod:`~nicd.link.recovery`, picked by
``TransportConfig.recovery``), the AIMD window (:mod:`~nicd.link.congestion`) and whether the
receiver lets it send (:mod:`~nicd.link.refusal`). What a sender does on each input:

* ACK: free what it covers (an RTT sample under Karn's rule, the backoff ends, the window
  grows, a refusal ends), let the recovery resend what it finds lost, send what the window
  allows.
* SACK: the same for its cumulative part, then the recovery marks the held packets.
* NACK GAP / RESUME: free what it acknowledges and go back to its seq (a GAP is a loss event;
  a RESUME ends a refusal). NACK NO_BUFFER / NO_PORT: free, rewind to its seq, pause.
* NACK ABORTED: free what it acknowledges; the message holding its seq fails ``aborted`` (its
  receiver gave up on it) and its fragments from there on become SKIP packets, sent from seq.
* Retransmission timeout: back off, cut the window, go back to ``base``.
* Its own timer: the refusal retry or give-up while paused, else the recovery's timer.

Invariants: a message ends in exactly one SendComplete or SendFailed; nothing is sent while
PAUSED and one packet at a time while PROBING; an acknowledgement beyond what was sent is a
counted drop and a stale one changes nothing (a stale SACK or NACK is counted too). Pure:
inputs take ``now`` keyword-only and return actions; timers are deadlines the caller asks for.
"""

from __future__ import annotations

from typing import Final, TypeAlias

from nicd.config import TransportConfig
from nicd.core.actions import SendFailed, TransportAction
from nicd.core.stats import TransportStats
from nicd.link.congestion import Aimd
from nicd.link.recovery import create_recovery
from nicd.link.refusal import Refusal, SendState
from nicd.link.reliable import unwrap
from nicd.link.rto import Rto
from nicd.link.scoreboard import Message, Scoreboard
from nicd.link.wire import NackReason

__all__ = ["StreamKey", "StreamSender"]

_PAUSED: Final = SendState.PAUSED
_PROBING: Final = SendState.PROBING
_OPEN: Final = SendState.OPEN


StreamKey: TypeAlias = tuple[int, int, int]
"""An outgoing stream ``(src_port, dst_node, dst_port)``: from local LC ``src_port`` to LC
``dst_port`` of ``dst_node``. A plain tuple, not a NamedTuple: packets build keys, and a
NamedTuple's ``__new__`` stays interpreted code in the compiled build (docs/dev/build.md)."""


class StreamSender:
    """The sending side of one stream: scoreboard, recovery, window, refusal, timers."""

    def __init__(
        self,
        *,
        node_id: int,
        src_port: int,
        dst_node: int,
        dst_port: int,
        config: TransportConfig,
        rto: Rto,
        stats: TransportStats,
        epoch: int = 0,
    ) -> None:
        self.dst_node = dst_node
        self.epoch = epoch
        """This stream instance's epoch (16-bit): its packets carry it, controls must too."""
        self.established = False
        """A control (or piggy-backed ACK) of this epoch came back: the receiver has state."""
        self.used_at = 0.0
        """When it last had something to send (the transport retires it when idle)."""
        self.config = config
        self.rto = rto
        self.stats = stats
        self.board = Scoreboard(
            node_id=node_id, src_port=src_port, dst_node=dst_node, dst_port=dst_port,
            mtu=config.mtu, stats=stats, epoch=epoch,
        )  # fmt: skip
        """The packets and messages by sequence number (``board.queue`` takes a message)."""
        self.recovery = create_recovery(config.recovery, board=self.board, rto=rto,
                                        config=config, stats=stats)  # fmt: skip
        self.congestion = Aimd(config)
        self.refusal = Refusal(config)

    # -- local requests ---------------------------------------------------------------------

    def transmit(self, *, now: float) -> list[TransportAction]:
        """Put on the link what the window allows (one probe after a refusal retry)."""
        board = self.board
        state = self.refusal.state
        if state is _PAUSED or board.send_next >= board.next_seq:
            return []
        out = board.send(1 if state is _PROBING else int(self.congestion.cwnd), now=now)
        if out:
            self.recovery.on_sent(now=now)
        return out

    def close(self, reason: str = "closed") -> list[TransportAction]:
        """The source port closed (or the peer died: ``reason``): every message fails.
        Messages never on the link are dropped (their sequence numbers were never seen); the
        rest stay as orphans and are still carried, so the receiver's sequence stays whole
        (they may still arrive, e.g. to a peer that comes back)."""
        return [self._failure(m, reason) for m in self.board.orphan_all()]

    def revive(self, *, now: float) -> list[TransportAction]:
        """The peer came back after being declared dead: forget the backoff and the refusal,
        go back to ``base`` (orphans first, so the receiver's sequence stays whole)."""
        board = self.board
        self.refusal.clear()
        board.forget_sacks()
        self.rto.on_progress()
        board.go_back(board.base, now=now)
        return self.transmit(now=now)

    def fail_all(self, reason: str) -> list[TransportAction]:
        """Fail every queued and in-flight message (the receiver refused them all from
        ``base`` on); the stream empties and those sequence numbers are reused."""
        out: list[TransportAction] = [self._failure(m, reason) for m in self.board.clear()]
        self.refusal.clear()
        return out

    # -- control packets --------------------------------------------------------------------

    def on_ack(self, seq: int, *, now: float) -> list[TransportAction]:
        """A cumulative ACK: everything before ``seq`` (32-bit, from the wire) arrived."""
        board = self.board
        upto = unwrap(seq, board.base)
        if upto > board.high_sent:
            self.stats.drops["ack_beyond_sent"] += 1
            return []
        if upto <= board.base:
            return []  # duplicate or stale: the peer is alive, nothing more
        out = self._free(upto, now=now, sample=True)
        out += self.recovery.after_ack(now=now)
        if board.send_next < board.next_seq:
            out += self.transmit(now=now)
        return out

    def on_sack(self, seq: int, bitmap: int, *, now: float) -> list[TransportAction]:
        """A SACK: everything before ``seq`` arrived, and the packets of ``bitmap`` (bit i =
        ``seq + 1 + i``) are held; resend what the recovery finds lost, then what the window
        allows."""
        board = self.board
        upto = unwrap(seq, board.base)
        if upto > board.high_sent:
            self.stats.drops["ack_beyond_sent"] += 1
            return []
        if upto < board.base:
            self.stats.drops["stale_sack"] += 1
            return []
        before = self.recovery.rack.order
        out = self._free(upto, now=now, sample=True) if upto > board.base else []
        paused = self.refusal.state is _PAUSED
        out += self.recovery.on_sack(upto, bitmap, before, now=now, paused=paused)
        return out + self.transmit(now=now)

    def on_nack(self, reason: NackReason, seq: int, *, now: float) -> list[TransportAction]:
        """A NACK: everything before ``seq`` arrived; ``seq`` was refused for ``reason``."""
        board = self.board
        wanted = unwrap(seq, board.base)
        if wanted > board.high_sent:
            self.stats.drops["nack_beyond_sent"] += 1
            return []
        if wanted < board.base:
            self.stats.drops["stale_nack"] += 1
            return []
        out = self._free(wanted, now=now, sample=False) if wanted > board.base else []
        if reason is NackReason.ABORTED:
            return out + self._aborted(wanted, now=now)
        if reason is NackReason.GAP or reason is NackReason.RESUME:
            if reason is NackReason.RESUME and self.refusal.state is not _OPEN:
                self.refusal.clear()
            back = board.send_next > wanted
            if back and not board.recent_rollback(wanted, now=now, rto=self.rto):
                if reason is NackReason.GAP:
                    self._loss_event(now)
                board.go_back(wanted, now=now)
        else:  # NO_BUFFER / NO_PORT: GRIM 4.2.1 rollback, then wait for RESUME or the retry
            board.rewind(wanted, now=now)
            board.forget_sacks()  # a refusing receiver drops what it held
            self.refusal.on_refused(reason, now=now)
        return out + self.transmit(now=now)

    # -- timers -----------------------------------------------------------------------------

    def rto_deadline(self) -> float | None:
        """When the oldest in-flight packet times out; None with nothing in flight."""
        board = self.board
        if self.refusal.state is _PAUSED or board.send_next == board.base:
            return None
        return self.recovery.rto_deadline()

    def timer_deadline(self) -> float | None:
        """When a refused stream retries (or gives up after the refusal lasted too long), or
        the recovery's own timer fires (a selective stream's reorder timer or tail probe)."""
        if self.refusal.state is _PAUSED:
            return self.refusal.deadline()
        board = self.board
        if board.send_next == board.base:
            return None
        return self.recovery.rack.timer_at

    def next_deadline(self) -> float | None:
        """The earlier of the two timers (asked after every input)."""
        refusal = self.refusal
        if refusal.state is _PAUSED:
            return refusal.deadline()
        board = self.board
        if board.send_next == board.base:
            return None
        recovery = self.recovery
        rto = recovery.rto_deadline()
        timer = recovery.rack.timer_at
        return rto if timer is None or rto <= timer else timer

    def on_timeout(self, *, now: float) -> list[TransportAction]:
        """The retransmission timer expired (the caller checked): back off, go back N."""
        self.stats.timeouts += 1
        self.rto.on_timeout()
        self.recovery.on_timeout()
        self._loss_event(now)
        self.board.go_back(self.board.base, now=now)
        return self.transmit(now=now)

    def on_timer(self, *, now: float) -> list[TransportAction]:
        """Fire the stream's own timer if due: the recovery's while it may send; while paused,
        fail on a lasting NO_PORT or NO_BUFFER (each with its own reason, never
        ``peer_dead``: the peer answered), else retry with a probe."""
        deadline = self.timer_deadline()
        if deadline is None or now < deadline:
            return []
        refusal = self.refusal
        if refusal.state is not _PAUSED:
            return self.recovery.on_timer(now=now)
        limit = refusal.limit()
        if limit is not None and now >= limit and refusal.reason is not None:
            # The receiver's NACK said it expects ``base`` and refuses all from there: the
            # failed messages' sequence numbers are free for the next ones.
            return self.fail_all(refusal.reason.name.lower())
        refusal.on_retry()
        self.stats.refusal_retries += 1
        return self.transmit(now=now)

    # -- queries ----------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Nothing queued or in flight."""
        return not self.board.packets

    # -- helpers ----------------------------------------------------------------------------

    def _free(self, upto: int, *, now: float, sample: bool) -> list[TransportAction]:
        board = self.board
        count = upto - board.base
        if sample:
            # Karn, widened for cumulative ACKs: a packet sent once but before our last
            # rollback may be covered by an ACK that a later retransmission triggered.
            newest = board.packets[count - 1]
            ambiguous = newest.sends > 1 or newest.last_sent < board.rolled_back_at
            self.rto.on_ack(sent_at=newest.last_sent, now=now, retransmitted=ambiguous)
        # Any newly acknowledged data ends the backoff, also through a NACK's cumulative part:
        # at heavy loss go-back-N progresses almost only by GAP NACKs, and a backoff that
        # only ACKs ended would ratchet up to rto_max while the peer answers every burst.
        self.rto.on_progress()
        self.recovery.before_free(upto, now=now)
        out = board.free(upto)
        self.congestion.on_acked(count)
        if self.refusal.state is not _OPEN:
            self.refusal.clear()
        return out

    def _aborted(self, seq: int, *, now: float) -> list[TransportAction]:
        """The receiver aborted the message holding ``seq`` (all before it arrived): fail it
        (once), make the rest of its fragments SKIP packets and send them from ``seq``."""
        board = self.board
        if seq >= board.next_seq:  # nothing there: the stream was emptied meanwhile
            self.stats.drops["stale_nack"] += 1
            return []
        message = board[seq].message
        out: list[TransportAction] = []
        if not message.orphan:
            message.orphan = True  # reported now; its packets still end silently
            out.append(self._failure(message, "aborted"))
        board.skip(message, seq)
        if self.refusal.state is not _OPEN:
            self.refusal.clear()  # the receiver answered: it is aborting, not refusing
        if board.send_next > seq:  # the receiver rate-limits its ABORTED NACKs
            board.go_back(seq, now=now)
        return out + self.transmit(now=now)

    def _loss_event(self, now: float) -> None:
        if self.congestion.on_loss(now=now, rto=self.rto):
            self.stats.loss_events += 1

    def _failure(self, message: Message, reason: str) -> SendFailed:
        self.stats.failed[reason] += 1
        return SendFailed(message.port, message.handle, self.dst_node, reason)
