"""NicCore: one NIC's firmware as a sans-IO core composing GM ports, transport and faults.

Inputs: a datagram from the link, a record from a host connection, a host disconnecting,
a timer firing, the end of a burst (``flush``); each takes ``now`` and returns
:data:`~nicd.actions.NicAction` s. Packets are decoded here (the packet boundary) and encoded
here, after which the seeded fault plan decides their fate.

Invariants: nothing a peer or a host sends raises out of this class: a bad datagram is a
counted drop, host misuse is a ``Refused`` record to that host; only datagrams from
addresses in the routing table and addressed to this node reach the transport; every send a
host starts ends in exactly one SENT or ERROR event to it while its port is open; a
``RaiseSignal`` follows only the RECV record of an application-bypass message (or a host's
re-enabling while such messages are unseen), on a port with signals enabled and none pending.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from nicd import hostlink as hl
from nicd.actions import (
    Deliver,
    NicAction,
    PeerDead,
    RaiseSignal,
    SendComplete,
    SendFailed,
    SendPacket,
    ToHost,
    Transmit,
)
from nicd.errors import BadPacket, UsageError
from nicd.gm import PortTable
from nicd.grim.service import GrimNic, NicSend, ToPort
from nicd.grimlink import NIC_PORT, GrimRecord
from nicd.link.channels import Transport
from nicd.link.faults import FaultPlan
from nicd.link.wire import SIGNAL_TYPES, ControlPacket, MsgType, decode_untrusted, encode
from nicd.mcast.config import McastConfig
from nicd.mcast.service import McastNic
from nicd.nicvm.engine import NICVM_TYPES, NicvmEngine
from nicd.stats import LinkStats

if TYPE_CHECKING:
    from collections.abc import Sequence

    from nicd.actions import TransportAction
    from nicd.config import NicConfig
    from nicd.gm import PortState
    from nicd.link.reliable import Admission
    from nicd.link.wire import DataPacket

__all__ = ["Addr", "NicCore"]

Addr = tuple[str, int]
# Message types a host may put on the wire; control and management types are the NIC's own.
_HOST_MSG_TYPES = {int(t): t for t in MsgType if not t.is_control()}


class NicCore:
    """The NIC of node ``config.node_id``."""

    def __init__(self, config: NicConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.ports = PortTable(max_ports=config.max_ports, send_tokens=config.send_tokens)
        self.grim = GrimNic(config.node_id, self.ports, max_message=config.max_message)
        self.transport = Transport(config.node_id, config.transport, self._admit)
        self.faults: FaultPlan[Addr] = FaultPlan(config.faults)
        self.link = LinkStats()
        self._routes: dict[int, Addr] = {}
        self._nodes_by_addr: dict[Addr, int] = {}
        self._fault_free = not config.faults.active
        self.control_queue: deque[Transmit] = deque()
        """ACK/NACKs the link refused, sent before anything else once it is writable."""
        self._sent: dict[int, list[int]] = {}  # port -> completed handles not yet told
        self._sent_due: dict[int, float] = {}  # port -> when they must be told
        self._sent_flush_at = max(1, config.send_tokens // 2)
        self.mcast = McastNic(config.node_id, _mcast_config(config), self.ports)
        """Multicast groups, multisend and NIC forwarding (seed 001)."""
        self.nicvm: NicvmEngine | None = None
        """The NICVM framework (thesis ch. 4); None when disabled."""
        if config.nicvm.enabled:
            self.nicvm = NicvmEngine(config.node_id, config.nicvm, self.transport, self.ports,
                                     lambda: len(self._routes))  # fmt: skip

    # -- inputs -----------------------------------------------------------------------------

    def set_routes(self, routes: dict[int, Addr]) -> None:
        """Install the routing table (node id -> resolved UDP address)."""
        self._routes = dict(routes)
        self._nodes_by_addr = {addr: node for node, addr in routes.items()}

    @property
    def routes(self) -> dict[int, Addr]:
        """The routing table in force."""
        return dict(self._routes)

    def on_datagram(self, data: bytes, addr: Addr, *, now: float) -> list[NicAction]:
        """A datagram arrived on the link from ``addr``."""
        link = self.link
        link.datagrams_in += 1
        link.bytes_in += len(data)
        node = self._nodes_by_addr.get(addr)
        if node is None:
            link.drop("unknown_source")
            return []
        try:
            packet = decode_untrusted(data)
        except BadPacket as exc:
            link.drop(exc.reason)
            return []
        if isinstance(packet, ControlPacket):
            if packet.to_node != self.node_id or packet.from_node != node:
                link.drop("misrouted")
                return []
            if packet.msg_type is MsgType.MCAST_ACK:
                return self._convert(self.mcast.on_ack(packet, now=now), now)
            return self._convert(self.transport.on_control(packet, now=now), now)
        if packet.dst_node != self.node_id or packet.src_node != node:
            link.drop("misrouted")
            return []
        if packet.msg_type is MsgType.MCAST_DATA:
            return self._convert(self.mcast.on_data(packet, now=now), now)
        actions = self._convert(self.transport.on_data(packet, now=now), now)
        return actions + self._grim_out(self.grim.take_upcalls(), now)

    def on_host(self, conn: int, record: hl.HostRecord, *, now: float) -> list[NicAction]:
        """A whole record arrived from host connection ``conn``."""
        self.link.host_records_in += 1
        if isinstance(record, hl.SendReq):
            return self._host_send(conn, record, now)
        if isinstance(record, hl.ProvideReq):
            state = self.ports.port_of(conn)
            if state is None:
                return self._refuse(conn, "PROVIDE before OPEN")
            self.ports.provide(state, record.count)
            return self._convert(self.transport.resume_port(state.port, now=now), now)
        if isinstance(record, hl.OpenReq):
            requested = None if record.port == hl.ANY_PORT else record.port
            try:
                state = self.ports.open(conn, requested)
            except UsageError as exc:
                return self._refuse(conn, str(exc))
            opened = hl.Opened(state.port, self.node_id, len(self._routes), state.send_tokens)
            actions: list[NicAction] = [ToHost(conn, opened)]
            actions += self._convert(self.transport.resume_port(state.port, now=now), now)
            return actions
        if isinstance(record, hl.CloseReq):
            return self.on_disconnect(conn, now=now)
        if isinstance(record, hl.SetRoutesReq):
            self.set_routes(record.routes)
            return [ToHost(conn, hl.RoutesOk())]
        if isinstance(record, hl.StatsReq):
            return [ToHost(conn, hl.StatsReply(self.stats()))]
        if isinstance(record, GrimRecord):
            return self._grim_host(conn, record, now)
        if isinstance(record, hl.SignalCtl):
            state = self.ports.port_of(conn)
            if state is None:
                return self._refuse(conn, "SIGNALS before OPEN")
            if self.ports.set_signals(state, record.enable, record.pid, record.seen):
                return [self._signal(state)]
            return []
        if isinstance(record, _MCAST_REQUESTS):
            return self._mcast_host(conn, record, now)
        if isinstance(record, hl.NICVM_REQUESTS):
            return self._nicvm_request(conn, record, now)
        return self._refuse(conn, f"{type(record).__name__} is not a host request")

    def on_register(
        self, conn: int, req: hl.RegisterReq, memory: memoryview | None, *, now: float
    ) -> list[NicAction]:
        """The shell mapped (or failed to map: ``memory`` None) the segment ``req`` names."""
        self.link.host_records_in += 1
        state = self.ports.port_of(conn)
        if state is None:
            return self._refuse(conn, "REGISTER before OPEN")
        if memory is None or len(memory) < req.size:
            return self._refuse(conn, f"cannot map shared memory {req.name!r} of {req.size} B")
        try:
            self.ports.register(state, req.region, memory[: req.size])
        except UsageError as exc:
            return self._refuse(conn, str(exc))
        return [ToHost(conn, hl.Registered(req.region))]

    def on_deregister(self, conn: int, region: int) -> None:
        """Forget a region (dropping the last reference unmaps it)."""
        self.link.host_records_in += 1
        state = self.ports.port_of(conn)
        if state is not None:
            self.ports.deregister(state, region)

    def on_disconnect(self, conn: int, *, now: float) -> list[NicAction]:
        """Host connection ``conn`` closed (or sent CLOSE): its port and regions close, its
        sends fail."""
        state = self.ports.close_conn(conn)
        if state is None:
            return []
        self._sent.pop(state.port, None)
        self._sent_due.pop(state.port, None)
        self.grim.on_port_closed(state.port)
        if self.nicvm is not None:
            self.nicvm.on_port_closed(state.port)
        return self._convert(self.transport.close_port(state.port, now=now), now)

    def on_timer(self, *, now: float) -> list[NicAction]:
        """Fire every timer whose deadline has passed."""
        actions = self._convert(self.transport.on_timer(now=now), now)
        for port, due in list(self._sent_due.items()):
            if due <= now:
                actions += self._tell_sent(port)
        if not self._fault_free:
            actions += self._transmit_all(self.faults.on_timer(now=now))
        deadline = self.mcast.next_deadline()
        if deadline is not None and deadline <= now:
            actions += self._convert(self.mcast.on_timer(now=now), now)
        return actions

    def flush(self, *, now: float) -> list[NicAction]:
        """End of a burst of input: send the acknowledgements held back for batching."""
        return self._convert(self.transport.flush(now=now), now)

    def on_link_busy(self, action: Transmit) -> None:
        """The link refused ``action`` (EAGAIN). Control messages wait in the control queue
        so a busy link can never deadlock the protocol (GRIM 4.2.3); a data packet is
        dropped like a lost one and go-back-N resends it."""
        if action.control:
            self.control_queue.append(action)
            self.link.drop("control_queued")
        else:
            self.link.drop("link_busy")

    def on_link_writable(self) -> list[NicAction]:
        """The link takes datagrams again: the control queue goes first."""
        queued: list[NicAction] = list(self.control_queue)
        self.control_queue.clear()
        return queued

    # -- queries ----------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The earliest moment ``on_timer`` wants to run."""
        deadlines = [self.transport.next_deadline(), self.mcast.next_deadline()]
        if self._sent_due:
            deadlines.append(min(self._sent_due.values()))
        if not self._fault_free:
            deadlines.append(self.faults.next_deadline())
        present = [d for d in deadlines if d is not None]
        return min(present) if present else None

    def stats(self) -> dict[str, object]:
        """Every counter, JSON-able."""
        return {
            "node": self.node_id,
            "link": self.link.as_dict(),
            "transport": self.transport.stats(),
            "gm": self.ports.stats(),
            "faults": self.faults.stats(),
            "grim": self.grim.stats(),
            "mcast": self.mcast.stats(),
            "nicvm": None if self.nicvm is None else self.nicvm.stats(),
        }

    # -- helpers ----------------------------------------------------------------------------

    def _refuse(self, conn: int, reason: str) -> list[NicAction]:
        self.link.drop("host_misuse")
        return [ToHost(conn, hl.Refused(reason))]

    def _host_send(self, conn: int, req: hl.SendReq, now: float) -> list[NicAction]:
        state = self.ports.port_of(conn)
        if state is None:
            return self._refuse(conn, "SEND before OPEN")
        msg_type = _HOST_MSG_TYPES.get(req.msg_type)
        if msg_type is None:
            return self._refuse(conn, f"message type {req.msg_type} is not for hosts to send")
        try:
            self.ports.take_send_token(state)
        except UsageError as exc:
            return self._refuse(conn, str(exc))
        failure = None
        if req.dst_node not in self._routes:
            failure = "no_route"
        elif len(req.payload) > self.config.max_message:
            failure = "too_large"
        if failure is not None:
            self.ports.return_send_token(state.port)
            return [ToHost(conn, hl.ErrorEvent(req.handle, req.dst_node, failure))]
        actions = self.transport.send(
            now=now,
            src_port=state.port,
            dst_node=req.dst_node,
            dst_port=req.dst_port,
            msg_type=msg_type,
            payload=req.payload,
            handle=req.handle,
            am_handler=req.am_handler,
            args=req.args,
        )
        return self._convert(actions, now)

    def _convert(self, actions: Sequence[TransportAction | ToHost], now: float) -> list[NicAction]:
        out: list[NicAction] = []
        nicvm = self.nicvm
        for action in actions:
            if isinstance(action, SendComplete | SendFailed):
                folded = self.mcast.fold(action)  # copies of a multisend end as one
                if folded is None:
                    continue
                action = folded
            if isinstance(action, SendPacket):
                addr = self._routes.get(action.node)
                if addr is None:
                    self.link.drop("no_route_out")
                    continue
                datagram = encode(action.packet)
                control = isinstance(action.packet, ControlPacket)
                if self._fault_free:
                    out += self._transmit_all([(addr, datagram)], control)
                else:
                    faulty = self.faults.on_send(addr, datagram, now=now)
                    out += self._transmit_all(faulty, control)
            elif isinstance(action, Deliver):
                grim = self.grim.on_deliver(action)
                if grim is not None:
                    out += self._grim_out(grim, now)
                    continue
                state = self.ports.get(action.port)
                if state is None:
                    self.link.drop("port_closed")
                    continue
                if action.msg_type is MsgType.RM_WRITE_P:
                    out += self._place(state, action)
                    continue
                if action.msg_type in NICVM_TYPES and nicvm is not None:
                    out += self._convert(nicvm.on_deliver(action, state.conn, now=now), now)
                    continue
                event = hl.RecvEvent(
                    action.src_node, action.src_port, action.payload, int(action.msg_type),
                    action.am_handler, action.args, action.mcast_group,
                )  # fmt: skip
                if action.port in self._sent:
                    out += self._tell_sent(action.port)  # rides along: same wake-up
                out.append(ToHost(state.conn, event))
                if action.msg_type in SIGNAL_TYPES and self.ports.on_ab_delivered(state):
                    out.append(self._signal(state))  # after the record: the handler finds it
            elif isinstance(action, SendComplete):
                if nicvm is not None and nicvm.owns(action.port, action.handle):
                    done = nicvm.on_send_done(action.port, action.handle, None, now=now)
                    out += self._convert(done, now)
                    continue
                out += self._complete(action.port, action.handle, now)
            elif isinstance(action, SendFailed):
                if nicvm is not None and nicvm.owns(action.port, action.handle):
                    done = nicvm.on_send_done(action.port, action.handle, action, now=now)
                    out += self._convert(done, now)
                    continue
                error = hl.ErrorEvent(action.handle, action.dst_node, action.reason)
                out += self._tell_sent(action.port)
                out += self._finish_send(action.port, error)
            elif isinstance(action, PeerDead):
                self.link.peers_dead.append(action.node)
                out += self._convert(self.mcast.on_peer_dead(action.node, now=now), now)
            elif isinstance(action, ToHost):
                out.append(action)
        return out

    def _signal(self, state: PortState) -> RaiseSignal:
        state.signal_pending = True
        state.signals_raised += 1
        return RaiseSignal(state.conn, state.host_pid)

    def _place(self, state: PortState, d: Deliver) -> list[NicAction]:
        """RM-P write (GRIM 4.5): copy into registered memory, tell the host where."""
        region, offset = d.args[0], d.args[1]
        memory = state.regions.get(region)
        end = offset + len(d.payload)
        if memory is None or end > len(memory):
            self.link.drop("rm_bounds")
            return []
        memory[offset:end] = d.payload
        event = hl.RmWriteEvent(d.src_node, d.src_port, region, offset, len(d.payload), d.args)
        return [ToHost(state.conn, event)]

    def _complete(self, port: int, handle: int, now: float) -> list[NicAction]:
        """A send completed: its token is back at once; the host hears of it lazily."""
        if self.ports.get(port) is None:
            return []
        self.ports.return_send_token(port)
        pending = self._sent.setdefault(port, [])
        pending.append(handle)
        if len(pending) >= self._sent_flush_at:
            return self._tell_sent(port)
        self._sent_due.setdefault(port, now + self.config.sent_delay_s)
        return []

    def _tell_sent(self, port: int) -> list[NicAction]:
        handles = self._sent.pop(port, None)
        self._sent_due.pop(port, None)
        state = self.ports.get(port)
        if not handles or state is None:
            return []
        event = hl.SentEvent(handles[0]) if len(handles) == 1 else hl.SentBatch(tuple(handles))
        return [ToHost(state.conn, event)]

    def _finish_send(self, port: int, event: hl.ErrorEvent) -> list[NicAction]:
        state = self.ports.get(port)
        if state is None:
            return []
        self.ports.return_send_token(port)
        return [ToHost(state.conn, event)]

    def _transmit_all(
        self, datagrams: list[tuple[Addr, bytes]], control: bool = False
    ) -> list[NicAction]:
        link = self.link
        link.datagrams_out += len(datagrams)
        link.bytes_out += sum(len(d) for _, d in datagrams)
        return [Transmit(addr, datagram, control) for addr, datagram in datagrams]

    # -- GRIM interfaces (nicd.grim) ----------------------------------------------------------

    def _admit(self, first: DataPacket) -> Admission:
        verdict = self.grim.admit(first)
        return self.ports.admit(first) if verdict is None else verdict

    def _grim_host(self, conn: int, record: GrimRecord, now: float) -> list[NicAction]:
        state = self.ports.port_of(conn)
        if state is None:
            return self._refuse(conn, f"{type(record).__name__} before OPEN")
        if self.grim.on_host(state.port, record):
            return self._convert(self.transport.resume_port(state.port, now=now), now)
        return []

    def _grim_out(self, outs: list[NicSend | ToPort], now: float) -> list[NicAction]:
        actions: list[NicAction] = []
        for o in outs:
            if isinstance(o, NicSend):
                try:
                    sent = self.transport.send(
                        now=now, src_port=NIC_PORT, dst_node=o.dst_node, dst_port=o.dst_port,
                        msg_type=o.msg_type, payload=o.payload, handle=0,
                        am_handler=o.am_handler, args=o.args,
                    )  # fmt: skip
                except UsageError:
                    self.link.drop("grim_reply_unsendable")
                    continue
                actions += self._convert(sent, now)
            else:
                state = self.ports.get(o.port)
                if state is not None:
                    actions.append(ToHost(state.conn, o.record))
        return actions

    # -- multicast (seed 001) ----------------------------------------------------------------

    def _mcast_host(self, conn: int, record: _McastRequest, now: float) -> list[NicAction]:
        """Host records of HostOp 60-69: groups, multicast and multisend."""
        state = self.ports.port_of(conn)
        if state is None:
            return self._refuse(conn, f"{type(record).__name__} before OPEN")
        if isinstance(record, hl.MultiSendReq):
            return self._multisend(conn, state, record, now)
        mcast = self.mcast
        if isinstance(record, hl.McastSendReq):
            try:
                self.ports.take_send_token(state)
            except UsageError as exc:
                return self._refuse(conn, str(exc))
            if len(record.payload) > self.config.max_message:
                self.ports.return_send_token(state.port)
                return [ToHost(conn, hl.ErrorEvent(record.handle, self.node_id, "too_large"))]
            result = mcast.on_send(state, record, now=now)
            if isinstance(result, str):
                self.ports.return_send_token(state.port)
        elif isinstance(record, hl.McastGroupReq):
            result = mcast.on_group(state, record, now=now)
        else:
            result = mcast.on_free(state, record, now=now)
        if isinstance(result, str):
            return self._refuse(conn, result)
        return self._convert(result, now)

    def _multisend(
        self, conn: int, state: PortState, req: hl.MultiSendReq, now: float
    ) -> list[NicAction]:
        """One host request, one copy per destination over the reliable transport."""
        msg_type = _HOST_MSG_TYPES.get(req.msg_type)
        if msg_type is None or msg_type is MsgType.MCAST_DATA:
            return self._refuse(conn, f"message type {req.msg_type} is not for hosts to send")
        if not req.dests or len(set(req.dests)) != len(req.dests):
            return self._refuse(conn, "a multisend needs distinct destinations")
        try:
            self.ports.take_send_token(state)
        except UsageError as exc:
            return self._refuse(conn, str(exc))
        failure = None
        if any(d not in self._routes for d in req.dests):
            failure = "no_route"
        elif len(req.payload) > self.config.max_message:
            failure = "too_large"
        if failure is not None:
            self.ports.return_send_token(state.port)
            return [ToHost(conn, hl.ErrorEvent(req.handle, req.dests[0], failure))]
        self.mcast.start_multisend(state.port, req)
        actions: list[TransportAction] = []
        for dst in req.dests:
            actions += self.transport.send(
                now=now, src_port=state.port, dst_node=dst, dst_port=req.dst_port,
                msg_type=msg_type, payload=req.payload, handle=req.handle,
                am_handler=req.am_handler, args=req.args,
            )  # fmt: skip
        return self._convert(actions, now)

    def _nicvm_request(self, conn: int, record: hl.HostRecord, now: float) -> list[NicAction]:
        """A NICVM record (load, purge, list, communicator map, delegate) from a host."""
        state = self.ports.port_of(conn)
        if state is None:
            return self._refuse(conn, "NICVM request before OPEN")
        if self.nicvm is None:
            if isinstance(record, hl.NicvmDelegateReq):
                return [ToHost(conn, hl.NicvmDone(record.handle, "disabled", 2, "NICVM is off"))]
            if isinstance(record, hl.NicvmCommReq):
                return []
            return [ToHost(conn, hl.NicvmReply(False, "NICVM is disabled on this NIC"))]
        return self._convert(self.nicvm.on_host(conn, state.port, record, now=now), now)


_McastRequest = hl.McastGroupReq | hl.McastFreeReq | hl.McastSendReq | hl.MultiSendReq
_MCAST_REQUESTS = (hl.McastGroupReq, hl.McastFreeReq, hl.McastSendReq, hl.MultiSendReq)


def _mcast_config(config: NicConfig) -> McastConfig:
    """The multicast engine's tunables, from the transport's (one MTU, window, RTO)."""
    t = config.transport
    return McastConfig(
        mtu=t.mtu, window=t.window, ack_every=t.ack_every, ack_delay_s=t.ack_delay_s,
        rto_initial_s=t.rto_initial_s, rto_min_s=t.rto_min_s, rto_max_s=t.rto_max_s,
        max_message=config.max_message, forward_first=config.mcast_forward_first,
    )  # fmt: skip
