"""The receiving side of one stream (GRIM 4.2-4.3, adapted to lossy UDP), and what both sides
of a stream share: the sequence arithmetic and the admission of a new message.

A stream is one (source LC, destination node, destination LC) triple: GRIM 4.3.2's any-to-any
sequencing, so a NACK or a rollback never touches another stream. The receiver owns the
expected sequence number and at most one message being reassembled (GRIM 4.3.3: buffering only
at the sender, whose side is :mod:`nicd.link.sender`). It is sans-IO: inputs take ``now``
keyword-only and return actions; timers are deadlines the caller asks for.

Receiver invariants: ``expected`` only grows; a message is delivered only when its LAST
fragment arrives at ``expected`` after every earlier fragment was taken in order; ``admit`` is
called only for a FIRST fragment at ``expected``; a bad peer is a counted drop, never raised.
Sequence numbers are unbounded in the cores and 32-bit on the wire (:func:`unwrap` maps back).

No silent loss: a receiver that gives up on a message its sender still believes in (the
partial message's reassembly timed out, its port closed, it is longer than ``max_message``)
does not take the rest of it quietly, which would let the sender report it SENT. It aborts it:
``expected`` stays at the first fragment not taken, every packet of the stream that comes is
answered NACK ABORTED (rate-limited by ``nack_repeat_s``) until the sender, which fails that
message, sends its remaining fragments as SKIP packets; those are taken without payload, and
after the LAST the stream goes on. Because ``expected`` cannot pass the aborted message before
the sender has seen an ABORTED NACK, no ACK can ever complete it.

Selective recovery (``recovery="selective"``, RFC 2018/6675): the receiver holds packets that
arrive ahead of ``expected`` (bounded by :class:`~nicd.link.selective.HoldBuffer`, never while
it refuses the stream), takes them in order once the hole is filled, and answers with SACK
instead of a GAP NACK. Any sender handles a SACK (:mod:`nicd.link.recovery`); a go-back-N
receiver never SACKs, so a selective sender talking to it goes back N on its GAP NACKs: mixed
modes interoperate, the receiver decides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from nicd.config import TransportConfig
from nicd.core.actions import Deliver, SendPacket, TransportAction
from nicd.core.stats import TransportStats
from nicd.link.selective import HoldBuffer
from nicd.link.wire import (
    HAS_FIRST,
    HAS_LAST,
    ControlPacket,
    DataPacket,
    MsgType,
    NackReason,
)

__all__ = [
    "NACK_REPEATS",
    "REFUSAL_HOLD",
    "SEQ_MASK",
    "Admission",
    "Admit",
    "GbnReceiver",
    "Verdict",
    "unwrap",
]

SEQ_BITS: Final = 32  # width of the sequence number on the wire
SEQ_MASK: Final = (1 << SEQ_BITS) - 1
_HALF: Final = 1 << (SEQ_BITS - 1)
# fraction of no_buffer_retry_s a refused receiver ignores retransmissions
REFUSAL_HOLD: Final = 0.5
NACK_REPEATS: Final = 4  # a GAP NACK is repeated at most this many times per gap (then the RTO)


class Admission(IntEnum):
    """The receiving port's answer when a new message's FIRST fragment arrives in order."""

    OK = 0
    """Accepted; one receive token of the port is used."""
    NO_BUFFER = 1
    """The port has no receive token: NACK NO_BUFFER, the sender retries (GRIM 4.3.3)."""
    NO_PORT = 2
    """No endpoint is open there: NACK NO_PORT; the sends fail if it lasts."""


Verdict = tuple[Admission, list["TransportAction"]]
"""An admission's answer and the actions it raised (GRIM's translation upcalls), which the
transport returns with its own."""
Admit = Callable[[DataPacket], Verdict]
"""``admit(first)``: called with the FIRST fragment of each message that enters in order
(its port, source, length, type and user arguments decide)."""

_REFUSALS: Final = {
    Admission.NO_BUFFER: NackReason.NO_BUFFER,
    Admission.NO_PORT: NackReason.NO_PORT,
}


def unwrap(wire_seq: int, ref: int) -> int:
    """The unbounded sequence number nearest ``ref`` whose low 32 bits are ``wire_seq``."""
    return ref + ((wire_seq - ref + _HALF) & SEQ_MASK) - _HALF


@dataclass(slots=True)
class _Reassembly:
    first: DataPacket
    """The FIRST fragment: the message's header fields."""
    chunks: list[bytes]
    received: int

    def __init__(self, first: DataPacket, chunks: list[bytes], received: int) -> None:
        self.first = first  # native when compiled (docs/dev/build.md): every message builds one
        self.chunks = chunks
        self.received = received


