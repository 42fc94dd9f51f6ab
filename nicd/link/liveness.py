"""Peer liveness of one NIC: ALIVE, SUSPECT or DEAD for each other node, the PING probes that
decide it, and the active clock they count in (issue 14), as a state table.

Liveness is per peer (QUIC's idle timeout kept alive by PINGs, TCP's zero-window probes, GM's
resumable send queues). Any valid datagram from the peer is life: data, duplicates, ACKs,
NACKs of every reason (a refusing peer is alive), PINGs and PONGs, and what the NIC routes
elsewhere (multicast, reported through ``Transport.heard``). While data to a peer is
outstanding (the peer is *watched*: a stream to it is busy) and nothing came from it for
``probe_interval_s``, it gets a PING at that fixed interval (no backoff); the peer's transport
answers PONG whatever its ports do, and a PONG answering our last PING is an unambiguous RTT
sample. The peer is DEAD when at least ``dead_peer_probes`` probes went unanswered and the
silence lasted ``dead_peer_timeout_s`` of *active* time: time between two of our own inputs
counts at most ``STALL_PROBES`` probe intervals, so a stall of our process is not the peer's
silence. A retransmission timeout only makes the peer SUSPECT; the count is per peer (one
probe round), not per stream. DEAD is recoverable, GM-style: anything heard from the peer makes
it ALIVE again. The legal moves are :data:`PEER_TRANSITIONS` (total: every input is legal in
every state). What a death or a revival does to the streams is the transport's
(:mod:`nicd.link.channels`).

Invariants: a peer is watched (in ``watched``, with a probe timer) exactly while one of our
streams to it is busy and it is not DEAD;
``active`` never runs ahead of our inputs by more than ``STALL_PROBES`` probe intervals per gap;
PINGs to one peer carry distinct ids (mod 2**32). Pure: callers pass ``now``.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

from nicd.config import TransportConfig
from nicd.core.actions import SendPacket
from nicd.core.stats import TransportStats
from nicd.link.rto import RttEstimator
from nicd.link.sender import StreamKey
from nicd.link.wire import ControlPacket, MsgType

__all__ = [
    "END_STATES",
    "PEER_TRANSITIONS",
    "STALL_PROBES",
    "Liveness",
    "Peer",
    "PeerEvent",
    "PeerState",
]

_U32: Final = 0xFFFFFFFF
STALL_PROBES: Final = 3
"""A gap between two inputs counts at most this many probe intervals of a peer's silence."""


class PeerState(Enum):
    """What this NIC believes about another node."""

    ALIVE = "alive"
    SUSPECT = "suspect"
    DEAD = "dead"


class PeerEvent(Enum):
    """Inputs of the liveness machine."""

    HEARD = "heard"
    """Any valid datagram arrived from the peer."""
    TIMEOUT = "timeout"
    """A retransmission timer towards the peer expired, or a probe went unanswered."""
    EXPIRED = "expired"
    """Enough probes went unanswered over enough active silence (checked at a probe)."""


PEER_TRANSITIONS: dict[tuple[PeerState, PeerEvent], PeerState] = {
    (PeerState.ALIVE, PeerEvent.HEARD): PeerState.ALIVE,
    (PeerState.ALIVE, PeerEvent.TIMEOUT): PeerState.SUSPECT,
    (PeerState.ALIVE, PeerEvent.EXPIRED): PeerState.DEAD,  # dead_peer_probes == 0
    (PeerState.SUSPECT, PeerEvent.HEARD): PeerState.ALIVE,
    (PeerState.SUSPECT, PeerEvent.TIMEOUT): PeerState.SUSPECT,
    (PeerState.SUSPECT, PeerEvent.EXPIRED): PeerState.DEAD,
    (PeerState.DEAD, PeerEvent.HEARD): PeerState.ALIVE,  # it came back (GM: resume)
    (PeerState.DEAD, PeerEvent.TIMEOUT): PeerState.DEAD,
    (PeerState.DEAD, PeerEvent.EXPIRED): PeerState.DEAD,
}
END_STATES: frozenset[PeerState] = frozenset()
"""States no input leaves: none (DEAD is left when the peer is heard again)."""


