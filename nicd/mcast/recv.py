"""The receiving side of one multicast group at one non-root NIC: sequence from the parent,
reassembly, cumulative ACKs.

Seed 001 §5.3: "only the packets with the expected sequence number for the desired group are
accepted and acknowledged sequentially". Go-back-N as the unicast receiver (DESIGN §4),
with the three ACK kinds of :class:`nicd.link.wire.McastAckKind` in place of ACK/NACK: a duplicate
is dropped and re-acknowledged at once (our ACK may have been lost); a packet beyond the
expected one is dropped and answered by one GAP ACK per gap (the parent rolls that child back
at once instead of waiting for its timeout); a FIRST fragment the host port cannot take (no
receive token) is dropped with a BUSY ACK. Nothing is buffered out of order (GRIM 4.3.3).

Invariants: ``expected`` only grows; a packet is accepted only at ``expected``, from the
group's parent, under the group's epoch; a message is delivered once, when its LAST fragment
is accepted after all earlier ones in order; every accepted packet is acknowledged, at once
after ``ack_every`` packets or ``ack_delay_s`` after the first unacknowledged one. A bad peer
is a counted drop, never raised. Pure: callers pass ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from nicd.core.actions import Deliver, SendPacket
from nicd.link.reliable import Admission, unwrap
from nicd.link.wire import MCAST_EPOCH_MASK, FragFlags, McastAckKind, mcast_ack_packet

if TYPE_CHECKING:
    from collections.abc import Callable

    from nicd.link.wire import DataPacket
    from nicd.mcast.config import McastConfig, McastStats

__all__ = ["McastReceiver", "Verdict"]


class Verdict(Enum):
    """What became of one arriving data packet."""

    ACCEPTED = "accepted"
    """In order and taken: forward it, and deliver if it completed a message."""
    DROPPED = "dropped"
    """Duplicate, out of order, refused or malformed: not forwarded."""


@dataclass(slots=True)
class _Reassembly:
    first: DataPacket
    chunks: list[bytes]
    received: int


class McastReceiver:
    """Receive sequence and ACK state of one group at one non-root node."""

    def __init__(
        self,
        *,
        node_id: int,
        group: int,
        epoch: int,
        parent: int,
        root: int,
        port: int,
        config: McastConfig,
        stats: McastStats,
    ) -> None:
        self.node_id = node_id
        self.group = group
        self.epoch = epoch
        self.parent = parent
        self.root = root
        self.port = port
        self.config = config
        self.stats = stats
        self.expected = 0
        """Next sequence number accepted from the parent (the receive sequence of §5.3)."""
        self.unacked = 0
        """Packets taken since the last ACK."""
        self.ack_due: float | None = None
        """When the pending ACK must go; None with no ACK pending."""
        self._gap_acked: int | None = None
        self._reassembly: _Reassembly | None = None

    def on_data(
        self, p: DataPacket, *, now: float, admit: Callable[[DataPacket], Admission]
    ) -> tuple[Verdict, Deliver | None, list[SendPacket]]:
        """One MCAST_DATA packet for this group arrived. ``admit(first)`` asks the host port
        for a receive token, only for a FIRST fragment at ``expected``. Returns the verdict,
        the delivery it completed, and the ACKs to send now."""
        stats = self.stats
        if p.src_node != self.parent:
            stats.drops["not_from_parent"] += 1
            return Verdict.DROPPED, None, []
        if p.token != self.epoch & MCAST_EPOCH_MASK:
            stats.drops["other_epoch"] += 1  # an old tree's straggler, or a tree we lack yet
            return Verdict.DROPPED, None, []
        seq = unwrap(p.seq, self.expected)
        if seq < self.expected:
            stats.drops["duplicate"] += 1
            self.ack_due = now  # re-ACK at once: our last ACK may have been lost
            return Verdict.DROPPED, None, []
        if seq > self.expected:
            stats.drops["out_of_order"] += 1
            if self._gap_acked != self.expected:
                self._gap_acked = self.expected  # once per gap; the parent's RTO covers loss
                return Verdict.DROPPED, None, [self._ack(McastAckKind.GAP)]
            return Verdict.DROPPED, None, []
        if FragFlags.FIRST in p.flags:
            if p.msg_len > self.config.max_message:
                stats.drops["too_large"] += 1  # a root never sends it: a bad peer
                return Verdict.DROPPED, None, []
            admission = admit(p)
            if admission is not Admission.OK:
                stats.drops[admission.name.lower()] += 1
                return Verdict.DROPPED, None, [self._ack(McastAckKind.BUSY)]
            if self._reassembly is not None:
                stats.drops["abandoned"] += 1
            self._reassembly = _Reassembly(p, [], 0)
        else:
            r = self._reassembly
            if r is None or p.offset != r.received or p.msg_len != r.first.msg_len:
                stats.drops["inconsistent"] += 1
                return Verdict.DROPPED, None, []
        return self._take(p, now)

    def take_ack(self, now: float) -> SendPacket | None:
        """The pending ACK, if it is due."""
        if self.ack_due is None or self.ack_due > now:
            return None
        return self._ack(McastAckKind.ACK)

    # -- helpers --------------------------------------------------------------------------------

    def _take(self, p: DataPacket, now: float) -> tuple[Verdict, Deliver | None, list[SendPacket]]:
        r = self._reassembly
        assert r is not None
        r.chunks.append(p.payload)
        r.received += len(p.payload)
        self.expected += 1
        delivery: Deliver | None = None
        if FragFlags.LAST in p.flags:
            self._reassembly = None
            first = r.first
            self.stats.delivered += 1
            delivery = Deliver(
                self.port, self.root, first.src_port, first.msg_type, b"".join(r.chunks),
                first.am_handler, first.args, self.group,
            )  # fmt: skip
        self.unacked += 1
        acks: list[SendPacket] = []
        if self.unacked >= self.config.ack_every:
            acks.append(self._ack(McastAckKind.ACK))
        elif self.ack_due is None:
            self.ack_due = now + self.config.ack_delay_s
        return Verdict.ACCEPTED, delivery, acks

    def _ack(self, kind: McastAckKind) -> SendPacket:
        # Every ACK carries ``expected``, so each one acknowledges all before it.
        self.unacked = 0
        self.ack_due = None
        self.stats.acks_sent[kind.name.lower()] += 1
        packet = mcast_ack_packet(
            self.group, self.epoch, self.expected, kind, self.node_id, self.parent
        )
        return SendPacket(self.parent, packet)
