"""The send scoreboard of one stream: its packets by sequence number, its messages, and the
window arithmetic over them.

A message is cut into ``ceil(len / mtu)`` packets (at least one) with consecutive sequence
numbers; the NI token on the wire is ``seq & 0xFFFF``. The packets of ``[base, next_seq)``
sit in a deque where index ``i`` holds sequence number ``base + i``: the keys are consecutive,
so the deque is the map from sequence number to packet without the hashing (``board[seq]``).
``[base, send_next)`` is in flight; ``high_sent`` is one past the highest sequence number
ever put on the link. Each packet keeps its first and last send time, its send count, its
transmission order (RACK's clock: every transmission of the stream is numbered) and whether
a SACK said the receiver holds it.

Invariants: ``base <= send_next <= next_seq`` and ``base <= high_sent <= next_seq``; every
packet of ``[base, next_seq)`` stays until a cumulative acknowledgement covers it
(:meth:`Scoreboard.free`) or the stream fails (:meth:`Scoreboard.clear`); a message ends in
exactly one SendComplete (here) or SendFailed (the sender's); a sequence number that was on
the wire is reused only after :meth:`Scoreboard.clear`. Pure: callers pass ``now``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Final

from nicd.core.actions import SendComplete, SendPacket, TransportAction
from nicd.core.stats import TransportStats
from nicd.link.reliable import SEQ_MASK
from nicd.link.rto import Rto
from nicd.link.wire import FRAG_FLAGS, DataPacket, MsgType

__all__ = ["TOKEN_MASK", "Message", "Outgoing", "Scoreboard"]

TOKEN_MASK: Final = 0xFFFF  # w1's token half carries the stream's 16-bit epoch (nicd.link.wire)


@dataclass(slots=True)
class Message:
    """One queued message: its packets are ``[first_seq, last_seq]``."""

    handle: int
    port: int
    first_seq: int
    last_seq: int
    orphan: bool = False
    """Its port closed: already reported failed, still carried to keep the sequence."""

    def __init__(
        self, handle: int, port: int, first_seq: int, last_seq: int, orphan: bool = False
    ) -> None:  # native when compiled (docs/dev/build.md): every message builds one
        self.handle = handle
        self.port = port
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.orphan = orphan


@dataclass(slots=True)
class Outgoing:
    """One packet of the scoreboard and what its transmissions were."""

    packet: DataPacket
    message: Message
    first_sent: float = 0.0
    last_sent: float = 0.0
    sends: int = 0
    order: int = 0
    """When it last went out, as a count of this stream's transmissions (RACK's order)."""
    sacked: bool = False
    """The receiver said (SACK) it holds this packet: not sent again while the mark holds."""

    def __init__(
        self,
        packet: DataPacket,
        message: Message,
        first_sent: float = 0.0,
        last_sent: float = 0.0,
        sends: int = 0,
        order: int = 0,
        sacked: bool = False,
    ) -> None:  # native when compiled (docs/dev/build.md): every packet builds one
        self.packet = packet
        self.message = message
        self.first_sent = first_sent
        self.last_sent = last_sent
        self.sends = sends
        self.order = order
        self.sacked = sacked


class Scoreboard:
    """Packets and messages of one stream, by sequence number, with the window over them."""

    __slots__ = (
        "base", "dst_node", "dst_port", "epoch", "high_sent", "messages", "mtu", "next_seq",
        "node_id",
        "packets", "rollback", "rolled_back_at", "send_next", "sent_order", "src_port", "stats",
    )  # fmt: skip

    def __init__(
        self,
        *,
        node_id: int,
        src_port: int,
        dst_node: int,
        dst_port: int,
        mtu: int,
        stats: TransportStats,
        epoch: int = 0,
    ) -> None:
        self.node_id = node_id
        self.epoch = epoch & TOKEN_MASK
        """The stream epoch every packet carries (w1)."""
        self.src_port = src_port
        self.dst_node = dst_node
        self.dst_port = dst_port
        self.mtu = mtu
        self.stats = stats
        self.packets: deque[Outgoing] = deque()
        """Index ``i`` holds sequence number ``base + i``."""
        self.messages: deque[Message] = deque()
        self.base = 0
        """Oldest unacknowledged sequence number."""
        self.next_seq = 0
        """Sequence number of the next fragment queued."""
        self.send_next = 0
        """Next sequence number to put on the link; ``[base, send_next)`` is in flight."""
        self.high_sent = 0
        """One past the highest sequence number ever put on the link."""
        self.sent_order = 0
        """Transmissions so far (each stamps its packet's ``order``)."""
        self.rollback: tuple[int, float] | None = None
        """The last go-back: to which sequence number, and when."""
        self.rolled_back_at = float("-inf")
        """When ``send_next`` last moved back (a go-back or a refusal)."""

    def __getitem__(self, seq: int) -> Outgoing:
        """The packet with sequence number ``seq`` (in ``[base, next_seq)``)."""
        return self.packets[seq - self.base]

    def __len__(self) -> int:
        return len(self.packets)

    def __bool__(self) -> bool:  # compiled (mypyc), truth ignores __len__: empty is false here
        return bool(self.packets)

    # -- filling and emptying -----------------------------------------------------------------

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
        mtu = self.mtu
        first = self.next_seq
        if len(payload) <= mtu:  # the usual case: one packet, the payload as it is
            message = Message(handle, self.src_port, first, first)
            packet = DataPacket(
                msg_type, FRAG_FLAGS[3], self.epoch, first & SEQ_MASK,
                self.node_id, self.src_port, self.dst_node, self.dst_port,
                len(payload), 0, bytes(payload), mcast_group, am_handler, args,
            )  # fmt: skip
            self.packets.append(Outgoing(packet, message))
            self.next_seq = first + 1
            self.messages.append(message)
            return
        count = -(-len(payload) // mtu)
        message = Message(handle, self.src_port, first, first + count - 1)
        view = memoryview(payload)
        last = count - 1
        for i in range(count):
            flags = FRAG_FLAGS[(i == 0) | (i == last) << 1]
            seq = first + i
            packet = DataPacket(
                msg_type, flags, self.epoch, seq & SEQ_MASK,
                self.node_id, self.src_port, self.dst_node, self.dst_port,
                len(payload), i * mtu, bytes(view[i * mtu : (i + 1) * mtu]),
                mcast_group, am_handler, args,
            )  # fmt: skip
            self.packets.append(Outgoing(packet, message))
        self.next_seq += count
        self.messages.append(message)

    def free(self, upto: int) -> list[TransportAction]:
        """The receiver has everything before ``upto`` (in ``(base, high_sent]``): drop
        those packets; a SendComplete for each message they finish (orphans end silently)."""
        out: list[TransportAction] = []
        packets, messages, stats = self.packets, self.messages, self.stats
        base = self.base
        while base < upto:
            message = packets.popleft().message
            if base == message.last_seq:
                messages.popleft()
                if not message.orphan:
                    stats.completed += 1
                    out.append(SendComplete(message.port, message.handle))
            base += 1
        self.base = base
        if self.send_next < base:
            self.send_next = base
        return out

    def orphan_all(self) -> list[Message]:
        """Mark every message an orphan (its port closed or its peer died) and return those
        that were not yet; drop the messages never on the link (their sequence numbers were
        never seen), keep the rest so the receiver's sequence stays whole."""
        fresh = [m for m in self.messages if not m.orphan]
        for message in self.messages:
            message.orphan = True
        while self.messages and self.messages[-1].first_seq >= self.high_sent:
            message = self.messages.pop()
            for _ in range(message.last_seq - message.first_seq + 1):
                self.packets.pop()
        self.next_seq = self.base + len(self.packets)
        return fresh

    def clear(self) -> list[Message]:
        """Empty the stream (the receiver refused all from ``base`` on); return the messages
        not yet reported failed. Their sequence numbers are reused by the next ones."""
        fresh = [m for m in self.messages if not m.orphan]
        self.messages.clear()
        self.packets.clear()
        self.next_seq = self.send_next = self.high_sent = self.base
        return fresh

    # -- transmissions ------------------------------------------------------------------------

    def send(self, limit: int, *, now: float) -> list[TransportAction]:
        """Put on the link what a window of ``limit`` packets from ``base`` allows, skipping
        what the receiver holds (SACK); count first sends and retransmissions."""
        stop = self.base + limit
        if stop > self.next_seq:  # min() without the call: this runs for every send
            stop = self.next_seq
        send_next = self.send_next
        if send_next >= stop:
            return []
        out: list[TransportAction] = []
        stats, packets, base, dst = self.stats, self.packets, self.base, self.dst_node
        order = self.sent_order
        while send_next < stop:
            entry = packets[send_next - base]
            send_next += 1
            if entry.sacked:  # the receiver holds it (SACK)
                continue
            if entry.sends:
                stats.retransmissions += 1
            else:
                entry.first_sent = now
                stats.data_sent += 1
            entry.sends += 1
            entry.last_sent = now
            order += 1
            entry.order = order
            out.append(SendPacket(dst, entry.packet))
        self.sent_order = order
        self.send_next = send_next
        if send_next > self.high_sent:
            self.high_sent = send_next
        return out

    def resend(self, entry: Outgoing, *, now: float) -> SendPacket:
        """``entry`` goes on the link again now, out of the window's order (a recovery's
        resend); counted as a retransmission."""
        entry.sends += 1
        entry.last_sent = now
        self.sent_order += 1
        entry.order = self.sent_order
        self.stats.retransmissions += 1
        return SendPacket(self.dst_node, entry.packet)

    def go_back(self, seq: int, *, now: float) -> None:
        """Send again from ``seq`` (a GAP NACK, a RESUME, a timeout, a revival)."""
        self.send_next = seq
        self.rollback = (seq, now)
        self.rolled_back_at = now

    def rewind(self, seq: int, *, now: float) -> None:
        """The receiver refused ``seq``: the next send starts there (GRIM 4.2.1), but this is
        no go-back (a NACK repeating it may still roll back)."""
        self.send_next = seq
        self.rolled_back_at = now

    def recent_rollback(self, seq: int, *, now: float, rto: Rto) -> bool:
        """A go-back to ``seq`` happened less than a round trip ago: a duplicated NACK, or one
        answering copies sent before it, must not make us send the window twice."""
        last = self.rollback
        return last is not None and last[0] == seq and now - last[1] < rto.round_trip()

    def skip(self, message: Message, seq: int) -> None:
        """The receiver aborted ``message`` at ``seq``: its packets from ``seq`` to its last
        become SKIP packets (no payload; only their sequence numbers still count)."""
        for index in range(seq - self.base, message.last_seq - self.base + 1):
            entry = self.packets[index]
            if not entry.packet.skip:
                entry.packet = replace(entry.packet, payload=b"", skip=True)
                entry.sacked = False

    def forget_sacks(self) -> None:
        """Drop every SACK mark (the receiver refused and dropped what it held, or the marks
        have become doubtful)."""
        for entry in self.packets:
            entry.sacked = False