class Peer:
    """What this NIC knows of one other node."""

    __slots__ = (
        "busy", "last_heard", "node", "ping_at", "ping_id", "probe_at", "probes", "quiet_since",
        "rtt", "state", "timeouts",
    )  # fmt: skip

    def __init__(self, node: int, rtt: RttEstimator) -> None:
        self.node = node
        self.rtt = rtt
        """The path's RTT estimate, shared by every stream towards the peer."""
        self.state = PeerState.ALIVE
        self.last_heard: float | None = None
        self.timeouts = 0
        """Retransmission timeouts since we last heard from it."""
        self.busy: set[StreamKey] = set()
        """Our streams to it with data queued or in flight (it is watched while any)."""
        self.probe_at: float | None = None
        """When the next PING goes (watched only)."""
        self.probes = 0
        """PINGs sent since we last heard from it."""
        self.quiet_since = 0.0
        """Active time (:attr:`Liveness.active`) of the last life or the start of the watch."""
        self.ping_id = 0
        """Id of the last PING sent to it (unique per peer: a PONG echoes it)."""
        self.ping_at: float | None = None
        """When that PING went, until its PONG gives an RTT sample."""


class Liveness:
    """Every peer of node ``node_id``: states, probe timers, the active clock."""

    __slots__ = ("_last_input", "active", "config", "node_id", "peers", "stats", "watched")

    def __init__(self, node_id: int, config: TransportConfig, stats: TransportStats) -> None:
        self.node_id = node_id
        self.config = config
        self.stats = stats
        self.peers: dict[int, Peer] = {}
        self.watched: dict[int, Peer] = {}
        """Peers with a probe timer (a stream to them is busy)."""
        self.active = 0.0
        """Time our loop ran, from input to input, with stalls discounted (see module doc)."""
        self._last_input: float | None = None

    # -- inputs -------------------------------------------------------------------------------

    def tick(self, *, now: float) -> None:
        """An input at ``now``: advance the active clock. A gap between inputs counts at most
        a few probe intervals (a longer one is our own stall, not the peers' silence)."""
        last = self._last_input
        if last is not None and now > last:
            cap = STALL_PROBES * self.config.probe_interval_s
            gap = now - last
            if gap > cap:
                self.stats.stalls += 1
                gap = cap
            self.active += gap
        if last is None or now > last:
            self._last_input = now

    def heard(self, node: int, *, now: float) -> bool:
        """A valid datagram from ``node`` arrived: it is alive. True when it was DEAD (the
        caller revives its streams)."""
        self.tick(now=now)
        peer = self.peers.get(node)
        if peer is None:
            peer = self.peer(node)
        peer.last_heard = now
        peer.timeouts = 0
        peer.probes = 0
        peer.quiet_since = self.active
        if peer.probe_at is not None:
            peer.probe_at = now + self.config.probe_interval_s
        if peer.state is not PeerState.DEAD:
            if peer.state is not PeerState.ALIVE:
                self.move(peer, PeerEvent.HEARD)
            return False
        self.move(peer, PeerEvent.HEARD)
        self.stats.peers_revived += 1
        return True

    def on_timeout(self, peer: Peer) -> None:
        """A retransmission timer towards ``peer`` expired."""
        peer.timeouts += 1
        self.move(peer, PeerEvent.TIMEOUT)

    def on_busy(self, key: StreamKey, *, now: float) -> None:
        """Our stream ``key`` has data queued or in flight: its peer is watched from now on if
        it was not (silence is counted from now at the earliest, the first probe goes a probe
        interval from now)."""
        peer = self.peers[key[1]]  # (src_port, dst_node, dst_port)
        if not peer.busy:
            peer.probes = 0
            peer.quiet_since = self.active
            peer.probe_at = now + self.config.probe_interval_s
            self.watched[peer.node] = peer
        peer.busy.add(key)

    def on_idle(self, key: StreamKey) -> None:
        """Our stream ``key`` is idle (or its peer dead): the peer is no longer watched once
        no stream to it is busy."""
        peer = self.peers[key[1]]  # (src_port, dst_node, dst_port)
        busy = peer.busy
        if key in busy:
            busy.discard(key)
            if not busy:
                peer.probe_at = None
                self.watched.pop(peer.node, None)

    def probe(self, peer: Peer, *, now: float) -> SendPacket | None:
        """``peer``'s probe is due: declare it DEAD if its silence is past both limits (return
        None: the caller fails its streams), else PING it again (fixed interval)."""
        c = self.config
        if peer.probes >= c.dead_peer_probes and self.active - peer.quiet_since >= (
            c.dead_peer_timeout_s
        ):
            self.move(peer, PeerEvent.EXPIRED)
            peer.probe_at = None
            self.watched.pop(peer.node, None)
            return None
        peer.probes += 1
        if peer.probes == 1:
            self.move(peer, PeerEvent.TIMEOUT)
        peer.probe_at = now + c.probe_interval_s
        self.stats.probes_sent += 1
        peer.ping_id = (peer.ping_id + 1) & _U32
        peer.ping_at = now
        return self._packet(MsgType.PING, peer.node, peer.ping_id)

    def on_ping(self, packet: ControlPacket) -> SendPacket:
        """A PING: the PONG answering it (whatever our ports do)."""
        self.stats.probes_answered += 1
        return self._packet(MsgType.PONG, packet.from_node, packet.seq)

    def on_pong(self, packet: ControlPacket, *, now: float) -> None:
        """A PONG answering our last PING is an unambiguous RTT sample: a stream whose every
        ACK is ambiguous (go-back-N under heavy loss, Karn's rule) still learns the peer's RTT
        instead of waiting on the initial RTO for the whole run."""
        peer = self.peers.get(packet.from_node)
        if peer is None or peer.ping_at is None or packet.seq != peer.ping_id:
            return
        peer.rtt.on_sample(now - peer.ping_at)
        peer.ping_at = None

    def move(self, peer: Peer, event: PeerEvent) -> None:
        """Take the move ``event`` makes from ``peer``'s state (the table is total)."""
        if peer.state in END_STATES:
            return
        peer.state = PEER_TRANSITIONS[(peer.state, event)]

    # -- queries ------------------------------------------------------------------------------

    def peer(self, node: int) -> Peer:
        """``node``'s record, made on first use (ALIVE, a fresh RTT estimate)."""
        peer = self.peers.get(node)
        if peer is None:
            c = self.config
            rtt = RttEstimator(initial_s=c.rto_initial_s, min_s=c.rto_min_s, max_s=c.rto_max_s)
            peer = self.peers[node] = Peer(node, rtt)
        return peer

    def state(self, node: int) -> PeerState:
        """What we believe about ``node`` (ALIVE until proven otherwise)."""
        peer = self.peers.get(node)
        return PeerState.ALIVE if peer is None else peer.state

    def stats_by_peer(self) -> dict[str, object]:
        """Each peer's state, RTT estimate and silence counts, JSON-able, by node."""
        return {
            str(node): {
                "state": peer.state.value,
                "srtt": peer.rtt.srtt,
                "rttvar": peer.rtt.rttvar,
                "rto": peer.rtt.rto(),
                "rtt_samples": peer.rtt.samples,
                "karn_ignored": peer.rtt.ignored,
                "timeouts_in_row": peer.timeouts,
                "probes_unanswered": peer.probes,
            }
            for node, peer in sorted(self.peers.items())
        }

    # -- helpers ------------------------------------------------------------------------------

    def _packet(self, msg_type: MsgType, node: int, seq: int) -> SendPacket:
        packet = ControlPacket(msg_type, seq & _U32, self.node_id, node, 0, 0, None)
        return SendPacket(node, packet)
