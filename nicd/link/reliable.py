"""Go-back-N sender and receiver for one stream (GRIM 4.2-4.3, adapted to lossy UDP), with
selective recovery as an option (``TransportConfig.recovery``).

A stream is one (source LC, destination node, destination LC) triple: GRIM 4.3.2's any-to-any
sequencing, so a NACK or a rollback here never touches another stream. The sender owns the
scoreboard (seq -> packet, first and last send time, send count; the NI token on the wire is
``seq & 0xFFFF``); the receiver owns the expected sequence number and at most one message
being reassembled (GRIM 4.3.3: buffering only at the sender). Both are sans-IO: inputs take
``now`` keyword-only and return actions; timers are deadlines the caller asks for.

Sender invariants: packets carry consecutive sequence numbers; ``base <= send_next <=
next_seq`` and ``base <= high_sent <= next_seq``; every packet in ``[base, next_seq)`` stays in
the scoreboard until a cumulative ACK (or a NACK, whose seq acknowledges all before it)
covers it; a message ends in exactly one SendComplete or SendFailed; a sequence number that
was on the wire is reused only after NO_PORT refusals proved the receiver refuses it.
Receiver invariants: ``expected`` only grows; a message is delivered only when its LAST
fragment arrives at ``expected`` after every earlier fragment was taken in order; ``admit`` is
called only for a FIRST fragment at ``expected``; a bad peer is a counted drop, never raised.
Sequence numbers are unbounded here and 32-bit on the wire (:func:`unwrap` maps back).

Selective recovery (``recovery="selective"``, RFC 2018/6675 and RFC 8985's RACK-TLP in
miniature): the receiver holds packets that arrive ahead of ``expected`` (bounded by
:class:`~nicd.link.selective.HoldBuffer`, never while it refuses the stream), takes them in
order once the hole is filled, and answers with SACK instead of a GAP NACK. Any sender, in
either mode, handles a SACK: it frees what the cumulative part covers and marks the held
packets (never sent again unless a refusal or a long backoff makes the mark doubtful). A
selective sender finds losses by time, not by counting (RACK): every transmission is stamped
with its order, and a packet that went out before the newest one known delivered, and is older
than that one's round trip plus a reordering window (zero until the stream saw reordering, then
SRTT / 4), is lost and goes out again at once; a lost resend is found the same way. When no ACK
or SACK brings news for 2 SRTT plus the delayed-ACK time, it resends its last unacknowledged
packet once (tail-loss probe), so a lost tail is found by the SACK it provokes; the RTO counts
from the last news, so it fires only when the receiver stops answering. A go-back-N receiver
never SACKs, so a selective sender talking to it goes back N on its GAP NACKs: mixed modes
interoperate, the receiver decides.

Longer than 500 lines on purpose: the two halves of one protocol share the sequence arithmetic,
the refusal rules and the control-packet shape, and are read side by side.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

from nicd.core.actions import Deliver, SendComplete, SendFailed, SendPacket
from nicd.link.rto import GRANULARITY_S
from nicd.link.selective import HoldBuffer, sacked
from nicd.link.wire import (
    FRAG_FLAGS,
    HAS_FIRST,
    HAS_LAST,
    ControlPacket,
    DataPacket,
    MsgType,
    NackReason,
)

if TYPE_CHECKING:
    from nicd.config import TransportConfig
    from nicd.core.actions import TransportAction
    from nicd.core.stats import TransportStats
    from nicd.link.rto import Rto

__all__ = [
    "REFUSAL_HOLD",
    "SEQ_MASK",
    "Admission",
    "Admit",
    "GbnReceiver",
    "GbnSender",
    "Verdict",
    "unwrap",
]

SEQ_BITS = 32  # width of the sequence number on the wire
SEQ_MASK = (1 << SEQ_BITS) - 1
_HALF = 1 << (SEQ_BITS - 1)
TOKEN_MASK = 0xFFFF  # the NI token is the low 16 bits of the sequence number
REFUSAL_HOLD = 0.5  # fraction of no_buffer_retry_s a refused receiver ignores retransmissions
RETRY_BACKOFF_CAP = 16  # doublings of the refusal retry delay, at most
TLP_RTTS = 2.0  # a selective sender probes its tail after this many SRTTs without news
SACK_DOUBT_BACKOFF = 2  # after this many timeouts in a row the SACK marks are forgotten


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

_REFUSALS = {Admission.NO_BUFFER: NackReason.NO_BUFFER, Admission.NO_PORT: NackReason.NO_PORT}


def unwrap(wire_seq: int, ref: int) -> int:
    """The unbounded sequence number nearest ``ref`` whose low 32 bits are ``wire_seq``."""
    return ref + ((wire_seq - ref + _HALF) & SEQ_MASK) - _HALF


@dataclass(slots=True)
class _Message:
    handle: int
    port: int
    first_seq: int
    last_seq: int
    orphan: bool = False
    """Its port closed: already reported failed, still carried to keep the sequence."""


@dataclass(slots=True)
class _Outgoing:
    packet: DataPacket
    message: _Message
    first_sent: float = 0.0
    last_sent: float = 0.0
    sends: int = 0
    order: int = 0
    """When it last went out, as a count of this stream's transmissions (RACK's order)."""
    sacked: bool = False
    """The receiver said (SACK) it holds this packet: not sent again while the mark holds."""


class _Rack:
    """RACK's state for one selective stream: the newest transmission known delivered."""

    __slots__ = ("min_rtt", "news_at", "order", "reordering", "rtt", "timer_at")

    def __init__(self) -> None:
        self.order = 0
        """``order`` of the newest delivered transmission (0: none yet)."""
        self.rtt = 0.0
        """Its round trip: from its send to the ACK or SACK that reported it."""
        self.min_rtt = float("inf")
        """Shortest round trip of a packet sent once."""
        self.reordering = False
        """A packet sent once was delivered after one sent later: the network reorders."""
        self.timer_at: float | None = None
        """When a packet not yet old enough to be called lost will be."""
        self.news_at = float("-inf")
        """When an ACK or SACK last reported new data delivered, or a tail probe went: the
        RTO counts from here (RFC 8985 §7.3 re-arms it after the probe)."""

    def delivered(self, entry: _Outgoing, now: float, before: int) -> None:
        """``entry`` was reported delivered at ``now``; ``before`` is ``order`` as it was
        before this ACK (a batch does not compare with itself)."""
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

    def window(self, srtt: float) -> float:
        """The reordering window: none until reordering was seen, then SRTT / 4."""
        return srtt / 4 if self.reordering else 0.0


