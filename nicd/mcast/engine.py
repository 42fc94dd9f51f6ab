"""NIC-based reliable multicast (seed 001): groups, multisend, NIC forwarding, per-child ACKs.

The host builds the tree (:mod:`emucluster.offload.nic_mcast.trees`) and posts this node's part
of it as a :class:`GroupSpec` (id, epoch, root, parent, children, local port); groups are created,
updated (a new epoch: a new tree), freed at once or retired by the host (DESIGN §7). A retired
group (:meth:`McastEngine.retire_group`, what a host's free request does) gives its id up at
once but lives on under its (id, epoch) until its business is over: its root messages and
forwards are still resent to children that have not acknowledged them (and end as usual),
and its receiving side still answers the old parent (re-acknowledging resends whose ACK was
lost, taking a message a freed communicator's pending call still waits for) until it has been
quiet for ``retired_linger_s``. Packets and ACKs of that epoch go to it, never to a newer
group with the same id.

At the root the host hands a message over once (:meth:`McastEngine.multicast`); the NIC
fragments it and sends every packet to each child by rewriting the destination (multisend,
§3.1/§5.1). An internal node's NIC forwards every in-order packet to its children as it
arrives (pipelined, no host; §3.2, §5.2) and delivers each whole message to its host port,
deliver-then-forward as the paper does or forward-first (``McastConfig.forward_first``).
Reliability (§5.3) is per group: every hop keeps the root's sequence numbers; the receiving
side lives in :mod:`nicd.mcast.recv`, the shared send records and per-child ACK state in
:mod:`nicd.mcast.send`.

Invariants: one group id names one live group at a time; a node is either the root (no
parent) or has exactly one parent; packets of a group carry its epoch and are accepted only
under the same epoch, so an update never mixes two trees' sequences, and a group posted under
a reused id never takes a retired group's packets or ACKs (the host gives it a new epoch);
each non-root member delivers each message of the group exactly once and in order; a child
that stays dead becomes one McastChildDead at its parent, and root messages then end with it
listed as failed. Inputs take ``now`` keyword-only and return actions;
:meth:`McastEngine.next_deadline` folds every timer. A bad peer is a counted drop; local
misuse raises :class:`UsageError`. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nicd.core.actions import SendPacket
from nicd.errors import BadPacket, UsageError
from nicd.link.reliable import SEQ_MASK, Admission
from nicd.link.rto import RttEstimator
from nicd.link.wire import (
    MAX_NODE,
    MAX_PORT,
    MCAST_EPOCH_MASK,
    DataPacket,
    McastAckKind,
    MsgType,
    decode_mcast_ack_untrusted,
    fragment_flags,
    mcast_ack_packet,
)
from nicd.mcast.config import McastConfig, McastStats
from nicd.mcast.recv import McastReceiver, Verdict
from nicd.mcast.send import McastSender, earliest, rewrite

if TYPE_CHECKING:
    from emutrace.recorder import Facts
    from nicd.core.actions import McastAction
    from nicd.link.wire import ControlPacket

__all__ = ["GroupSpec", "GroupView", "McastAdmit", "McastEngine"]

_U32 = 0xFFFF_FFFF
_NEVER = float("inf")  # the linger of a group that is not retired


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """This node's part of a multicast tree, as its host posts it."""

    group: int
    """Group id (16 bits), unique among the groups this node belongs to."""
    root: int
    """The node multicasts start at."""
    parent: int | None
    """The node this one receives from; None exactly when this node is the root."""
    children: tuple[int, ...]
    """The nodes this one sends to, in sending order."""
    port: int
    """Local host port: sends at the root, receives elsewhere, hears errors everywhere."""
    epoch: int = 0
    """Tree version; every member must post the same one, and an update must change it
    (only its low 14 bits travel)."""


@dataclass(frozen=True, slots=True)
class GroupView:
    """A group's sequencing state at this node (§5.3), for tests and stats."""

    recv_seq: int | None
    """Next sequence number expected from the parent (None at the root)."""
    send_seq: int | None
    """Next sequence number this node sends (None at a leaf)."""
    acked: dict[int, int]
    """Live child -> next sequence number it expects."""
    records: int
    """Send records kept."""
    dead: frozenset[int]
    """Children declared dead."""


McastAdmit = Callable[[GroupSpec, DataPacket], Admission]
"""``admit(spec, first)``: the host port's answer to a new message's FIRST fragment."""


def _always(spec: GroupSpec, first: DataPacket) -> Admission:
    return Admission.OK


@dataclass(slots=True)
class _Group:
    spec: GroupSpec
    sender: McastSender | None
    receiver: McastReceiver | None
    linger_until: float = _NEVER
    """Retired: when its receiving side may go (its sending side goes once drained)."""


