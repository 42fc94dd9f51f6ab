"""Logical channels of one NIC: a stream per (source LC, destination node, destination LC),
the peers' liveness beside them, and the transport's merged timer.

A port is a GM endpoint and a GRIM logical channel at once. Sequencing is any-to-any (GRIM
4.3.2): outgoing streams (:class:`~nicd.link.sender.StreamSender`) are keyed by
:class:`StreamKey`, incoming ones (:class:`~nicd.link.reliable.GbnReceiver`) by
:class:`RecvKey`, and every ACK/NACK names its stream, so a rollback on one stream never touches
another. :class:`Transport` routes each input to its streams and to the peers' liveness
(:mod:`nicd.link.liveness`), and does what liveness decides to the streams: a peer is watched
while a stream to it is busy; when it is declared DEAD the messages in flight fail
``peer_dead`` and stay failed (their packets are kept as orphans so the sequence stays whole),
new sends to it fail at once while it is DEAD, and when it is heard again the orphans go out
again and new sends work. Incoming streams that never took a packet are forgotten after
``idle_stream_s``.

Stream epochs: each outgoing stream instance has a 16-bit epoch (from ``epoch_seed`` on, one
per instance), carried by its packets; every control answering it carries it back, and a
control or piggy-backed ACK of another epoch is a counted drop (``stale_epoch``). So idle
state can go: an outgoing stream with nothing in flight for ``idle_stream_s / 2`` is retired
and the next message on it starts a new epoch at sequence 0; an incoming stream silent for
``idle_stream_s`` that owes nothing is evicted; a receiver seeing a new epoch (not
ESTABLISHED) replaces its state. A packet of an ESTABLISHED epoch the receiver has no state
for (its nicd restarted: peer reset, or it evicted the stream) is answered NACK RESET: the
sender fails every message in flight on that stream ``peer_reset`` (naming the node, never
SENT, never retried) and the next message starts a new epoch.

Invariants: every message handed to :meth:`Transport.send` ends in exactly one SendComplete or
SendFailed (``peer_dead``, ``no_port``, ``no_buffer``, ``closed``, ``aborted``,
``peer_reset``); a DEAD peer has no busy
stream and no probe timer, and new sends to it fail at once; PeerDead is emitted once per
death; ``next_deadline`` is the minimum of the busy streams' and the probe timers, and
``on_timer`` clears or moves every deadline it finds passed, so a caller never spins; a bad or
unexpected packet is a counted drop.

Over 500 lines because every input here reads and writes the same stream tables (senders,
busy, receivers, pending ACKs, gaps, refusals): split, the halves would share them all.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Final, TypeAlias

from nicd.config import TransportConfig
from nicd.core.actions import PeerDead, SendFailed, SendPacket, TransportAction
from nicd.core.stats import TransportStats
from nicd.errors import UsageError
from nicd.link.liveness import Liveness, Peer, PeerState
from nicd.link.recovery import RECOVERIES
from nicd.link.reliable import Admission, Admit, GbnReceiver
from nicd.link.rto import Rto, RttEstimator
from nicd.link.sender import StreamKey, StreamSender
from nicd.link.wire import (
    MAX_NODE,
    MAX_PORT,
    ControlPacket,
    DataPacket,
    MsgType,
    NackReason,
    encode_data,
)

__all__ = [
    "Admission",
    "Admit",
    "RecvKey",
    "StreamKey",
    "Transport",
]

_U16: Final = 0xFFFF
_U32: Final = 0xFFFFFFFF


RecvKey: TypeAlias = tuple[int, int, int]
"""An incoming stream ``(src_node, src_port, dst_port)``: from LC ``src_port`` of ``src_node``
to local LC ``dst_port``. A plain tuple, as :data:`~nicd.link.sender.StreamKey` is."""


class Transport:
    """The reliable transport of node ``node_id``: every stream in and out, sans-IO."""

    def __init__(self, node_id: int, config: TransportConfig, admit: Admit) -> None:
        _check_config(config)
        self.node_id = node_id
        self.config = config
        self._admit = admit
        self._stats = TransportStats()
        self.liveness = Liveness(node_id, config, self._stats)
        """The peers: ALIVE, SUSPECT or DEAD, probed while a stream to them is busy."""
        self._peers = self.liveness.peers
        self._senders: dict[StreamKey, StreamSender] = {}
        self._busy: dict[StreamKey, StreamSender] = {}  # senders with packets queued or in flight
        self._receivers: dict[RecvKey, GbnReceiver] = {}
        self._pending_acks: dict[RecvKey, GbnReceiver] = {}
        self._refused: dict[int, dict[RecvKey, GbnReceiver]] = {}  # by local port
        self._control_handlers: dict[
            MsgType, Callable[[StreamSender, ControlPacket, float], list[TransportAction]]
        ] = {MsgType.ACK: self._on_ack, MsgType.NACK: self._on_nack, MsgType.SACK: self._on_sack}
        self._gaps: dict[RecvKey, GbnReceiver] = {}
        """Incoming streams whose GAP NACK may be repeated (``gap_due`` set)."""
        self._initial: dict[RecvKey, float] = {}
        """Incoming streams that never took a packet, with when one last came: evictable."""
        self._sweep_at: float | None = None
        self._next_epoch = config.epoch_seed & _U16
        self._collect_at = 0.0
        """When new streams next trigger an eviction of idle ones (at most every idle/2)."""

    # -- local requests ---------------------------------------------------------------------

    def send(
        self,
        *,
        now: float,
        src_port: int,
        dst_node: int,
        dst_port: int,
        msg_type: MsgType,
        payload: bytes,
        handle: int,
        am_handler: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
        mcast_group: int = 0,
    ) -> list[TransportAction]:
        """Queue a message on its stream and transmit what the window allows.

        Raise UsageError for fields that do not fit the wire or a message longer than
        ``config.max_message``; a DEAD destination gives SendFailed ``peer_dead`` at once.
        """
        self._check_send(src_port, dst_node, dst_port, payload, am_handler, args, mcast_group)
        liveness = self.liveness
        liveness.tick(now=now)
        peer = liveness.peer(dst_node)
        if peer.state is PeerState.DEAD:
            self._stats.failed["peer_dead"] += 1
            return [SendFailed(src_port, handle, dst_node, "peer_dead")]
        key = (src_port, dst_node, dst_port)
        sender = self._senders.get(key)
        if (
            sender is not None
            and not sender.board.packets
            and (now - sender.used_at >= self.config.idle_stream_s / 2)
        ):  # idle long enough that its receiver may forget it: a new epoch from here
            del self._senders[key]
            self._stats.streams_retired += 1
            sender = None
        if sender is None:
            self._collect(now)
            epoch = self._next_epoch
            self._next_epoch = (epoch + 1) & _U16
            sender = StreamSender(
                node_id=self.node_id, src_port=src_port, dst_node=dst_node, dst_port=dst_port,
                config=self.config, rto=Rto(peer.rtt), stats=self._stats, epoch=epoch,
            )  # fmt: skip
            self._senders[key] = sender
        sender.used_at = now
        sender.board.queue(
            msg_type=msg_type, payload=payload, handle=handle,
            am_handler=am_handler, args=args, mcast_group=mcast_group,
        )  # fmt: skip
        self._busy[key] = sender
        liveness.on_busy(key, now=now)
        return sender.transmit(now=now)

    def resume_port(self, port: int, *, now: float) -> list[TransportAction]:
        """Receive tokens came back (or ``port`` opened): NACK RESUME every stream into it
        that was refused. Cheap when none was."""
        refused = self._refused.pop(port, None)
        if not refused:
            return []
        out: list[TransportAction] = []
        for key, receiver in refused.items():
            action = receiver.resume()
            if action is not None:
                out.append(action)
            self._pending_acks.pop(key, None)  # the RESUME carries the cumulative ACK
        return out

    def close_port(self, port: int, *, now: float) -> list[TransportAction]:
        """Local ``port`` closed: its sends fail ``closed``; partial messages into it are
        aborted (their senders' requests fail ``aborted``, never SENT)."""
        out: list[TransportAction] = []
        for key, sender in self._senders.items():
            if key[0] == port:  # (src_port, dst_node, dst_port)
                out += sender.close()
                self._track_sender(key, sender, now)
        for rkey, receiver in self._receivers.items():
            if rkey[2] == port:  # (src_node, src_port, dst_port)
                out += self._abort(rkey, receiver, "port_closed", now)
        return out

    def abort_partial(
        self, src_node: int, src_port: int, dst_port: int, *, now: float
    ) -> list[TransportAction]:
        """Give up on the message being reassembled on that incoming stream (its sender went
        silent past the reassembly timeout): NACK ABORTED, so its sender fails it instead of
        reporting it SENT; the stream goes on once the sender skipped the rest."""
        key = (src_node, src_port, dst_port)
        receiver = self._receivers.get(key)
        if receiver is None:
            return []
        return self._abort(key, receiver, "reassembly_timeout", now)

    def _abort(
        self, key: RecvKey, receiver: GbnReceiver, cause: str, now: float
    ) -> list[TransportAction]:
        action = receiver.abort(cause, now=now)
        if action is None:
            return []
        self._pending_acks.pop(key, None)  # the NACK carries the cumulative ACK
        return [action]

    # -- packets ----------------------------------------------------------------------------

    def on_data(self, packet: DataPacket, *, now: float) -> list[TransportAction]:
        """A data packet addressed to this node arrived (with a piggy-backed ACK of our
        stream back to its source, maybe: taken first, as an ACK control would be)."""
        node = packet.src_node
        out = self._revive(node, now) if self.liveness.heard(node, now=now) else []
        if packet.ack is not None:
            back = (packet.dst_port, packet.src_node, packet.src_port)
            sender = self._senders.get(back)
            if sender is None:
                self._stats.drops["unknown_stream"] += 1
            elif packet.ack_epoch != sender.epoch:
                self._stats.drops["stale_epoch"] += 1
            else:
                self._stats.acks_received += 1
                if packet.ack:  # the receiver took something: it holds the stream's state
                    sender.established = True
                out += sender.on_ack(packet.ack, now=now)
                self._track_sender(back, sender, now)
        key = (packet.src_node, packet.src_port, packet.dst_port)
        receiver = self._receivers.get(key)
        if receiver is None or receiver.epoch != packet.token:
            if receiver is not None and receiver.retired == packet.token:
                self._stats.drops["stale_epoch"] += 1
                return out
            if packet.established:  # the sender counts on state this node does not have
                return [*out, self._reset(packet)]
            receiver = self._new_receiver(key, packet, receiver, now)
        receiver.heard_at = now
        out += receiver.on_data(packet, now=now, admit=self._admit)
        if receiver.expected == 0:  # nothing taken yet: garbage, a gap, or refused at once
            self._initial[key] = now
            if self._sweep_at is None:
                self._sweep_at = now + self.config.idle_stream_s
        if receiver.ack_pending:
            self._pending_acks[key] = receiver
        else:
            self._pending_acks.pop(key, None)
        if receiver.gap_due is not None:
            self._gaps[key] = receiver
        elif self._gaps:
            self._gaps.pop(key, None)
        if receiver.refusal is not None:
            self._refused.setdefault(packet.dst_port, {})[key] = receiver
        else:
            refused = self._refused.get(packet.dst_port)
            if refused is not None:
                refused.pop(key, None)
        return out

    def datagram(self, packet: DataPacket) -> bytes:
        """``packet`` (of a transport stream) goes on the link now: its bytes, with the ACK
        pending on the reverse stream (from its destination back to its source port)
        riding on it if one is, and ESTABLISHED once its epoch was acknowledged."""
        sender = self._senders.get((packet.src_port, packet.dst_node, packet.dst_port))
        established = sender is not None and sender.established and sender.epoch == packet.token
        pending = self._pending_acks
        if not pending:
            return encode_data(packet, None, 0, established)
        key = (packet.dst_node, packet.dst_port, packet.src_port)
        receiver = pending.get(key)
        if receiver is None:
            return encode_data(packet, None, 0, established)
        ack = receiver.piggyback()
        if not receiver.ack_pending:
            del pending[key]
        return encode_data(packet, ack, receiver.epoch, established)

    def on_control(self, packet: ControlPacket, *, now: float) -> list[TransportAction]:
        """An ACK, NACK, PING or PONG arrived; anything else is a counted drop."""
        drops = self._stats.drops
        msg_type = packet.msg_type
        handler = self._control_handlers.get(msg_type)
        if handler is None and msg_type is not MsgType.PING and msg_type is not MsgType.PONG:
            drops["unexpected_control"] += 1
            return []
        if packet.to_node != self.node_id:
            drops["misrouted"] += 1
            return []
        node = packet.from_node
        out = self._revive(node, now) if self.liveness.heard(node, now=now) else []
        if handler is None:
            if msg_type is MsgType.PING:  # answered here, whatever our ports do
                out.append(self.liveness.on_ping(packet))
            else:
                self.liveness.on_pong(packet, now=now)
            return out
        key = (packet.src_port, packet.from_node, packet.dst_port)
        sender = self._senders.get(key)
        if sender is None:
            drops["unknown_stream"] += 1
            return out
        if packet.epoch != sender.epoch:
            drops["stale_epoch"] += 1
            return out
        if packet.reason is NackReason.RESET:  # the receiver lost this stream's state
            self._stats.nacks_received["reset"] += 1
            out += sender.fail_all("peer_reset")
            del self._senders[key]
            self._busy.pop(key, None)
            self.liveness.on_idle(key)
            return out
        if packet.seq:  # the receiver took something of this epoch: it holds its state
            sender.established = True
        out += handler(sender, packet, now)
        self._track_sender(key, sender, now)
        return out

    def heard(self, node: int, *, now: float) -> list[TransportAction]:
        """A valid datagram from ``node`` arrived (the NIC calls this for every one, also
        those it routes elsewhere): the peer is alive; a DEAD one is usable again (its
        orphaned packets go out again, so the streams' sequences stay whole)."""
        return self._revive(node, now) if self.liveness.heard(node, now=now) else []

    def _revive(self, node: int, now: float) -> list[TransportAction]:
        """``node`` was DEAD and was heard: its streams go on from ``base``."""
        out: list[TransportAction] = []
        for key, sender in self._senders.items():
            if key[1] == node and sender.board.packets:  # key: (src_port, dst_node, dst_port)
                out += sender.revive(now=now)
                self._busy[key] = sender
                self.liveness.on_busy(key, now=now)
        return out

    # -- timers -----------------------------------------------------------------------------

    def on_timer(self, *, now: float) -> list[TransportAction]:
        """Fire every stored deadline that has passed."""
        liveness = self.liveness
        liveness.tick(now=now)
        out: list[TransportAction] = []
        for peer in list(liveness.watched.values()):
            if peer.probe_at is not None and now >= peer.probe_at:
                ping = liveness.probe(peer, now=now)
                out += self._declare_dead(peer) if ping is None else [ping]
        for key, sender in list(self._busy.items()):
            deadline = sender.rto_deadline()
            if deadline is not None and now >= deadline:
                liveness.on_timeout(self._peers[key[1]])  # key: (src_port, dst_node, dst_port)
                out += sender.on_timeout(now=now)
            out += sender.on_timer(now=now)
            self._track_sender(key, sender, now)
        if self._gaps:
            out += self._repeat_nacks(now)
        if self._pending_acks:
            out += self.flush(now=now)
        if self._sweep_at is not None and now >= self._sweep_at:
            self._evict_idle(now)
        return out

    def ack_due(self, now: float) -> bool:
        """Whether `flush` at ``now`` would emit an ACK (one is pending and due)."""
        return any(receiver.ack_is_due(now) for receiver in self._pending_acks.values())

    def flush(self, *, now: float) -> list[TransportAction]:
        """Emit the held-back ACKs that are due (the shell calls this after a burst; the
        timer calls it for delayed ones)."""
        out: list[TransportAction] = []
        for key, receiver in list(self._pending_acks.items()):
            action = receiver.take_ack(now)
            if action is not None:
                out.append(action)
            if not receiver.ack_pending:
                del self._pending_acks[key]
        return out

    def next_deadline(self) -> float | None:
        """The earliest timer of any stream (retransmission or delayed ACK), or None."""
        best = self._sweep_at
        for sender in self._busy.values():
            d = sender.next_deadline()
            if d is not None and (best is None or d < best):
                best = d
        for peer in self.liveness.watched.values():
            d = peer.probe_at
            if d is not None and (best is None or d < best):
                best = d
        for receiver in self._pending_acks.values():
            d = receiver.ack_due
            if d is not None and (best is None or d < best):
                best = d
        for receiver in self._gaps.values():
            d = receiver.gap_due
            if d is not None and (best is None or d < best):
                best = d
        return best

    # -- queries ----------------------------------------------------------------------------

    def peer_state(self, node: int) -> PeerState:
        """What we believe about ``node`` (ALIVE until proven otherwise)."""
        return self.liveness.state(node)

    def stats(self) -> dict[str, object]:
        """Counters, JSON-able."""
        s = self._stats
        return {
            "data_sent": s.data_sent,
            "packets_sent": s.data_sent + s.retransmissions,
            "retransmissions": s.retransmissions,
            "acks_sent": s.acks_sent,
            "acks_received": s.acks_received,
            "acks_piggybacked": s.acks_piggybacked,
            "nacks_sent": dict(s.nacks_sent),
            "nacks_received": dict(s.nacks_received),
            "drops": dict(s.drops),
            "drops_total": sum(s.drops.values()),
            "messages_delivered": s.delivered,
            "messages_completed": s.completed,
            "messages_failed": dict(s.failed),
            "timeouts": s.timeouts,
            "loss_events": s.loss_events,
            "refusal_retries": s.refusal_retries,
            "probes_sent": s.probes_sent,
            "probes_answered": s.probes_answered,
            "stalls": s.stalls,
            "peers_revived": s.peers_revived,
            "recovery": dict(s.recovery),
            "streams_out": len(self._senders),
            "streams_busy": len(self._busy),
            "streams_in": len(self._receivers),
            "streams_evicted": s.streams_evicted,
            "streams_retired": s.streams_retired,
            "streams_restarted": s.streams_restarted,
            "peers": self.liveness.stats_by_peer(),
            "busy": [_describe_busy(k, v) for k, v in islice(self._busy.items(), 16)],
        }

    # -- helpers ----------------------------------------------------------------------------

    def _on_ack(
        self, sender: StreamSender, packet: ControlPacket, now: float
    ) -> list[TransportAction]:
        self._stats.acks_received += 1
        return sender.on_ack(packet.seq, now=now)

    def _on_sack(
        self, sender: StreamSender, packet: ControlPacket, now: float
    ) -> list[TransportAction]:
        self._stats.acks_received += 1
        self._stats.recovery["sacks_received"] += 1
        return sender.on_sack(packet.seq, packet.sack, now=now)

    def _on_nack(
        self, sender: StreamSender, packet: ControlPacket, now: float
    ) -> list[TransportAction]:
        reason = packet.reason
        if reason is None:  # the decoder never makes one; a hand-built record might
            self._stats.drops["nack_without_reason"] += 1
            return []
        self._stats.nacks_received[reason.name.lower()] += 1
        return sender.on_nack(reason, packet.seq, now=now)

    def _repeat_nacks(self, now: float) -> list[TransportAction]:
        """Repeat the GAP NACKs that are due; forget the streams with no repeat left."""
        out: list[TransportAction] = []
        for key, receiver in list(self._gaps.items()):
            action = receiver.repeat_nack(now)
            if action is not None:
                out.append(action)
                self._pending_acks.pop(key, None)  # the NACK carries the cumulative ACK
            if receiver.gap_due is None:
                del self._gaps[key]
        return out

    def _new_receiver(
        self, key: RecvKey, packet: DataPacket, old: GbnReceiver | None, now: float
    ) -> GbnReceiver:
        """State for the incoming stream ``key`` at ``packet``'s epoch; ``old``: the state of
        the epoch before (replaced: its sender started anew; its partial message, if any,
        gives its token back when the new epoch's first message is admitted)."""
        if old is None:
            self._collect(now)
        else:
            self._forget_receiver(key)
            self._stats.streams_restarted += 1
        receiver = GbnReceiver(
            node_id=self.node_id, src_node=packet.src_node, src_port=packet.src_port,
            dst_port=packet.dst_port, config=self.config, stats=self._stats,
            epoch=packet.token,
        )  # fmt: skip
        if old is not None:
            receiver.retired = old.epoch
        self._receivers[key] = receiver
        return receiver

    def _reset(self, packet: DataPacket) -> SendPacket:
        """NACK RESET for ``packet``: this node has no state for its ESTABLISHED epoch."""
        self._stats.drops["no_stream_state"] += 1
        self._stats.nacks_sent["reset"] += 1
        nack = ControlPacket(
            MsgType.NACK, packet.seq, self.node_id, packet.src_node, packet.src_port,
            packet.dst_port, NackReason.RESET, b"", 0, packet.token,
        )  # fmt: skip
        return SendPacket(packet.src_node, nack)

    def _forget_receiver(self, key: RecvKey) -> None:
        self._receivers.pop(key, None)
        self._pending_acks.pop(key, None)
        self._gaps.pop(key, None)
        self._initial.pop(key, None)
        refused = self._refused.get(key[2])  # key: (src_node, src_port, dst_port)
        if refused is not None:
            refused.pop(key, None)

    def _collect(self, now: float) -> None:
        """A stream is being made: at most every ``idle_stream_s / 2``, forget the idle
        ones (incoming: silent for ``idle_stream_s`` and owing nothing; outgoing: nothing in
        flight for half that), so the tables stay bounded by the streams in recent use."""
        if now < self._collect_at:
            return
        idle = self.config.idle_stream_s
        self._collect_at = now + idle / 2
        for rkey, receiver in list(self._receivers.items()):
            if receiver.expected and receiver.heard_at + idle <= now and receiver.idle():
                self._forget_receiver(rkey)
                self._stats.streams_evicted += 1
        for key, sender in list(self._senders.items()):
            if not sender.board.packets and sender.used_at + idle / 2 <= now:
                del self._senders[key]
                self._busy.pop(key, None)
                self.liveness.on_idle(key)
                self._stats.streams_retired += 1

    def _evict_idle(self, now: float) -> None:
        """Forget incoming streams still in their initial state (``expected`` 0: nothing
        taken, so no partial message and nothing the sender counts on) that heard nothing
        for ``idle_stream_s``. A packet on one later builds the same state again, so the
        sender sees no difference; a refusal it had is answered anew. This bounds what
        packets a peer sends to port pairs nobody uses can make us keep."""
        idle = self.config.idle_stream_s
        oldest: float | None = None
        for key, seen in list(self._initial.items()):
            receiver = self._receivers.get(key)
            if receiver is None or receiver.expected != 0:
                del self._initial[key]  # it took a packet since: a stream like any other
                continue
            # ``seen + idle`` as the deadline was computed: no float mismatch, no spinning
            if seen + idle > now or receiver.ack_pending:  # not yet (an ACK owed: later)
                due = seen if seen + idle > now else now
                oldest = due if oldest is None else min(oldest, due)
                continue
            self._forget_receiver(key)
            self._stats.streams_evicted += 1
        self._sweep_at = None if oldest is None else oldest + idle

    def _declare_dead(self, peer: Peer) -> list[TransportAction]:
        """Liveness declared ``peer`` DEAD: fail every message to it ``peer_dead`` (the
        packets on the link stay as orphans, for the peer may come back)."""
        out: list[TransportAction] = []
        for key in list(peer.busy):
            sender = self._senders[key]
            out += sender.close("peer_dead")
            self._busy.pop(key, None)
        peer.busy.clear()
        out.append(PeerDead(peer.node))
        return out

    def _track_sender(self, key: StreamKey, sender: StreamSender, now: float) -> None:
        """After an input to ``sender``: busy (its peer watched) while it has packets and its
        peer is not DEAD, idle otherwise."""
        if not sender.board.packets or self._peers[sender.dst_node].state is PeerState.DEAD:
            self._busy.pop(key, None)
            self.liveness.on_idle(key)
        else:
            self._busy[key] = sender
            self.liveness.on_busy(key, now=now)

    def _check_send(
        self,
        src_port: int,
        dst_node: int,
        dst_port: int,
        payload: bytes,
        am_handler: int,
        args: tuple[int, int, int, int],
        mcast_group: int,
    ) -> None:
        if not (0 <= src_port <= MAX_PORT and 0 <= dst_port <= MAX_PORT):
            raise UsageError(f"ports {src_port}, {dst_port} must be in 0..{MAX_PORT}")
        if not 0 <= dst_node <= MAX_NODE:
            raise UsageError(f"node {dst_node} must be in 0..{MAX_NODE}")
        if len(payload) > self.config.max_message:
            raise UsageError(f"message of {len(payload)} bytes exceeds max_message")
        if not (0 <= am_handler <= _U16 and 0 <= mcast_group <= _U16):
            raise UsageError("am_handler and mcast_group must fit in 16 bits")
        if len(args) != 4 or min(args) < 0 or max(args) > _U32:
            raise UsageError("args must be four 32-bit unsigned words")

    def ack_now(self, src_node: int, src_port: int, dst_port: int, *, now: float
                ) -> list[TransportAction]:  # fmt: skip
        """Acknowledge the stream from (``src_node``, ``src_port``) into ``dst_port`` at once
        instead of after the delayed-ACK interval (NICVM: a module's sender waits for it)."""
        key = (src_node, src_port, dst_port)
        receiver = self._receivers.get(key)
        if receiver is None or not receiver.ack_pending:
            return []
        receiver.ack_due = now
        self._pending_acks.pop(key, None)
        action = receiver.take_ack(now)
        return [] if action is None else [action]


def _check_config(c: TransportConfig) -> None:
    """Raise UsageError for a config the transport cannot run with."""
    if not 1 <= c.mtu <= _U16:
        raise UsageError(f"mtu {c.mtu} must be in 1..{_U16} (16-bit fragment length)")
    if c.window < 1 or c.ack_every < 1:
        raise UsageError("window and ack_every must be at least 1")
    if (
        min(c.no_buffer_retry_s, c.dead_peer_timeout_s, c.probe_interval_s) <= 0
        or min(c.no_port_timeout_s, c.no_buffer_timeout_s, c.idle_stream_s) <= 0
        or c.nack_repeat_s <= 0
    ):
        raise UsageError(
            "no_buffer_retry_s, dead_peer_timeout_s, probe_interval_s, no_port_timeout_s, "
            "no_buffer_timeout_s, idle_stream_s and nack_repeat_s must be positive"
        )
    if c.recovery not in RECOVERIES:
        raise UsageError(f"recovery {c.recovery!r} must be one of {', '.join(RECOVERIES)}")
    if c.dead_peer_probes < 0:
        raise UsageError("dead_peer_probes must not be negative")
    if not 0 <= c.max_message <= _U32:
        raise UsageError(f"max_message must be in 0..{_U32} (32-bit message length)")
    RttEstimator(initial_s=c.rto_initial_s, min_s=c.rto_min_s, max_s=c.rto_max_s)


def _describe_busy(key: StreamKey, sender: StreamSender) -> dict[str, object]:
    """One busy outgoing stream (the first 16 are in `Transport.stats`, for a hang's
    diagnosis): its key, epoch, window and refusal state."""
    board = sender.board
    return {
        "key": list(key), "epoch": sender.epoch, "established": sender.established,
        "base": board.base, "send_next": board.send_next, "high_sent": board.high_sent,
        "packets": len(board.packets), "refusal": sender.refusal.state.name,
        "retries": sender.refusal.retries,
    }  # fmt: skip
