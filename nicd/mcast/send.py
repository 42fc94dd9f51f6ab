"""The sending side of one multicast group at one NIC: shared send records, per-child ACK state.

Seed 001 §5.1-§5.3. The root and every forwarding node keep one send record per packet of the
group, shared by all children: the packet, which children still owe an ACK, and when it last
went to each. Each packet goes to every child by rewriting the destination of a copy (§5.1's
free-callback scheme). Per child: the cumulative acknowledged sequence number, the next one to
put on the link, an RTO (the child's peer estimator with this child's own backoff) and a count
of timeouts without progress. A timeout or a GAP ACK rolls back only that child (go-back-N to
its acknowledged sequence): retransmissions go only to children that have not acknowledged.

Invariants: records hold consecutive sequence numbers ``[base, next_seq)``; a record holds a
child in ``pending`` exactly when the child is live and its ``acked`` <= the record's seq; a
record is released (from the front only, so in order) only when ``pending`` is empty, i.e.
when every live child acknowledged it; a root message ends in exactly one McastDone, when
its LAST record is released; a child is dead (McastChildDead once) and leaves every pending
set when it timed out more than ``max_retries`` times in a row with nothing heard from it
*and* was silent ``dead_child_timeout_s`` of this sender's active time (issue 14: any ACK of
the child is life, its timer never exceeds ``probe_interval_s`` so the resends are probes at a
fixed interval, and a stall of our own loop counts only a few probe intervals). No credits
(§5.4): the only limit is ``window`` packets in flight per child. Sequence numbers are
unbounded here, 32-bit on the wire. Pure: no clock, callers pass ``now``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from emutrace.kinds import K_MCAST_FWD
from nicd.core.actions import McastChildDead, McastDone, SendPacket
from nicd.link.reliable import SEQ_MASK, unwrap
from nicd.link.rto import Rto
from nicd.link.wire import DataPacket, McastAckKind

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from emutrace.recorder import Facts
    from nicd.core.actions import McastAction
    from nicd.link.rto import RttEstimator
    from nicd.mcast.config import McastConfig, McastStats

__all__ = ["STALL_PROBES", "McastSender", "earliest", "rewrite"]

STALL_PROBES = 3
"""A gap between two inputs counts at most this many probe intervals of a child's silence."""


@dataclass(slots=True)
class _Message:
    """A message the root's host handed over once (root only)."""

    port: int
    handle: int
    last_seq: int
    failed: set[int] = field(default_factory=set)


@dataclass(slots=True)
class _Record:
    """One packet of the group: the send record all children share (§5.3)."""

    packet: DataPacket
    """The packet as this node sends it; ``dst_node`` is rewritten per child."""
    seq: int
    pending: set[int]
    """Live children that have not acknowledged it."""
    sent: dict[int, float] = field(default_factory=dict)
    """child -> when it last went to that child."""
    resent: set[int] = field(default_factory=set)
    """Children that got it more than once (Karn: their ACKs are no RTT sample)."""
    message: _Message | None = None
    """The root message this packet ends (on its LAST packet at the root only)."""


@dataclass(slots=True)
class _Child:
    node: int
    rto: Rto
    acked: int
    """Next sequence number the child expects (its cumulative ACK)."""
    send_next: int
    """Next sequence number to put on the link to it."""
    high_sent: int
    """One past the highest sequence number ever sent to it."""
    retries: int = 0
    """Timeouts in a row with nothing heard from the child."""
    quiet_since: float = 0.0
    """The sender's active time of the child's last ACK, or of the start of its timer."""
    timer_start: float | None = None
    """When its retransmission timer started; None with nothing in flight to it."""
    hold_until: float = float("-inf")
    """After a BUSY ACK: send nothing to it before this."""
    rolled_back: tuple[int, float] | None = None
    """(seq, when) of its last rollback: a repeated GAP must not resend the window twice."""