class GbnSender:
    """The sending side of one stream: scoreboard, window, rollback, timers."""

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
    ) -> None:
        self.node_id = node_id
        self.src_port = src_port
        self.dst_node = dst_node
        self.dst_port = dst_port
        self.config = config
        self.rto = rto
        self.stats = stats
        self._packets: deque[_Outgoing] = deque()  # index i holds seq base + i
        self._messages: deque[_Message] = deque()
        self.base = 0
        """Oldest unacknowledged sequence number."""
        self.next_seq = 0
        """Sequence number of the next fragment queued."""
        self.send_next = 0
        """Next sequence number to put on the link; ``[base, send_next)`` is in flight."""
        self.high_sent = 0
        """One past the highest sequence number ever put on the link."""
        self.cwnd = float(config.window)
        """Effective window (AIMD), within [min(min_window, window), window]."""
        self._cut_until = float("-inf")
        self._rollback: tuple[int, float] | None = None
        self._rolled_back_at = float("-inf")
        self.refusal: NackReason | None = None
        """Why the receiver refused us last (NO_BUFFER / NO_PORT), until progress or RESUME."""
        self._refused_since: float | None = None
        self._paused = False
        self._probing = False
        self._retry_at = 0.0
        self._retries = 0
        self._selective = config.recovery == "selective"
        self._tlp_at: float | None = None
        """When the tail-loss probe goes (selective only; once per stretch without news)."""
        self._sent_order = 0
        """Transmissions so far (each stamps its packet's ``order``)."""
        self._rack = _Rack()
        """Selective: the newest delivered transmission, for time-based loss detection."""

    # -- local requests ---------------------------------------------------------------------

    def queue(
        self,
        *,
        msg_type: MsgType,
        payload: bytes,
        handle: int,
        am_handler: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
        mcast_group: int = 0,
    ) -> None:
        """Fragment a message into ``ceil(len / mtu)`` packets (at least one) and queue them."""
        mtu = self.config.mtu
        first = self.next_seq
        if len(payload) <= mtu:  # the usual case: one packet, the payload as it is
            message = _Message(handle, self.src_port, first, first)
            packet = DataPacket(
                msg_type, FRAG_FLAGS[3], first & TOKEN_MASK, first & SEQ_MASK,
                self.node_id, self.src_port, self.dst_node, self.dst_port,
                len(payload), 0, bytes(payload), mcast_group, am_handler, args,
            )  # fmt: skip
            self._packets.append(_Outgoing(packet, message))
            self.next_seq = first + 1
            self._messages.append(message)
            return
        count = -(-len(payload) // mtu)
        message = _Message(handle, self.src_port, first, first + count - 1)
        view = memoryview(payload)
        last = count - 1
        for i in range(count):
            flags = FRAG_FLAGS[(i == 0) | (i == last) << 1]
            seq = first + i
            packet = DataPacket(
                msg_type, flags, seq & TOKEN_MASK, seq & SEQ_MASK,
                self.node_id, self.src_port, self.dst_node, self.dst_port,
                len(payload), i * mtu, bytes(view[i * mtu : (i + 1) * mtu]),
                mcast_group, am_handler, args,
            )  # fmt: skip
            self._packets.append(_Outgoing(packet, message))
        self.next_seq += count
        self._messages.append(message)

    def transmit(self, *, now: float) -> list[TransportAction]:
        """Put on the link what the window allows (one probe after a refusal retry)."""
        if self._paused or self.send_next >= self.next_seq:
            return []
        limit = 1 if self._probing else int(self.cwnd)
        stop = min(self.next_seq, self.base + limit)
        out: list[TransportAction] = []
        stats = self.stats
        while self.send_next < stop:
            entry = self._packets[self.send_next - self.base]
            if entry.sacked:  # the receiver holds it (SACK)
                self.send_next += 1
                continue
            if entry.sends:
                stats.retransmissions += 1
            else:
                entry.first_sent = now
                stats.data_sent += 1
            self._stamp(entry, now)
            out.append(SendPacket(self.dst_node, entry.packet))
            self.send_next += 1
        self.high_sent = max(self.high_sent, self.send_next)
        if out and self._selective and self._tlp_at is None:
            self._tlp_at = now + self._pto()
        return out

    def close(self, reason: str = "closed") -> list[TransportAction]:
        """The source port closed (or the peer died: ``reason``): every message fails.
        Messages never on the link are dropped (their sequence numbers were never seen); the
        rest stay as orphans and are still carried, so the receiver's sequence stays whole
        (they may still arrive, e.g. to a peer that comes back)."""
        out: list[TransportAction] = [
            self._failure(m, reason) for m in self._messages if not m.orphan
        ]
        for message in self._messages:
            message.orphan = True
        while self._messages and self._messages[-1].first_seq >= self.high_sent:
            message = self._messages.pop()
            for _ in range(message.last_seq - message.first_seq + 1):
                self._packets.pop()
        self.next_seq = self.base + len(self._packets)
        return out

    def revive(self, *, now: float) -> list[TransportAction]:
        """The peer came back after being declared dead: forget the backoff and the refusal,
        go back to ``base`` (orphans first, so the receiver's sequence stays whole)."""
        self._clear_refusal()
        self._forget_sacks()
        self.rto.on_progress()
        self._go_back(self.base, now)
        return self.transmit(now=now)

    def fail_all(self, reason: str) -> list[TransportAction]:
        """Fail every queued and in-flight message (the receiver refused them all from
        ``base`` on); the stream empties and those sequence numbers are reused."""
        out: list[TransportAction] = [
            self._failure(m, reason) for m in self._messages if not m.orphan
        ]
        self._messages.clear()
        self._packets.clear()
        self.next_seq = self.send_next = self.high_sent = self.base
        self._clear_refusal()
        return out

    # -- control packets --------------------------------------------------------------------

    def on_ack(self, seq: int, *, now: float) -> list[TransportAction]:
        """A cumulative ACK: everything before ``seq`` (32-bit, from the wire) arrived."""
        upto = unwrap(seq, self.base)
        if upto > self.high_sent:
            self.stats.drops["ack_beyond_sent"] += 1
            return []
        if upto <= self.base:
            return []  # duplicate or stale: the peer is alive, nothing more
        out = self._free(upto, now=now, sample=True)
        if self._selective:
            out += self._detect_losses(now)
        return out + self.transmit(now=now)

    def on_sack(self, seq: int, bitmap: int, *, now: float) -> list[TransportAction]:
        """A SACK: everything before ``seq`` arrived, and the packets of ``bitmap`` (bit i =
        ``seq + 1 + i``) are held; resend what RACK finds lost (sent before a packet that was
        delivered, and older than its round trip plus the reordering window), then what the
        window allows."""
        upto = unwrap(seq, self.base)
        if upto > self.high_sent:
            self.stats.drops["ack_beyond_sent"] += 1
            return []
        if upto < self.base:
            self.stats.drops["stale_sack"] += 1
            return []
        before = self._rack.order
        out = self._free(upto, now=now, sample=True) if upto > self.base else []
        news = False
        for held in sacked(upto, bitmap):
            if held >= self.high_sent:
                break
            entry = self._packets[held - self.base]
            if not entry.sacked:
                entry.sacked = True
                news = True
                self.stats.recovery["sacked"] += 1
                self._rack.delivered(entry, now, before)
        if news:
            self._on_news(now)
        if not self._paused:
            out += self._detect_losses(now)
        return out + self.transmit(now=now)

    def on_nack(self, reason: NackReason, seq: int, *, now: float) -> list[TransportAction]:
        """A NACK: everything before ``seq`` arrived; ``seq`` was refused for ``reason``."""
        wanted = unwrap(seq, self.base)
        if wanted > self.high_sent:
            self.stats.drops["nack_beyond_sent"] += 1
            return []
        if wanted < self.base:
            self.stats.drops["stale_nack"] += 1
            return []
        out = self._free(wanted, now=now, sample=False) if wanted > self.base else []
        if reason is NackReason.GAP or reason is NackReason.RESUME:
            if reason is NackReason.RESUME:
                self._clear_refusal()
            if self.send_next > wanted and not self._recent_rollback(wanted, now):
                if reason is NackReason.GAP:
                    self._loss_event(now)
                self._go_back(wanted, now)
        else:  # NO_BUFFER / NO_PORT: GRIM 4.2.1 rollback, then wait for RESUME or the retry
            self.send_next = wanted
            self._forget_sacks()  # a refusing receiver drops what it held
            self._rolled_back_at = now
            if self.refusal is not reason or self._refused_since is None:
                self._refused_since = now  # how long *this* refusal lasts
            self.refusal = reason
            if not self._paused:
                self._paused = True
                self._probing = False
                delay = self.config.no_buffer_retry_s * (1 << min(self._retries, RETRY_BACKOFF_CAP))
                cap = max(self.config.no_buffer_retry_s, self.config.rto_max_s)
                self._retry_at = now + min(delay, cap)
        return out + self.transmit(now=now)

    # -- timers -----------------------------------------------------------------------------

    def rto_deadline(self) -> float | None:
        """When the oldest in-flight packet times out; None with nothing in flight."""
        if self._paused or self.send_next == self.base:
            return None
        start = self._packets[0].last_sent
        if self._selective:  # no timeout while SACKs still bring news (RFC 8985 §7.3)
            start = max(start, self._rack.news_at)
        return start + self.rto.value()

    def timer_deadline(self) -> float | None:
        """When a refused stream retries (or gives up after the refusal lasted too long), or
        a selective stream probes its tail."""
        if not self._paused:
            if self.send_next == self.base:
                return None
            tlp, reorder = self._tlp_at, self._rack.timer_at
            if tlp is None or reorder is None:
                return tlp if reorder is None else reorder
            return min(tlp, reorder)
        limit = self._refusal_limit()
        if limit is not None:
            return min(self._retry_at, limit)
        return self._retry_at

    def next_deadline(self) -> float | None:
        """The earlier of the two timers (asked after every input: the usual case, a stream
        with packets in flight and no selective timer, is answered here without calls)."""
        if (
            self._paused or self.send_next == self.base or self._selective
            or self._tlp_at is not None or self._rack.timer_at is not None
        ):  # fmt: skip
            rto = self.rto_deadline()
            other = self.timer_deadline()
            if rto is None or other is None:
                return rto if other is None else other
            return min(rto, other)
        return self._packets[0].last_sent + self.rto.value()

    def on_timeout(self, *, now: float) -> list[TransportAction]:
        """The retransmission timer expired (the caller checked): back off, go back N."""
        self.stats.timeouts += 1
        self.rto.on_timeout()
        if self.rto.backoff >= SACK_DOUBT_BACKOFF:
            self._forget_sacks()  # reneging, or marks from a receiver that restarted
        self._tlp_at = None
        self._rack.timer_at = None
        self._loss_event(now)
        self._go_back(self.base, now)
        return self.transmit(now=now)

    def on_timer(self, *, now: float) -> list[TransportAction]:
        """Fire the refusal timer if due: fail on a lasting NO_PORT or NO_BUFFER (each with
        its own reason, never ``peer_dead``: the peer answered), else retry with a probe."""
        deadline = self.timer_deadline()
        if deadline is None or now < deadline:
            return []
        if not self._paused:
            out: list[TransportAction] = []
            reorder = self._rack.timer_at
            if reorder is not None and now >= reorder:
                out += self._detect_losses(now)
            if self._tlp_at is not None and now >= self._tlp_at:
                out += self._tail_probe(now)
            return out
        limit = self._refusal_limit()
        if limit is not None and now >= limit and self.refusal is not None:
            # The receiver's NACK said it expects ``base`` and refuses all from there: the
            # failed messages' sequence numbers are free for the next ones.
            return self.fail_all(self.refusal.name.lower())
        self._paused = False
        self._probing = True
        self._retries += 1
        self.stats.refusal_retries += 1
        return self.transmit(now=now)

    # -- queries ----------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Nothing queued or in flight."""
        return not self._packets

    def oldest_first_sent(self) -> float | None:
        """When the oldest unacknowledged packet first went out, if it did."""
        if self._packets and self._packets[0].sends:
            return self._packets[0].first_sent
        return None

    # -- helpers ----------------------------------------------------------------------------

    def _refusal_limit(self) -> float | None:
        """When the current refusal has lasted too long, if it is one that can."""
        since = self._refused_since
        if since is None:
            return None
        if self.refusal is NackReason.NO_PORT:
            return since + self.config.no_port_timeout_s
        if self.refusal is NackReason.NO_BUFFER:
            return since + self.config.no_buffer_timeout_s
        return None

    def _free(self, upto: int, *, now: float, sample: bool) -> list[TransportAction]:
        count = upto - self.base
        if sample:
            # Karn, widened for cumulative ACKs: a packet sent once but before our last
            # rollback may be covered by an ACK that a later retransmission triggered.
            newest = self._packets[count - 1]
            ambiguous = newest.sends > 1 or newest.last_sent < self._rolled_back_at
            self.rto.on_ack(sent_at=newest.last_sent, now=now, retransmitted=ambiguous)
        # Any newly acknowledged data ends the backoff, also through a NACK's cumulative part:
        # at heavy loss go-back-N progresses almost only by GAP NACKs, and a backoff that
        # only ACKs ended would ratchet up to rto_max while the peer answers every burst.
        self.rto.on_progress()
        out: list[TransportAction] = []
        rack, before = self._rack, self._rack.order
        for _ in range(count):
            entry = self._packets.popleft()
            if self._selective and not entry.sacked and entry.sends:
                rack.delivered(entry, now, before)
            message = entry.message
            if self.base == message.last_seq:
                self._messages.popleft()
                if not message.orphan:
                    self.stats.completed += 1
                    out.append(SendComplete(message.port, message.handle))
            self.base += 1
        self.send_next = max(self.send_next, self.base)
        if self._selective:
            self._on_news(now)
        self.cwnd = min(float(self.config.window), self.cwnd + count / self.cwnd)
        self._clear_refusal()
        return out

    def _stamp(self, entry: _Outgoing, now: float) -> None:
        """``entry`` goes on the link now."""
        entry.sends += 1
        entry.last_sent = now
        self._sent_order += 1
        entry.order = self._sent_order

    def _on_news(self, now: float) -> None:
        """New data was acknowledged or SACKed: the receiver is hearing us, so the RTO waits
        and the tail-loss probe is armed again from now."""
        self._rack.news_at = now
        self._tlp_at = now + self._pto() if self.send_next > self.base else None

    def _pto(self) -> float:
        """The tail-loss probe's delay: 2 SRTT plus the receiver's delayed-ACK allowance."""
        return TLP_RTTS * self._rtt_guard() + self.config.ack_delay_s

    def _detect_losses(self, now: float) -> list[TransportAction]:
        """RACK (RFC 8985 §6.2): a packet in flight, not SACKed, that went out before the
        newest delivered one and is older than that one's round trip plus the reordering
        window is lost: resend it now (a lost resend too: it is found the same way once a
        later packet is delivered). The earliest one not old enough arms the reorder timer."""
        rack = self._rack
        rack.timer_at = None
        if self._paused or not rack.order:
            return []
        wait = rack.rtt + rack.window(self._rtt_guard()) - GRANULARITY_S
        out: list[TransportAction] = []
        stats = self.stats
        for index in range(self.send_next - self.base):
            entry = self._packets[index]
            if entry.sacked or not entry.sends or entry.order >= rack.order:
                continue
            lost_at = entry.last_sent + wait
            if now < lost_at:
                if rack.timer_at is None or lost_at < rack.timer_at:
                    rack.timer_at = lost_at
                continue
            if entry.sends > 1:
                stats.recovery["resends_lost"] += 1
            self._stamp(entry, now)
            stats.retransmissions += 1
            stats.recovery["holes_resent"] += 1
            out.append(SendPacket(self.dst_node, entry.packet))
        # No window cut here: the held packets keep the window from sliding past the hole
        # anyway, and loss on this link is injected, not congestion (timeouts still cut).
        return out

    def _tail_probe(self, now: float) -> list[TransportAction]:
        """No news for a PTO: resend the last unacknowledged packet on the link once, so the
        receiver's SACK tells us (through RACK) which of the tail were lost (RFC 8985 §7)."""
        self._tlp_at = None
        for index in range(self.send_next - self.base - 1, -1, -1):
            entry = self._packets[index]
            if not entry.sacked and entry.sends:
                self._stamp(entry, now)
                self.stats.retransmissions += 1
                self.stats.recovery["tail_probes"] += 1
                self._rack.news_at = now  # the RTO gives the probe's answer a full RTO
                return [SendPacket(self.dst_node, entry.packet)]
        return []

    def _forget_sacks(self) -> None:
        for entry in self._packets:
            entry.sacked = False

    def _clear_refusal(self) -> None:
        self.refusal = None
        self._refused_since = None
        self._paused = False
        self._probing = False
        self._retries = 0

    def _go_back(self, seq: int, now: float) -> None:
        self.send_next = seq
        self._rollback = (seq, now)
        self._rolled_back_at = now

    def _recent_rollback(self, seq: int, now: float) -> bool:
        # A duplicated NACK, or one answering copies sent before our last rollback to the
        # same seq, must not make us send the window twice.
        last = self._rollback
        return last is not None and last[0] == seq and now - last[1] < self._rtt_guard()

    def _rtt_guard(self) -> float:
        srtt = self.rto.estimator.srtt
        return srtt if srtt is not None else self.rto.estimator.initial_s

    def _loss_event(self, now: float) -> None:
        if now < self._cut_until:
            return  # at most one cut per round trip
        floor = float(min(self.config.min_window, self.config.window))
        self.cwnd = max(floor, self.cwnd / 2)
        self._cut_until = now + self._rtt_guard()
        self.stats.loss_events += 1

    def _failure(self, message: _Message, reason: str) -> SendFailed:
        self.stats.failed[reason] += 1
        return SendFailed(message.port, message.handle, self.dst_node, reason)


@dataclass(slots=True)
class _Reassembly:
    first: DataPacket
    """The FIRST fragment: the message's header fields."""
    chunks: list[bytes]
    received: int
    discard: bool = False
    """Take the fragments in order but deliver nothing (too long, or its port closed)."""


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
    ) -> None:
        self.node_id = node_id
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
        self._reassembly: _Reassembly | None = None
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
            if self._held is not None:
                return self._ahead(seq, p, now)
            stats.drops["out_of_order"] += 1
            if self.refusal is None and self._gap_nacked != self.expected:
                self._gap_nacked = self.expected  # once per gap; the sender's RTO covers loss
                return [self._control(MsgType.NACK, NackReason.GAP)]
            return []
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

    def resume(self) -> SendPacket | None:
        """The port can take messages again: NACK RESUME(expected) if we refused the stream."""
        if self.refusal is None:
            return None
        self.refusal = None
        return self._control(MsgType.NACK, NackReason.RESUME)

    def drop_partial(self) -> None:
        """The port closed: discard the message being reassembled (its later fragments are
        still taken in order, so the stream does not stall)."""
        r = self._reassembly
        if r is not None and not r.discard:
            r.discard = True
            r.chunks.clear()
            self.stats.drops["port_closed"] += 1

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
            self._reassembly = _Reassembly(p, [], 0, discard=True)
            return None, []
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
        if not r.discard:
            r.chunks.append(p.payload)
        r.received += len(p.payload)
        self.expected += 1
        out: list[TransportAction] = []
        if p.flags in HAS_LAST:
            self._reassembly = None
            if r.discard:
                self.stats.drops["discarded_message"] += 1
            else:
                first = r.first
                self.stats.delivered += 1
                delivery = Deliver(
                    self.dst_port, self.src_node, self.src_port, first.msg_type,
                    b"".join(r.chunks), first.am_handler, first.args, first.mcast_group,
                )  # fmt: skip
                out.append(delivery)
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
            self.src_port, self.dst_port, reason, b"", bitmap,
        )  # fmt: skip
        return SendPacket(self.src_node, packet)
