"""The NIC's multicast service: host group/multicast/multisend records in, engine actions out.

:class:`McastNic` is what :class:`nicd.core.nic.NicCore` composes for seed 001: it owns the
:class:`~nicd.mcast.McastEngine`, turns the host records of HostOp 60-69 into engine calls,
answers a new multicast message's FIRST fragment from its group's port (a receive token, as a
unicast message takes), and turns the engine's outcomes into what the rest of the NIC already
knows how to carry out: a root message's ``McastDone`` becomes the ``SendComplete`` or
``SendFailed`` of the host's handle (so its send token and SENT/ERROR event go the usual way),
and a ``McastChildDead`` becomes an ``McastErrorEvent`` record to the group's port.

A *multisend to a list* (:class:`~nicd.hostlink.MultiSendReq`) is one host request the NIC
replicates to each destination over the ordinary reliable transport (§5.1's first approach:
ordinary ordering, no group needed at the receivers); every copy carries the host's handle,
and this service folds their completions into one.

Invariants: every host multicast or multisend ends in exactly one SendComplete or SendFailed
for its handle; a freed group is retired, not dropped (its id is free at once; its
unfinished sends still end as sends do, and its receiving side still acknowledges the old
parent's retransmissions for a while, so a parent never mistakes a finished host for a dead
child); a group whose port closed is kept until its id is posted again, then retired; host
misuse comes back as a reason string for a ``Refused`` record, never
raised. Sans-IO: callers pass ``now``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from nicd import hostlink as hl
from nicd.core.actions import (
    Deliver,
    McastChildDead,
    McastDone,
    SendComplete,
    SendFailed,
    SendPacket,
    ToHost,
    ToPort,
)
from nicd.core.service import NicService
from nicd.errors import UsageError
from nicd.link.wire import ControlPacket, MsgType
from nicd.mcast.engine import GroupSpec, McastEngine

if TYPE_CHECKING:
    from collections.abc import Callable

    from nicd.core.actions import CoreAction, McastAction
    from nicd.gm.ports import PortState, PortTable
    from nicd.link.reliable import Admission
    from nicd.link.wire import DataPacket
    from nicd.mcast.config import McastConfig

__all__ = ["McastNic", "Outcome"]

Outcome = list["CoreAction"]
"""What the service returns: transport actions for the NIC to convert, and host records."""


@dataclass(slots=True)
class _Multi:
    """A multisend in progress: copies not yet acknowledged, and the first failure."""

    remaining: int
    failed: SendFailed | None = None


class McastNic(NicService):
    """Every multicast group of one NIC, and its host records (a multicast or multisend
    send itself starts on NicCore's host send path, which checks its token first)."""

    packet_types: ClassVar[frozenset[MsgType]] = frozenset({MsgType.MCAST_DATA, MsgType.MCAST_ACK})
    record_types: ClassVar[tuple[type, ...]] = (hl.McastGroupReq, hl.McastFreeReq)

    def __init__(self, node_id: int, config: McastConfig, ports: PortTable) -> None:
        self.node_id = node_id
        self.ports = ports
        self.engine = McastEngine(node_id=node_id, config=config, admit=self._admit)
        self._multi: dict[tuple[int, int], _Multi] = {}
        self.owned_sends = self._multi  # NicCore asks on_done only for these
        self.counters: Counter[str] = Counter()
        """Host requests by kind, multisend copies, errors reported to hosts."""

    # -- NicService -------------------------------------------------------------------------

    def on_host(
        self, state: PortState, record: hl.HostRecord, *, now: float
    ) -> list[CoreAction] | str:
        """A group request (post, update, free) from the host of ``state``."""
        if isinstance(record, hl.McastGroupReq):
            return self.on_group(state, record, now=now)
        assert isinstance(record, hl.McastFreeReq)  # record_types
        return self.on_free(state, record, now=now)

    def on_packet(self, packet: DataPacket | ControlPacket, *, now: float) -> list[CoreAction]:
        """An MCAST_DATA or MCAST_ACK packet from the link."""
        if isinstance(packet, ControlPacket):
            return self.on_ack(packet, now=now)
        return self.on_data(packet, now=now)

    def on_done(self, done: SendComplete | SendFailed, *, now: float) -> list[CoreAction] | None:
        """A copy of a multisend ended: the multisend's end once every copy ended (and
        nothing before); None for any other send."""
        if (done.port, done.handle) not in self._multi:
            return None
        folded = self.fold(done)
        return [] if folded is None else [folded]

    # -- host requests ----------------------------------------------------------------------

    def on_group(self, state: PortState, req: hl.McastGroupReq, *, now: float) -> Outcome | str:
        """Post or update this node's part of a group; a reason string if refused."""
        spec = GroupSpec(req.group, req.root, req.parent, tuple(req.children), state.port,
                         req.epoch)  # fmt: skip
        engine = self.engine
        out: list[McastAction] = []
        try:
            old = engine.groups().get(req.group)
            if req.update:
                out = engine.update_group(spec, now=now)
                self.counters["groups_updated"] += 1
            else:
                if old is not None and self.ports.get(old.port) is None:
                    out = engine.retire_group(req.group, now=now)  # its port closed: reuse the id
                out += engine.create_group(spec)
                self.counters["groups_created"] += 1
        except UsageError as exc:
            return str(exc)
        return [*self._outcome(out), ToHost(state.conn, hl.McastGroupOk(req.group))]

    def on_free(self, state: PortState, req: hl.McastFreeReq, *, now: float) -> Outcome | str:
        """Free a group this port posted (retire it: its id is free at once, its unfinished
        sends still complete, its old parent's resends are still acknowledged); a reason
        string if refused."""
        spec = self.engine.groups().get(req.group)
        if spec is None or spec.port != state.port:
            return f"multicast group {req.group} is not this port's"
        self.counters["groups_freed"] += 1
        out = self._outcome(self.engine.retire_group(req.group, now=now))
        return [*out, ToHost(state.conn, hl.McastGroupOk(req.group))]

    def on_send(self, state: PortState, req: hl.McastSendReq, *, now: float) -> Outcome | str:
        """The root's host hands a message over once (its send token is already taken)."""
        spec = self.engine.groups().get(req.group)
        if spec is None or spec.port != state.port:
            return f"multicast group {req.group} is not this port's"
        try:
            actions = self.engine.multicast(req.group, req.payload, handle=req.handle, now=now,
                                            am_handler=req.am_handler, args=req.args)  # fmt: skip
        except UsageError as exc:
            return str(exc)
        self.counters["multicasts"] += 1
        return self._outcome(actions)

    def start_multisend(self, port: int, req: hl.MultiSendReq) -> None:
        """A multisend to a list is starting: its copies' completions fold into one."""
        self.counters["multisends"] += 1
        self.counters["multisend_copies"] += len(req.dests)
        self._multi[(port, req.handle)] = _Multi(len(req.dests))

    def fold(self, action: SendComplete | SendFailed) -> SendComplete | SendFailed | None:
        """A unicast send ended: if it was a copy of a multisend, the multisend's end once
        every copy ended (None before); any other send passes through."""
        key = (action.port, action.handle)
        multi = self._multi.get(key)
        if multi is None:
            return action
        if isinstance(action, SendFailed) and multi.failed is None:
            multi.failed = action
        multi.remaining -= 1
        if multi.remaining > 0:
            return None
        del self._multi[key]
        return multi.failed if multi.failed is not None else action

    # -- the link ---------------------------------------------------------------------------

    def on_data(self, packet: DataPacket, *, now: float) -> Outcome:
        """An MCAST_DATA packet from the link."""
        return self._outcome(self.engine.on_data(packet, now=now))

    def on_ack(self, packet: ControlPacket, *, now: float) -> Outcome:
        """An MCAST_ACK packet from the link."""
        return self._outcome(self.engine.on_ack(packet, now=now))

    def on_peer_dead(self, node: int, *, now: float) -> Outcome:
        """The transport declared ``node`` dead: a dead child in every group."""
        return self._outcome(self.engine.on_peer_dead(node, now=now))

    def on_timer(self, *, now: float) -> Outcome:
        """Fire the engine's timers."""
        return self._outcome(self.engine.on_timer(now=now))

    def next_deadline(self) -> float | None:
        """The engine's earliest timer."""
        return self.engine.next_deadline()

    def deadline_query(self) -> Callable[[], float | None]:
        """The engine's own (``next_deadline`` only forwards to it)."""
        return self.engine.next_deadline

    # -- queries ----------------------------------------------------------------------------

    def stats(self) -> dict[str, object] | None:
        """Engine and service counters, JSON-able (the ``mcast`` part of nicd's stats)."""
        s = self.engine.stats
        return {
            "groups": len(self.engine.groups()),
            "messages_sent": s.messages_sent,
            "data_sent": s.data_sent,
            "forwarded": s.forwarded,
            "delivered": s.delivered,
            "retransmissions": s.retransmissions,
            "retransmissions_per_child": {
                str(node): count for node, count in sorted(s.retransmissions_to.items())
            },
            "timeouts": s.timeouts,
            "gap_rollbacks": s.gap_rollbacks,
            "busy_holds": s.busy_holds,
            "records_released": s.records_released,
            "children_dead": s.children_dead,
            "retired": s.retired,
            "retired_kept": len(self.engine.retired()),
            "retired_packets": s.retired_packets,
            "retired_evicted": s.retired_evicted,
            "acks_sent": dict(s.acks_sent),
            "drops": dict(s.drops),
            **dict(self.counters),
        }

    # -- helpers ----------------------------------------------------------------------------

    def _admit(self, spec: GroupSpec, first: DataPacket) -> Admission:
        """A new message of ``spec`` needs a receive token of the group's port."""
        return self.ports.admit_group(spec.port)

    def _outcome(self, actions: list[McastAction]) -> Outcome:
        out: Outcome = []
        for action in actions:
            if isinstance(action, SendPacket | Deliver):
                out.append(action)
            elif isinstance(action, McastDone):
                if action.failed:
                    reason = f"mcast_{action.reason}"
                    out.append(SendFailed(action.port, action.handle, action.failed[0], reason))
                else:
                    out.append(SendComplete(action.port, action.handle))
            elif isinstance(action, McastChildDead):
                self.counters["child_dead_events"] += 1
                event = hl.McastErrorEvent(action.group, action.child, action.reason)
                out.append(ToPort(action.port, event))
        return out
