"""Multicast tunables and counters (seed 001 §5; DESIGN §7), shared by the engine and its send
and receive halves."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nicd.config import NicConfig

__all__ = ["McastConfig", "McastStats"]


@dataclass(frozen=True, slots=True)
class McastConfig:
    """Multicast tunables (seed 001 §5; DESIGN §7)."""

    mtu: int = 4096
    """Largest payload per packet; longer messages are fragmented (FIRST/LAST as unicast)."""
    window: int = 64
    """Most unacknowledged packets in flight to one child. Not a credit (§5.4): nothing is
    reserved at the receiver, a sender just stops putting more on the link."""
    ack_every: int = 16
    """A receiver acknowledges at once after this many unacknowledged packets of a group."""
    ack_delay_s: float = 0.001
    """... otherwise this long after the first of them (delayed ACK)."""
    max_retries: int = 8
    """Timeouts in a row with nothing heard from a child before it can be dead
    (McastChildDead), and only after ``dead_child_timeout_s`` of silence too."""
    probe_interval_s: float = 0.1
    """A child's retransmission timer never exceeds this (its resends are the probes the
    child's NIC answers whatever its port does: an ACK, a GAP or a BUSY)."""
    dead_child_timeout_s: float = 3.0
    """Silence of a child with data outstanding, in time this sender's loop ran (a stall of
    ours counts a few probe intervals), before it can be dead."""
    forward_first: bool = False
    """At an internal node, send a completing packet on to the children before delivering
    the message to the host; False delivers first, as the paper does (§5.2)."""
    rto_initial_s: float = 0.05
    """RTO before any sample (only for the estimators this engine makes itself)."""
    rto_min_s: float = 0.004
    """Lower bound of the RTO (idem)."""
    rto_max_s: float = 1.0
    """Upper bound of the RTO and of its backoff (idem)."""
    max_message: int = 1 << 24
    """Largest multicast message in bytes."""
    retired_linger_s: float = 6.0
    """How long a freed (retired) group's receiving side outlives the last packet from its
    old parent (longer than a parent keeps resending to a silent child)."""
    max_retired: int = 256
    """Most retired groups kept; past it the oldest is dropped (``retired_evicted``)."""

    @classmethod
    def for_nic(cls, config: NicConfig) -> McastConfig:
        """The multicast engine's tunables, from the transport's (one MTU, window, RTO)."""
        t = config.transport
        return cls(
            mtu=t.mtu, window=t.window, ack_every=t.ack_every, ack_delay_s=t.ack_delay_s,
            rto_initial_s=t.rto_initial_s, rto_min_s=t.rto_min_s, rto_max_s=t.rto_max_s,
            max_message=config.max_message, forward_first=config.mcast_forward_first,
            probe_interval_s=t.probe_interval_s, dead_child_timeout_s=t.dead_peer_timeout_s,
            retired_linger_s=2 * t.dead_peer_timeout_s,
        )  # fmt: skip


@dataclass(slots=True)
class McastStats:
    """Counters of one engine."""

    data_sent: int = 0
    """Packets put on the link to a child for the first time (one per child per packet)."""
    retransmissions: int = 0
    retransmissions_to: Counter[int] = field(default_factory=Counter)
    """Retransmissions by child node."""
    timeouts: int = 0
    gap_rollbacks: int = 0
    busy_holds: int = 0
    forwarded: int = 0
    """Packets accepted from a parent and kept for children (internal nodes)."""
    delivered: int = 0
    messages_sent: int = 0
    records_released: int = 0
    children_dead: int = 0
    retired: int = 0
    """Groups freed while their sends or old parent's resends could still be under way."""
    retired_packets: int = 0
    """Packets that arrived for a retired group (resends whose ACK was lost, or a message
    a freed communicator's pending call waits for)."""
    retired_evicted: int = 0
    """Retired groups dropped because ``max_retired`` were kept (their messages end now)."""
    acks_sent: Counter[str] = field(default_factory=Counter)
    drops: Counter[str] = field(default_factory=Counter)