def _key(spec: GroupSpec) -> tuple[int, int]:
    return spec.group, spec.epoch & MCAST_EPOCH_MASK


def _view(g: _Group) -> GroupView:
    s, r = g.sender, g.receiver
    return GroupView(
        recv_seq=r.expected if r is not None else None,
        send_seq=s.next_seq if s is not None else None,
        acked=s.acked() if s is not None else {},
        records=s.records if s is not None else 0,
        dead=frozenset(s.dead) if s is not None else frozenset(),
    )


class McastEngine:
    """Every multicast group of one NIC: the sans-IO core the NIC composes."""

    def __init__(
        self,
        *,
        node_id: int,
        config: McastConfig | None = None,
        estimator_for: Callable[[int], RttEstimator] | None = None,
        admit: McastAdmit | None = None,
    ) -> None:
        """``estimator_for(node)`` gives the RTT estimator of a peer (share the unicast
        transport's, so both learn the same path); by default the engine keeps its own.
        ``admit`` asks the group's host port for a receive token (default: always OK)."""
        self.node_id = node_id
        self.config = config if config is not None else McastConfig()
        self.stats = McastStats()
        self._estimators: dict[int, RttEstimator] = {}
        self._estimator_for = estimator_for if estimator_for is not None else self._own_estimator
        self._admit = admit if admit is not None else _always
        self._groups: dict[int, _Group] = {}
        self._retired: dict[tuple[int, int], _Group] = {}
        """(group id, epoch's wire bits) -> a retired group, oldest first (bounded)."""
        self.trace: Facts | None = None
        """Set while tracing; handed to each group's sender (see ``McastSender.trace``)."""

    # -- group lifecycle (host requests) --------------------------------------------------------

    def create_group(self, spec: GroupSpec) -> list[McastAction]:
        """Post a group. Raise UsageError if the id is taken or the spec is inconsistent.
        A retired group of the same id *and epoch* cannot be told apart from it: it is
        dropped, and its unfinished root messages end now with McastDone ``freed`` (the
        MPI layer gives a reused id a new epoch, so this only meets GM-level users)."""
        if spec.group in self._groups:
            raise UsageError(f"multicast group {spec.group} exists; update or free it")
        self._check_spec(spec)
        out: list[McastAction] = []
        stale = self._retired.pop(_key(spec), None)
        if stale is not None:
            self.stats.retired_evicted += 1
            if stale.sender is not None:
                out = stale.sender.close("freed")
        self._groups[spec.group] = self._build(spec)
        return out

    def update_group(self, spec: GroupSpec, *, now: float) -> list[McastAction]:
        """Replace a group's tree (a new epoch). Unfinished root messages end with McastDone
        ``updated``; records and partial messages of the old epoch are dropped."""
        old = self._groups.get(spec.group)
        if old is None:
            raise UsageError(f"multicast group {spec.group} does not exist")
        if (old.spec.epoch ^ spec.epoch) & MCAST_EPOCH_MASK == 0:
            raise UsageError(f"group {spec.group}: an update needs a new epoch")
        self._check_spec(spec)
        out = old.sender.close("updated") if old.sender is not None else []
        self._groups[spec.group] = self._build(spec)
        return out

    def free_group(self, group: int, *, now: float) -> list[McastAction]:
        """Forget a group; unfinished root messages end with McastDone ``freed``."""
        g = self._groups.pop(group, None)
        if g is None:
            raise UsageError(f"multicast group {group} does not exist")
        return g.sender.close("freed") if g.sender is not None else []

    def retire_group(self, group: int, *, now: float) -> list[McastAction]:
        """Give a group's id up now and finish its business in the background: unfinished
        root messages still end in McastDone when every live child acknowledged them, the
        forwarding side still serves its children, and the receiving side still answers its
        old parent until quiet for ``retired_linger_s``. Returns what ends now: the messages
        of a retired group dropped to respect ``max_retired``."""
        g = self._groups.pop(group, None)
        if g is None:
            raise UsageError(f"multicast group {group} does not exist")
        self._purge(now)
        out: list[McastAction] = []
        if g.receiver is None and (g.sender is None or not g.sender.records):
            return out  # a drained root: nothing can still come for it
        g.linger_until = now + self.config.retired_linger_s
        key = _key(g.spec)
        stale = self._retired.pop(key, None)
        if stale is not None and stale.sender is not None:
            out += stale.sender.close("freed")
        self._retired[key] = g
        self.stats.retired += 1
        while len(self._retired) > self.config.max_retired:
            oldest = self._retired.pop(next(iter(self._retired)))
            self.stats.retired_evicted += 1
            if oldest.sender is not None:
                out += oldest.sender.close("freed")
        return out

    # -- local request: multicast from the root -------------------------------------------------

    def multicast(
        self,
        group: int,
        payload: bytes,
        *,
        handle: int,
        now: float,
        am_handler: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
    ) -> list[McastAction]:
        """The root's host hands ``payload`` over once; its packets go to every child.
        Ends in one McastDone(handle) when every child acknowledged every packet."""
        g = self._groups.get(group)
        if g is None:
            raise UsageError(f"multicast group {group} does not exist")
        spec = g.spec
        if spec.root != self.node_id:
            raise UsageError(f"node {self.node_id} is not the root of group {group}")
        if len(payload) > self.config.max_message:
            raise UsageError(f"{len(payload)} bytes exceed max_message {self.config.max_message}")
        if not 0 <= am_handler <= MAX_PORT or not all(0 <= a <= _U32 for a in args):
            raise UsageError("am_handler must fit in 16 bits and args in 32 bits")
        sender = g.sender
        assert sender is not None  # the root always has one
        mtu = self.config.mtu
        count = max(1, -(-len(payload) // mtu))
        view = memoryview(payload)
        token = spec.epoch & MCAST_EPOCH_MASK
        packets: list[DataPacket] = []
        for i in range(count):
            seq = sender.next_seq + i
            packets.append(DataPacket(
                MsgType.MCAST_DATA, fragment_flags(i, count), token, seq & SEQ_MASK,
                self.node_id, spec.port, 0, 0, len(payload), i * mtu,
                bytes(view[i * mtu : (i + 1) * mtu]), group, am_handler, args,
            ))  # fmt: skip
        self.stats.messages_sent += 1
        out = sender.add_message(packets, port=spec.port, handle=handle)
        return out + sender.transmit(now=now)

    # -- packets from the link ------------------------------------------------------------------

    def on_data(self, p: DataPacket, *, now: float) -> list[McastAction]:
        """An MCAST_DATA packet arrived: accept, forward and deliver it, or drop it."""
        if p.msg_type is not MsgType.MCAST_DATA:
            self.stats.drops["not_mcast"] += 1
            return []
        g = self._groups.get(p.mcast_group)
        if (g is None or g.spec.epoch & MCAST_EPOCH_MASK != p.token) and self._retired:
            old = self._retired.get((p.mcast_group, p.token))
            if old is not None:
                old.linger_until = now + self.config.retired_linger_s  # its parent is busy
                self.stats.retired_packets += 1
                g = old
        if g is None:
            # Not posted here (yet): groups are posted on demand by each member's host (§6),
            # so answer BUSY (alive, not ready; like a missing receive token, §5.4) and the
            # parent holds for one RTO without counting retries. Nothing is acknowledged.
            self.stats.drops["unknown_group"] += 1
            self.stats.acks_sent["busy"] += 1
            ack = mcast_ack_packet(p.mcast_group, p.token, 0, McastAckKind.BUSY, self.node_id,
                                   p.src_node)  # fmt: skip
            return [SendPacket(p.src_node, ack)]
        receiver = g.receiver
        if receiver is None:
            self.stats.drops["data_at_root"] += 1
            return []
        spec = g.spec
        verdict, delivery, acks = receiver.on_data(
            p, now=now, admit=lambda first: self._admit(spec, first)
        )
        out: list[McastAction] = []
        if verdict is Verdict.ACCEPTED and g.sender is not None:
            self.stats.forwarded += 1
            g.sender.add(rewrite(p, src_node=self.node_id, dst_node=p.dst_node))
            forwards = g.sender.transmit(now=now)
            if delivery is not None and not self.config.forward_first:
                out.append(delivery)  # §5.2: DMA to the host first, then forward
                delivery = None
            out += forwards
        if delivery is not None:
            out.append(delivery)
        out += acks
        return out

    def on_ack(self, p: ControlPacket, *, now: float) -> list[McastAction]:
        """An MCAST_ACK from a child arrived."""
        try:
            ack = decode_mcast_ack_untrusted(p)
        except BadPacket as e:
            self.stats.drops[e.reason] += 1
            return []
        g = self._groups.get(ack.group)
        if (g is None or g.spec.epoch & MCAST_EPOCH_MASK != ack.epoch) and self._retired:
            g = self._retired.get((ack.group, ack.epoch), g)
        if g is None or g.sender is None:
            self.stats.drops["ack_unknown_group"] += 1
            return []
        if ack.epoch != g.spec.epoch & MCAST_EPOCH_MASK:
            self.stats.drops["ack_other_epoch"] += 1
            return []
        out = g.sender.on_ack(ack.from_node, ack.seq, ack.kind, now=now)
        if g.linger_until < _NEVER and not g.sender.records:
            self._purge(now)  # a retired group's sends just ended
        return out

    def on_peer_dead(self, node: int, *, now: float) -> list[McastAction]:
        """The unicast transport declared ``node`` dead: it is dead as a child in every group."""
        out: list[McastAction] = []
        for g in self._all():
            if g.sender is not None and node in g.sender.children:
                out += g.sender.kill(node, "peer_dead")
        if self._retired:
            self._purge(now)
        return out

    # -- timers ---------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The earliest timer of any group (delayed ACK, retransmission, BUSY hold, the end
        of a retired group's linger)."""
        if not self._groups and not self._retired:
            return None
        return earliest(
            deadline
            for g in self._all()
            for deadline in (
                g.receiver.ack_due if g.receiver is not None else None,
                g.sender.next_deadline() if g.sender is not None else None,
                g.linger_until if g.receiver is not None and g.linger_until < _NEVER else None,
            )
        )

    def on_timer(self, *, now: float) -> list[McastAction]:
        """Fire every timer that has passed."""
        out: list[McastAction] = []
        for g in list(self._all()):
            if g.receiver is not None:
                ack: SendPacket | None = g.receiver.take_ack(now)
                if ack is not None:
                    out.append(ack)
            if g.sender is not None:
                deadline = g.sender.next_deadline()
                if deadline is not None and deadline <= now:
                    out += g.sender.on_timer(now=now)
        if self._retired:
            self._purge(now)
        return out

    # -- queries --------------------------------------------------------------------------------

    def groups(self) -> dict[int, GroupSpec]:
        """The groups posted here."""
        return {gid: g.spec for gid, g in self._groups.items()}

    def view(self, group: int) -> GroupView:
        """A group's sequencing state (§5.3: receive seq, send seq, each child's acked seq)."""
        return _view(self._groups[group])

    def retired(self) -> dict[tuple[int, int], GroupView]:
        """The retired groups still kept, by (group id, epoch's wire bits)."""
        return {key: _view(g) for key, g in self._retired.items()}

    def sender(self, group: int) -> McastSender | None:
        """The group's sending side here (None at a leaf)."""
        return self._groups[group].sender

    # -- helpers --------------------------------------------------------------------------------

    def _all(self) -> Iterable[_Group]:
        """Live groups, then retired ones (no copy while none is retired)."""
        if not self._retired:
            return self._groups.values()
        return [*self._groups.values(), *self._retired.values()]

    def _purge(self, now: float) -> None:
        """Forget retired groups whose sends are over and whose receiving side (if any) has
        been quiet for ``retired_linger_s``."""
        for key, g in list(self._retired.items()):
            drained = g.sender is None or not g.sender.records
            if drained and (g.receiver is None or g.linger_until <= now):
                del self._retired[key]

    def _build(self, spec: GroupSpec) -> _Group:
        config, stats = self.config, self.stats
        sender = None
        if spec.children or spec.parent is None:
            sender = McastSender(
                node_id=self.node_id, group=spec.group, port=spec.port, children=spec.children,
                first_seq=0, config=config, stats=stats, estimator_for=self._estimator_for,
            )  # fmt: skip
            sender.trace, sender.origin = self.trace, int(spec.parent is None)
        receiver = None
        if spec.parent is not None:
            receiver = McastReceiver(
                node_id=self.node_id, group=spec.group, epoch=spec.epoch, parent=spec.parent,
                root=spec.root, port=spec.port, config=config, stats=stats,
            )  # fmt: skip
        return _Group(spec, sender, receiver)

    def _check_spec(self, spec: GroupSpec) -> None:
        if not 0 <= spec.group <= MAX_PORT:
            raise UsageError(f"group id {spec.group} does not fit in 16 bits")
        if not 0 <= spec.port <= MAX_PORT:
            raise UsageError(f"port {spec.port} does not fit in 16 bits")
        is_root = spec.root == self.node_id
        if is_root != (spec.parent is None):
            raise UsageError("the parent is None exactly at the root")
        nodes = list(spec.children) + ([spec.parent] if spec.parent is not None else [])
        if not all(0 <= n <= MAX_NODE for n in nodes):
            raise UsageError("node ids must fit in 16 bits")
        if self.node_id in nodes or len(set(nodes)) != len(nodes):
            raise UsageError("parent and children must be distinct nodes other than this one")
        if spec.root in spec.children:
            raise UsageError("the root cannot be a child")

    def _own_estimator(self, node: int) -> RttEstimator:
        est = self._estimators.get(node)
        if est is None:
            cfg = self.config
            est = RttEstimator(
                initial_s=cfg.rto_initial_s, min_s=cfg.rto_min_s, max_s=cfg.rto_max_s
            )
            self._estimators[node] = est
        return est