class McastSender:
    """Send records and per-child state of one group at one node (root or forwarder)."""

    def __init__(
        self,
        *,
        node_id: int,
        group: int,
        port: int,
        children: tuple[int, ...],
        first_seq: int,
        config: McastConfig,
        stats: McastStats,
        estimator_for: Callable[[int], RttEstimator],
    ) -> None:
        self.node_id = node_id
        self.group = group
        self.port = port
        """Local host port that hears McastDone / McastChildDead."""
        self.config = config
        self.stats = stats
        self._records: deque[_Record] = deque()
        self.base = first_seq
        """Sequence number of the oldest record kept."""
        self.next_seq = first_seq
        """Sequence number of the next record (the NIC's send sequence of §5.3)."""
        self.children: dict[int, _Child] = {
            c: _Child(c, Rto(estimator_for(c)), first_seq, first_seq, first_seq) for c in children
        }
        """Live children in sending order."""
        self.dead: set[int] = set()
        self._messages: deque[_Message] = deque()
        self.active = 0.0
        """Time this sender's loop ran, input to input, with stalls discounted."""
        self._last_input: float | None = None
        self.trace: Facts | None = None
        """Set while tracing: every packet sent to a child is noted there."""
        self.origin = 0
        """1 at the group's root (its sends originate there), 0 at a forwarder."""

    # -- new packets ----------------------------------------------------------------------------

    def add(self, packet: DataPacket, message: _Message | None = None) -> None:
        """Keep a send record for the next packet (``packet.seq`` must be ``next_seq``)."""
        self._records.append(_Record(packet, self.next_seq, set(self.children), message=message))
        self.next_seq += 1

    def add_message(
        self, packets: list[DataPacket], *, port: int, handle: int
    ) -> list[McastAction]:
        """The root's message, already fragmented: one record per packet, one McastDone."""
        message = _Message(port, handle, self.next_seq + len(packets) - 1)
        self._messages.append(message)
        for i, packet in enumerate(packets):
            self.add(packet, message if i == len(packets) - 1 else None)
        return self._release()

    def transmit(self, *, now: float) -> list[McastAction]:
        """Send each record to every live child the window allows, packet by packet (each
        packet goes to all children before the next one goes to any)."""
        self._tick(now)
        out: list[McastAction] = []
        live = [c for c in self.children.values() if c.hold_until <= now]
        if not live:
            return out
        window = self.config.window
        stats = self.stats
        start = min(c.send_next for c in live)
        stop = min(self.next_seq, max(c.acked for c in live) + window)
        for seq in range(start, stop):
            record = self._records[seq - self.base]
            template = record.packet
            for child in live:
                if child.send_next != seq or seq >= child.acked + window:
                    continue
                node = child.node
                resent = node in record.sent
                if resent:
                    record.resent.add(node)
                    stats.retransmissions += 1
                    stats.retransmissions_to[node] += 1
                else:
                    stats.data_sent += 1
                if self.trace is not None:
                    self.trace.append(
                        (K_MCAST_FWD, self.group, node, seq, int(resent), self.origin)
                    )
                if child.timer_start is None:
                    child.timer_start = now
                    if not child.retries:  # a silence can only start now
                        child.quiet_since = self.active
                record.sent[node] = now
                child.send_next = seq + 1
                child.high_sent = max(child.high_sent, seq + 1)
                out.append(
                    SendPacket(node, rewrite(template, src_node=template.src_node, dst_node=node))
                )
        return out

    # -- acknowledgements ----------------------------------------------------------------------

    def on_ack(
        self, child_id: int, seq: int, kind: McastAckKind, *, now: float
    ) -> list[McastAction]:
        """A cumulative ACK from a child: everything before ``seq`` (32-bit) arrived there."""
        child = self.children.get(child_id)
        if child is None:
            self.stats.drops["ack_from_non_child"] += 1
            return []
        upto = unwrap(seq, child.acked)
        if upto > child.high_sent:
            self.stats.drops["ack_beyond_sent"] += 1
            return []
        self._tick(now)
        child.retries = 0  # any ACK is life: stale, duplicate, GAP or BUSY
        child.quiet_since = self.active
        out: list[McastAction] = []
        if upto > child.acked:
            self._progress(child, upto, now)
            out += self._release()
        elif upto < child.acked:
            self.stats.drops["stale_ack"] += 1
            return []
        if kind is McastAckKind.GAP:
            last = child.rolled_back
            recent = last is not None and last[0] == upto and now - last[1] < self._rtt(child)
            if child.send_next > upto and not recent:
                self.stats.gap_rollbacks += 1
                self._go_back(child, now)
        elif kind is McastAckKind.BUSY:
            # Alive but no receive token: no retry count, resend after one timeout (§5.4:
            # posting receive buffers is the client's duty, as for unicast).
            self.stats.busy_holds += 1
            child.retries = 0
            child.hold_until = now + child.rto.value()
            child.send_next = child.acked
            child.timer_start = None
        return out + self.transmit(now=now)

    # -- timers ---------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The earliest child timer: a retransmission timeout or the end of a BUSY hold."""
        return earliest(self._deadline(c) for c in self.children.values())

    def on_timer(self, *, now: float) -> list[McastAction]:
        """Fire every child timer that has passed: roll that child back, or declare it dead
        (``max_retries`` timeouts in a row and ``dead_child_timeout_s`` of active silence)."""
        self._tick(now)
        out: list[McastAction] = []
        for child in list(self.children.values()):
            deadline = self._deadline(child)
            if deadline is None or deadline > now:
                continue
            if child.timer_start is None:  # a BUSY hold ended: resume (transmit below)
                child.hold_until = float("-inf")
                continue
            self.stats.timeouts += 1
            child.retries += 1
            config = self.config
            silent = self.active - child.quiet_since
            if child.retries > config.max_retries and silent >= config.dead_child_timeout_s:
                out += self.kill(child.node, "retries")
                continue
            child.rto.on_timeout()
            self._go_back(child, now)
        return out + self.transmit(now=now)

    # -- failures -------------------------------------------------------------------------------

    def kill(self, child_id: int, reason: str) -> list[McastAction]:
        """Drop a child for good: it leaves every pending set, its host port hears it once."""
        child = self.children.pop(child_id, None)
        if child is None:
            return []
        self.dead.add(child_id)
        self.stats.children_dead += 1
        for record in self._records:
            record.pending.discard(child_id)
        for message in self._messages:
            if message.last_seq >= child.acked:
                message.failed.add(child_id)
        out: list[McastAction] = [McastChildDead(self.port, self.group, child_id, reason)]
        return out + self._release()

    def close(self, reason: str) -> list[McastAction]:
        """The group is freed or replaced: every unfinished root message ends now."""
        out: list[McastAction] = []
        for message in self._messages:
            owed = {c.node for c in self.children.values() if c.acked <= message.last_seq}
            failed = tuple(sorted(message.failed | owed | self.dead))
            out.append(McastDone(message.port, self.group, message.handle, failed, reason))
        self._messages.clear()
        self._records.clear()
        self.children.clear()
        return out

    # -- queries --------------------------------------------------------------------------------

    @property
    def records(self) -> int:
        """Send records kept (packets some live child has not acknowledged, or behind one)."""
        return len(self._records)

    def pending(self, seq: int) -> frozenset[int]:
        """Children that still owe an ACK for ``seq`` (empty once released)."""
        index = seq - self.base
        if 0 <= index < len(self._records):
            return frozenset(self._records[index].pending)
        return frozenset()

    def acked(self) -> dict[int, int]:
        """Each live child's acknowledged sequence number (next it expects)."""
        return {c.node: c.acked for c in self.children.values()}

    # -- helpers --------------------------------------------------------------------------------

    def _progress(self, child: _Child, upto: int, now: float) -> None:
        newest = self._records[upto - 1 - self.base]
        node = child.node
        sent_at = newest.sent.get(node)
        if sent_at is not None:
            rolled = child.rolled_back
            ambiguous = node in newest.resent or (rolled is not None and sent_at < rolled[1])
            child.rto.on_ack(sent_at=sent_at, now=now, retransmitted=ambiguous)
        child.rto.on_progress()
        for i in range(child.acked - self.base, upto - self.base):
            self._records[i].pending.discard(node)
        child.acked = upto
        child.send_next = max(child.send_next, upto)
        child.retries = 0
        child.hold_until = float("-inf")
        child.timer_start = now if child.send_next > upto else None

    def _release(self) -> list[McastAction]:
        out: list[McastAction] = []
        records = self._records
        while records and not records[0].pending:
            record = records.popleft()
            self.base += 1
            self.stats.records_released += 1
            message = record.message
            if message is not None:
                self._messages.popleft()
                failed = tuple(sorted(message.failed | self.dead))
                reason = "child_dead" if failed else "ok"
                out.append(McastDone(message.port, self.group, message.handle, failed, reason))
        return out

    def _tick(self, now: float) -> None:
        """Advance the active clock; a gap between inputs counts at most a few probe
        intervals (a longer one is our own stall, not the children's silence)."""
        last = self._last_input
        if last is not None and now > last:
            self.active += min(now - last, STALL_PROBES * self.config.probe_interval_s)
        if last is None or now > last:
            self._last_input = now

    def _deadline(self, child: _Child) -> float | None:
        if child.timer_start is not None and child.send_next > child.acked:
            return child.timer_start + min(child.rto.value(), self.config.probe_interval_s)
        if child.hold_until != float("-inf"):
            return child.hold_until
        return None

    def _go_back(self, child: _Child, now: float) -> None:
        child.send_next = child.acked
        child.rolled_back = (child.acked, now)
        child.timer_start = None  # restarts with the first resend
        child.hold_until = float("-inf")

    def _rtt(self, child: _Child) -> float:
        est = child.rto.estimator
        return est.srtt if est.srtt is not None else est.initial_s


def rewrite(p: DataPacket, *, src_node: int, dst_node: int) -> DataPacket:
    """A copy of ``p`` from ``src_node`` to ``dst_node``; nothing else changes (§5.1: a
    replica differs from the packet only in its header's addresses)."""
    return DataPacket(
        p.msg_type, p.flags, p.token, p.seq & SEQ_MASK, src_node, p.src_port, dst_node,
        p.dst_port, p.msg_len, p.offset, p.payload, p.mcast_group, p.am_handler, p.args,
        p.route,
    )  # fmt: skip


def earliest(deadlines: Iterable[float | None]) -> float | None:
    """The smallest deadline that is set, or None."""
    best: float | None = None
    for deadline in deadlines:
        if deadline is not None and (best is None or deadline < best):
            best = deadline
    return best