class GbnReceiver:
    """The receiving side of one stream: expected seq, ACK batching, NACKs, reassembly."""

    def __init__(
        self,
        *,
        node_id: int,
        src_node: int,
        src_port: int,
        dst_port: int,
        config: TransportConfig,
        stats: TransportStats,
        epoch: int = 0,
    ) -> None:
        self.node_id = node_id
        self.epoch = epoch
        """The sender's stream epoch this state belongs to (every control carries it)."""
        self.retired: int | None = None
        """The epoch this stream had before the sender started a new one (its stragglers
        are stale)."""
        self.heard_at = 0.0
        """When a packet of this epoch last arrived (idle eviction)."""
        self.src_node = src_node
        self.src_port = src_port
        self.dst_port = dst_port
        self.config = config
        self.stats = stats
        self.expected = 0
        """Next sequence number this stream accepts."""
        self.unacked = 0
        """Packets taken since the last ACK."""
        self.ack_pending = False
        """An ACK (new or repeated) waits for ``ack_due``."""
        self.ack_due: float | None = None
        """When the pending ACK must go (delayed ACK; now for a repeated one)."""
        self.refusal: NackReason | None = None
        """Set while the port refuses this stream (NO_BUFFER / NO_PORT)."""
        self._refused_at = 0.0
        self._gap_nacked: int | None = None
        """The ``expected`` whose gap was NACKed last."""
        self._gap_repeats = 0
        self.gap_due: float | None = None
        """When the GAP NACK is repeated if the gap persists (None: no repeat pending)."""
        self._reassembly: _Reassembly | None = None
        self.aborting = False
        """The message at ``expected`` was aborted: only SKIP packets are taken until its
        LAST; anything else is answered NACK ABORTED."""
        self._aborted_nack_at = float("-inf")
        self._held: HoldBuffer | None = (
            HoldBuffer(config.window) if config.recovery == "selective" else None
        )
        """Selective recovery: packets that arrived ahead of ``expected``."""

    def on_data(self, p: DataPacket, *, now: float, admit: Admit) -> list[TransportAction]:
        """One data packet of this stream arrived."""
        stats = self.stats
        seq = unwrap(p.seq, self.expected)
        if seq < self.expected:
            stats.drops["duplicate"] += 1
            self.ack_pending = True  # re-ACK at once: our last ACK may have been lost
            self.ack_due = now
            return []
        if seq > self.expected:
            if self.aborting:
                stats.drops["aborted"] += 1
                return self._abort_nack(now)
            if self._held is not None:
                return self._ahead(seq, p, now)
            stats.drops["out_of_order"] += 1
            if self.refusal is None and self._gap_nacked != self.expected:
                self._gap_nacked = self.expected  # once per gap, then repeated by the timer
                self._gap_repeats = 0
                self.gap_due = now + self.config.nack_repeat_s
                return [self._control(MsgType.NACK, NackReason.GAP)]
            return []
        if self.aborting or p.skip:
            return self._skip(p, now)
        held = self._held
        if held is None or not held:
            return self._in_order(p, now, admit)
        out = self._in_order(p, now, admit)
        while self.refusal is None and (q := held.pop(self.expected)) is not None:
            self.stats.recovery["held_taken"] += 1
            out += self._in_order(q, now, admit)
        if self.refusal is not None and held:
            self.stats.recovery["held_discarded"] += held.clear()
        if held and not self.ack_pending:  # tell the sender what is still missing
            self.ack_pending = True
            self.ack_due = now
        return out

    def _ahead(self, seq: int, p: DataPacket, now: float) -> list[TransportAction]:
        """Selective: a packet beyond ``expected``. Hold it if it is within reach and the
        stream is not refused; either way SACK at the end of the burst."""
        held = self._held
        assert held is not None
        recovery = self.stats.recovery
        if self.refusal is not None:
            self.stats.drops["out_of_order"] += 1  # the sender goes back to ``expected``
            return []
        if seq in held:
            self.stats.drops["duplicate"] += 1
        elif not held.fits(seq, self.expected):
            self.stats.drops["beyond_window"] += 1
        else:
            held.hold(seq, p)
            recovery["held"] += 1
        self.ack_pending = True
        self.ack_due = now
        return []

    def _in_order(self, p: DataPacket, now: float, admit: Admit) -> list[TransportAction]:
        """A packet at ``expected``: admission for a FIRST fragment, then reassembly."""
        stats = self.stats
        raised: list[TransportAction] = []
        if p.flags in HAS_FIRST:
            refused, raised = self._start(p, now, admit)
            if refused is not None:
                return refused + raised
        else:
            r = self._reassembly
            if (
                r is None
                or p.offset != r.received
                or p.msg_len != r.first.msg_len
                or p.msg_type is not r.first.msg_type
            ):
                stats.drops["inconsistent"] += 1
                return []
        return raised + self._take(p, now) if raised else self._take(p, now)

    def piggyback(self) -> int | None:
        """The pending ACK rides on a data packet going to our source now: its 32-bit
        cumulative sequence number, the ACK counted as sent; None when none is pending or it
        must be a SACK (held packets need the bitmap, which only the control form carries)."""
        if not self.ack_pending or self._held:
            return None
        self.unacked = 0
        self.ack_pending = False
        self.ack_due = None
        self.stats.acks_sent += 1
        self.stats.acks_piggybacked += 1
        return self.expected & SEQ_MASK

    def ack_is_due(self, now: float) -> bool:
        """Whether an ACK is pending and due at ``now`` (what `take_ack` would send)."""
        return self.ack_pending and (self.ack_due is None or self.ack_due <= now)

    def take_ack(self, now: float) -> SendPacket | None:
        """The pending ACK, if it is due."""
        if not self.ack_is_due(now):
            return None
        return self._control(MsgType.ACK, None)

    def repeat_nack(self, now: float) -> SendPacket | None:
        """The GAP NACK again if its repeat is due and the gap persists (the first, or the
        retransmission it asked for, may have been lost); each repeat doubles the wait, and
        after :data:`NACK_REPEATS` the sender's RTO is left to cover it. Clears or moves
        ``gap_due`` whenever it has passed."""
        due = self.gap_due
        if due is None or now < due:
            return None
        if self._gap_nacked != self.expected or self.refusal is not None:
            self.gap_due = None  # the gap closed (or the stream is refused: no GAP then)
            return None
        self._gap_repeats += 1
        repeats = self._gap_repeats
        self.gap_due = (
            now + self.config.nack_repeat_s * (1 << repeats) if repeats < NACK_REPEATS else None
        )
        self.stats.recovery["nacks_repeated"] += 1
        return self._control(MsgType.NACK, NackReason.GAP)

    def idle(self) -> bool:
        """Nothing of the stream is pending here: no partial or aborted message, no refusal,
        no ACK owed, nothing held, no gap (the state may be evicted)."""
        return (self._reassembly is None and not self.aborting and self.refusal is None
                and not self.ack_pending and not self._held and self.gap_due is None)  # fmt: skip

    def resume(self) -> SendPacket | None:
        """The port can take messages again: NACK RESUME(expected) if we refused the stream."""
        if self.refusal is None:
            return None
        self.refusal = None
        return self._control(MsgType.NACK, NackReason.RESUME)

    def abort(self, cause: str, *, now: float) -> SendPacket | None:
        """Give up on the message being reassembled (``cause``: ``reassembly_timeout``,
        ``port_closed``), counted under ``cause``: NACK ABORTED at once (and again for each
        later packet until the sender skips the rest). None when no message is partial."""
        if self._reassembly is None:
            return None
        self._reassembly = None
        self.stats.drops[cause] += 1
        return self._begin_abort(now)

    def _begin_abort(self, now: float) -> SendPacket:
        self.aborting = True
        self.gap_due = None  # the sender is told ABORTED instead
        if self._held:
            self.stats.recovery["held_discarded"] += self._held.clear()
        self._aborted_nack_at = now
        return self._control(MsgType.NACK, NackReason.ABORTED)

    def _abort_nack(self, now: float) -> list[TransportAction]:
        """A packet of an aborted message that is no SKIP: the sender has not heard; tell it
        again, at most once per ``nack_repeat_s``."""
        if now - self._aborted_nack_at < self.config.nack_repeat_s:
            return []
        self._aborted_nack_at = now
        return [self._control(MsgType.NACK, NackReason.ABORTED)]

    def _skip(self, p: DataPacket, now: float) -> list[TransportAction]:
        """A packet at ``expected`` while aborting, or a SKIP packet."""
        stats = self.stats
        if not p.skip:
            stats.drops["aborted"] += 1
            return self._abort_nack(now)
        if not self.aborting and self._reassembly is not None:
            self._reassembly = None  # the sender aborted it on its own
            stats.drops["abandoned"] += 1
        stats.recovery["skipped"] += 1
        self.expected += 1
        self.gap_due = None
        if p.flags in HAS_LAST:
            self.aborting = False
        return self._count_ack(now, [])

    # -- helpers ----------------------------------------------------------------------------

    def _start(
        self, p: DataPacket, now: float, admit: Admit
    ) -> tuple[list[TransportAction] | None, list[TransportAction]]:
        """A FIRST fragment at ``expected``: admission. Return the refusal's actions (None
        when the message starts or is to be discarded) and those the admission raised."""
        stats = self.stats
        hold = REFUSAL_HOLD * self.config.no_buffer_retry_s
        if self.refusal is not None and now < self._refused_at + hold:
            stats.drops["refused"] += 1
            if self._held:
                stats.recovery["held_discarded"] += self._held.clear()
            return [], []
        if self._reassembly is not None:
            stats.drops["abandoned"] += 1  # only a sender that gave up mid-message does this
            self._reassembly = None
        if p.msg_len > self.config.max_message:
            stats.drops["too_large"] += 1
            self.refusal = None
            return [self._begin_abort(now)], []
        verdict, raised = admit(p)
        reason = _REFUSALS.get(verdict)
        if reason is not None:
            stats.drops[reason.name.lower()] += 1
            self.refusal = reason
            self._refused_at = now
            return [self._control(MsgType.NACK, reason)], raised
        self.refusal = None
        self._reassembly = _Reassembly(p, [], 0)
        return None, raised

    def _take(self, p: DataPacket, now: float) -> list[TransportAction]:
        r = self._reassembly
        assert r is not None  # _start or the consistency check made sure
        r.chunks.append(p.payload)
        r.received += len(p.payload)
        self.expected += 1
        self.gap_due = None  # any gap before this packet is closed
        out: list[TransportAction] = []
        if p.flags in HAS_LAST:
            self._reassembly = None
            first = r.first
            self.stats.delivered += 1
            delivery = Deliver(
                self.dst_port, self.src_node, self.src_port, first.msg_type,
                b"".join(r.chunks), first.am_handler, first.args, first.mcast_group,
            )  # fmt: skip
            out.append(delivery)
        return self._count_ack(now, out)

    def _count_ack(self, now: float, out: list[TransportAction]) -> list[TransportAction]:
        """One more packet taken: ACK now every ``ack_every``, else arm the delayed ACK."""
        self.unacked += 1
        if self.unacked >= self.config.ack_every:
            out.append(self._control(MsgType.ACK, None))
        elif not self.ack_pending:
            self.ack_pending = True
            self.ack_due = now + self.config.ack_delay_s
        return out

    def _control(self, msg_type: MsgType, reason: NackReason | None) -> SendPacket:
        # Every control carries ``expected``, so each one acknowledges all before it.
        self.unacked = 0
        self.ack_pending = False
        self.ack_due = None
        bitmap = 0
        if reason is None:
            self.stats.acks_sent += 1
            if self._held:
                msg_type = MsgType.SACK
                bitmap = self._held.bitmap(self.expected)
                self.stats.recovery["sacks_sent"] += 1
        else:
            self.stats.nacks_sent[reason.name.lower()] += 1
        packet = ControlPacket(
            msg_type, self.expected & SEQ_MASK, self.node_id, self.src_node,
            self.src_port, self.dst_port, reason, b"", bitmap, self.epoch,
        )  # fmt: skip
        return SendPacket(self.src_node, packet)
