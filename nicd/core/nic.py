"""NicCore: one NIC's firmware as a sans-IO core composing GM ports, transport and faults.

Inputs: a datagram from the link, a record from a host connection, a host disconnecting,
a timer firing, the end of a burst (``flush``); each takes ``now`` and returns
:data:`~nicd.core.actions.NicAction` s. Packets are decoded here (the packet boundary) and encoded
here, after which the seeded fault plan decides their fate.

Composition: GRIM, multicast and NICVM are :class:`~nicd.core.service.NicService` s and the GM
port path (:mod:`nicd.gm.service`: opening ports, tokens, host sends, plain delivery,
completions) takes whatever none of them claims. NicCore builds its dispatch dicts once (link
packet type, delivered message type and host record type to the service or handler that owns
it; an unknown record is a counted refusal). Whatever a service or the transport returns runs
in one flat loop (:meth:`NicCore._run`): an action that expands (a packet to encode, a
delivery to route, a completion to account, a NIC send) is replaced in place by what it
expands to, so the output keeps the order the recursive version had, without recursion; besides
this loop only NICVM module sends reach the transport (through the one ``send`` it is handed).
The two host records that need two services (multisend and multicast sends: a GM send token,
then multicast) are composed here. What is not composition lives beside it: the routing table
(:mod:`nicd.core.routing`), the watch over partial messages and their receive tokens
(:mod:`nicd.gm.reassembly`), the doorbell (:mod:`nicd.core.doorbell`).

Why over 500 lines: composition is one job with many entries. Each input the shell delivers
is a method (with the counters the shell reports), each action kind a step of the loop, and
each step needs the same three things (the transport, the port table, the services); spread
over files, a step would reach back into NicCore for them, and the walk of a message through
the NIC would cross files for no gain.

Invariants: nothing a peer or a host sends raises out of this class: a bad datagram is a
counted drop, host misuse is a ``Refused`` record to that host; only datagrams from
addresses in the routing table and addressed to this node reach the transport; every send a
host starts ends in exactly one SENT or ERROR event to it while its port is open (see
:mod:`nicd.gm.service` for this and the signal rule).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, Final

from emutrace.recorder import Facts
from nicd import hostlink as hl
from nicd.config import NicConfig
from nicd.core.actions import (
    AckNow,
    CoreAction,
    Deliver,
    GiveBack,
    NicAction,
    NicSend,
    PeerDead,
    PortSend,
    RaiseSignal,
    ResumePort,
    SendComplete,
    SendFailed,
    SendPacket,
    ToHost,
    ToPort,
    Transmit,
    TransportAction,
)
from nicd.core.doorbell import DoorbellCoalescer
from nicd.core.routing import SET_ONCE, Addr, RoutingTable
from nicd.core.service import NicService
from nicd.core.stats import LinkStats
from nicd.errors import BadPacket, UsageError
from nicd.gm.ports import PortTable
from nicd.gm.reassembly import Partials
from nicd.gm.service import HOST_MSG_TYPES, GmService
from nicd.grim.quota import NicSendQuota, busy_reply
from nicd.grim.service import GrimNic
from nicd.hostlink.grim import NIC_PORT
from nicd.link.channels import Transport
from nicd.link.faults import FaultPlan
from nicd.link.reliable import Verdict
from nicd.link.wire import (
    ControlPacket,
    DataPacket,
    MsgType,
    decode_untrusted,
    encode_control,
    encode_data,
)
from nicd.mcast.config import McastConfig
from nicd.mcast.service import McastNic
from nicd.nicvm.engine import NicvmEngine, NicvmOff

__all__ = ["NicCore"]

# NicActions: they go to the shell as they are
_FINAL: Final = frozenset({Transmit, ToHost, RaiseSignal})


class NicCore:
    """The NIC of node ``config.node_id``."""

    def __init__(self, config: NicConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.ports = PortTable(max_ports=config.max_ports, send_tokens=config.send_tokens)
        self.transport = Transport(config.node_id, config.transport, self._admit)
        self.faults: FaultPlan[Addr] = FaultPlan(config.faults)
        self.link = LinkStats()
        self.doorbell = DoorbellCoalescer(config.host_coalesce)
        """When the shell holds off reading a streaming host (:mod:`nicd.core.doorbell`)."""
        self.partials = Partials(config.reassembly_timeout_s, self.ports, self.link)
        """Messages being reassembled, so a silent sender's cannot keep a token for ever."""
        self._now = 0.0  # of the datagram being handled, for admissions
        self.routing = RoutingTable()
        self._fault_free = not config.faults.active
        self.control_queue: deque[Transmit] = deque()
        """ACK/NACKs the link refused, sent before anything else once it is writable."""
        self.gm = GmService(config, self.ports, self.link)
        """The port path: opening, tokens, host sends, plain delivery, completions."""
        self.nic_sends = NicSendQuota(config.max_nic_sends, config.max_nic_send_bytes)
        """The bound on messages the NIC sends itself (they take no host send token)."""
        self.grim = GrimNic(config.node_id, self.ports, max_message=config.max_message)
        """GRIM remote memory, translation and the AM registry (seed 002)."""
        self.mcast = McastNic(config.node_id, McastConfig.for_nic(config), self.ports)
        """Multicast groups, multisend and NIC forwarding (seed 001)."""
        self.nicvm: NicvmEngine | None = None
        """The NICVM framework (thesis ch. 4); None when disabled."""
        if config.nicvm.enabled:
            self.nicvm = NicvmEngine(config.node_id, config.nicvm, self.transport.send,
                                     lambda: len(self.routing.by_node))  # fmt: skip
        services: list[NicService] = [self.grim, self.mcast, self.nicvm or NicvmOff()]
        self._services = services
        """The features; the port path (``gm``) takes whatever none of them claims."""
        self._by_packet = {t: s for s in services for t in s.packet_types}
        self._by_msg = {t: s for s in services for t in s.msg_types}
        self._by_port: dict[int, NicService] = {NIC_PORT: self.grim}
        gm = self.gm
        self._records: dict[type, Callable[[int, Any, float], list[NicAction]]] = {
            hl.SendReq: lambda conn, r, now: self._run(gm.send(conn, r), now),
            hl.OpenReq: lambda conn, r, now: self._run(gm.open(conn, r), now),
            hl.ProvideReq: lambda conn, r, now: self._run(gm.provide(conn, r), now),
            hl.SignalCtl: lambda conn, r, now: self._run(gm.signal_ctl(conn, r), now),
            hl.MultiSendReq: self._multisend,
            hl.McastSendReq: self._mcast_send,
            hl.CloseReq: lambda conn, _r, now: self.on_disconnect(conn, now=now),
            hl.SetRoutesReq: self._set_routes_record,
            hl.AddRoutesReq: self._add_routes_record,
            hl.StatsReq: lambda conn, _r, _now: [ToHost(conn, hl.StatsReply(self.stats()))],
        }
        for service in services:
            for record_type in service.record_types:
                self._records[record_type] = partial(self._service_record, service)
        self._deadlines: tuple[Callable[[], float | None], ...] = (
            self.gm.next_deadline,
            self.partials.next_deadline,
            *(s.deadline_query() for s in services if _overrides(s, "next_deadline")),
            *(() if self._fault_free else (self.faults.next_deadline,)),
        )
        """Every timer's query but the transport's (asked first), built once; a service
        without timers (its ``next_deadline`` the base class's) is not asked."""
        self._grim_types = self.grim.msg_types
        """The message types whose admission GRIM may claim (besides any to ``NIC_PORT``)."""
        self._done_hooks = tuple(s for s in services if _overrides(s, "on_done"))
        """The services that may own a send's completion (asked only for their
        ``owned_sends``)."""
        self._steps: dict[type, Callable[[Any, float], Sequence[CoreAction]]] = {
            SendPacket: self._step_packet,
            Deliver: self._step_deliver,
            SendComplete: self._step_done,
            SendFailed: self._step_done,
            PeerDead: self._step_peer_dead,
            ToPort: self._step_to_port,
            NicSend: self._step_nic_send,
            PortSend: self._step_port_send,
            ResumePort: lambda a, now: self.transport.resume_port(a.port, now=now),
            GiveBack: self._step_give_back,
            AckNow: lambda a, now: self.transport.ack_now(a.src_node, a.src_port, a.port, now=now),
        }

    def trace_on(self) -> Facts:
        """Tracing is on (the shell records): the list where the cores now note faults,
        multicast sends per child, NICVM module runs and RM operations."""
        facts: Facts = []
        self.faults.trace = self.mcast.engine.trace = self.grim.trace = facts
        if self.nicvm is not None:
            self.nicvm.trace = facts
        return facts

    # -- inputs -----------------------------------------------------------------------------

    def set_routes(self, routes: dict[int, Addr]) -> None:
        """Install the routing table (node id -> resolved UDP address). The table is then
        sealed against SET_ROUTES records."""
        self.routing.install(routes)
        self.gm.nodes = frozenset(routes)

    @property
    def routes(self) -> dict[int, Addr]:
        """The routing table in force."""
        return dict(self.routing.by_node)

    def on_datagram(self, data: bytes, addr: Addr, *, now: float) -> list[NicAction]:
        """A datagram arrived on the link from ``addr``."""
        link = self.link
        link.datagrams_in += 1
        link.bytes_in += len(data)
        node = self.routing.by_addr.get(addr)
        if node is None:
            link.drop("unknown_source")
            return []
        try:
            packet = decode_untrusted(data)
        except BadPacket as exc:
            link.drop(exc.reason)
            return []
        if isinstance(packet, ControlPacket):
            mine = packet.to_node == self.node_id and packet.from_node == node
        else:
            mine = packet.dst_node == self.node_id and packet.src_node == node
        if not mine:
            link.drop("misrouted")
            return []
        service = self._by_packet.get(packet.msg_type)
        if service is not None:  # life from the peer too (the transport sees the rest itself)
            if isinstance(packet, DataPacket) and packet.skip:  # only streams skip
                link.drop("unexpected_skip")
                return []
            revived = self.transport.heard(node, now=now)
            return self._run([*revived, *service.on_packet(packet, now=now)], now)
        if isinstance(packet, ControlPacket):
            return self._run(self.transport.on_control(packet, now=now), now)
        self._now = now
        if self.partials:
            self.partials.heard((node, packet.src_port, packet.dst_port), now)
        return self._run(self.transport.on_data(packet, now=now), now)

    def on_host(self, conn: int, record: hl.HostRecord, *, now: float) -> list[NicAction]:
        """A whole record arrived from host connection ``conn``."""
        self.link.host_records_in += 1
        handler = self._records.get(type(record))
        if handler is None:
            return self._refuse(conn, f"{type(record).__name__} is not a host request")
        return handler(conn, record, now)

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
        self.gm.on_port_closed(state.port)
        self.partials.port_closed(state.port)
        for service in self._services:
            service.on_port_closed(state.port)
        return self._run(self.transport.close_port(state.port, now=now), now)

    def on_timer(self, *, now: float) -> list[NicAction]:
        """Fire every timer whose deadline has passed."""
        actions = self._run(self.transport.on_timer(now=now), now)
        if self.partials:
            actions += self._run(self._expire_partials(now), now)
        actions += self._run(self.gm.on_timer(now=now), now)
        if not self._fault_free:
            actions += self._transmit_all(self.faults.on_timer(now=now))
        for service in self._services:
            deadline = service.next_deadline()
            if deadline is not None and deadline <= now:
                actions += self._run(service.on_timer(now=now), now)
        return actions

    def flush(self, *, now: float) -> list[NicAction]:
        """End of a burst of input: send the acknowledgements held back for batching."""
        return self._run(self.transport.flush(now=now), now)

    def flush_due(self, *, now: float) -> bool:
        """Whether `flush` at ``now`` would send something: the shell defers a flush to the
        end of the burst only then (a delayed ACK waits for its timer anyway)."""
        return self.transport.ack_due(now)

    # -- the link, for the shell --------------------------------------------------------------

    def queue_behind(self, action: Transmit) -> bool:
        """Call before putting ``action`` on the link: True when it must wait instead (a
        control message while others wait, so the control queue stays in order)."""
        if self.control_queue and action.control:
            self.on_link_busy(action)
            return True
        return False

    def on_link_busy(self, action: Transmit) -> None:
        """The link refused ``action`` (EAGAIN). Control messages wait in the control queue
        so a busy link can never deadlock the protocol (GRIM 4.2.3); a data packet is
        dropped like a lost one and go-back-N resends it."""
        if action.control:
            self.control_queue.append(action)
            self.link.drop("control_queued")
        else:
            self.link.drop("link_busy")

    @property
    def control_waiting(self) -> bool:
        """Control messages wait for the link to take datagrams again."""
        return bool(self.control_queue)

    def on_link_writable(self) -> list[NicAction]:
        """The link takes datagrams again: the control queue goes first."""
        queued: list[NicAction] = list(self.control_queue)
        self.control_queue.clear()
        return queued

    def on_link_error(self, reason: str) -> None:
        """The shell could not carry something out (a socket error, a refused signal, a bad
        host record): a counted drop."""
        self.link.drop(reason)

    def on_host_read_yield(self) -> None:
        """The shell left a host connection's records for the next turn (its budget)."""
        self.link.host_read_yields += 1

    def on_host_batch(self, started: float, finished: float) -> float:
        """The shell read host records at ``started`` and handled them by ``finished``:
        seconds it holds off before reading again (see :mod:`nicd.core.doorbell`)."""
        return self.doorbell.on_batch(started, finished)

    def on_bundle_out(self, frames: int) -> None:
        """The shell sent ``frames`` frames to one peer as one bundle."""
        self.link.bundles_out += 1
        self.link.bundled_frames_out += frames

    def on_bundle_in(self, frames: int) -> None:
        """A bundle of ``frames`` frames came in (each then goes to :meth:`on_datagram`)."""
        self.link.bundles_in += 1
        self.link.bundled_frames_in += frames

    def on_host_written(self) -> None:
        """The shell wrote one record to a host."""
        self.link.host_records_out += 1

    # -- queries ----------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The earliest moment ``on_timer`` wants to run."""
        best = self.transport.next_deadline()
        for query in self._deadlines:
            d = query()
            if d is not None and (best is None or d < best):
                best = d
        return best

    def stats(self) -> dict[str, object]:
        """Every counter, JSON-able."""
        return {
            "node": self.node_id,
            "link": self.link.as_dict(),
            "transport": self.transport.stats(),
            "gm": self.ports.stats(),
            "faults": self.faults.stats(),
            "grim": self.grim.stats(),
            "nic_sends": self.nic_sends.stats(),
            "mcast": self.mcast.stats(),
            "nicvm": None if self.nicvm is None else self.nicvm.stats(),
            "doorbell": self.doorbell.stats(),
        }

    # -- the action loop --------------------------------------------------------------------

    def _run(self, actions: Iterable[CoreAction], now: float) -> list[NicAction]:
        """Carry out ``actions`` in order. An action that expands is replaced, where it
        stood, by its expansion (depth first, in the order it was returned); NicActions go
        to the shell. Without recursion: a service never re-enters this loop."""
        out: list[NicAction] = []
        if not actions:
            return out
        work: list[CoreAction] = list(actions)
        work.reverse()  # a stack: the next action is at the end
        steps, final = self._steps, _FINAL
        while work:
            action = work.pop()
            kind = type(action)
            if kind in final:
                out.append(action)  # type: ignore[arg-type]  # _FINAL holds NicAction types
                continue
            step = steps.get(kind)
            if step is None:
                self.link.drop("unknown_action")
                continue
            more = step(action, now)
            if more:
                if len(more) == 1:
                    work.append(more[0])
                else:
                    work.extend(reversed(more))
        return out

    def _step_packet(self, action: SendPacket, now: float) -> Sequence[CoreAction]:
        addr = self.routing.by_node.get(action.node)
        if addr is None:
            self.link.drop("no_route_out")
            return []
        packet = action.packet
        control = isinstance(packet, ControlPacket)
        if isinstance(packet, ControlPacket):
            datagram = encode_control(packet)
        elif packet.msg_type in self._by_packet:  # a service's packet (multicast): no ACK
            datagram = encode_data(packet)
        else:  # a transport stream's: the ACK owed to its destination rides along
            datagram = self.transport.datagram(packet)
        if self._fault_free:
            return self._transmit_all([(addr, datagram)], control)
        return self._transmit_all(self.faults.on_send(addr, datagram, now=now), control)

    def _step_deliver(self, d: Deliver, now: float) -> Sequence[CoreAction]:
        if self.partials:
            self.partials.done((d.src_node, d.src_port, d.port))
        state = self.ports.get(d.port)
        service = self._by_port.get(d.port) or self._by_msg.get(d.msg_type)
        if service is not None:
            done = service.on_deliver(d, state, now=now)
            if done is not None:
                return done
        return self.gm.on_deliver(d, state, now=now) or []

    def _step_done(self, done: SendComplete | SendFailed, now: float) -> Sequence[CoreAction]:
        if done.port == NIC_PORT and self.nic_sends.release(done.handle):
            return []
        if self._done_hooks:
            key = (done.port, done.handle)
            for service in self._done_hooks:
                if key in service.owned_sends:
                    taken = service.on_done(done, now=now)
                    if taken is not None:
                        return taken
        return self.gm.on_done(done, now=now) or []

    def _step_peer_dead(self, action: PeerDead, now: float) -> list[CoreAction]:
        self.link.peers_dead.append(action.node)
        out: list[CoreAction] = []
        for service in self._services:
            out += service.on_peer_dead(action.node, now=now)
        return out

    def _step_to_port(self, action: ToPort, now: float) -> list[CoreAction]:
        state = self.ports.get(action.port)
        if state is None:
            return []
        out: list[CoreAction] = [ToHost(state.conn, action.record)]
        if action.interrupt and state.upcall_signals and state.host_pid > 0:
            # After the record, so the host's handler finds it. One signal per upcall, no
            # pending state: upcalls are rare (cache misses, one per address at a time) and
            # the kernel merges signals the host has not taken yet.
            state.signals_raised += 1
            out.append(RaiseSignal(state.conn, state.host_pid))
        return out

    def _step_nic_send(self, o: NicSend, now: float) -> list[CoreAction]:
        handle = self.nic_sends.admit(len(o.payload))
        if handle is None:
            if o.payload and o.msg_type is MsgType.RM_READ_REPLY:
                return self._step_nic_send(busy_reply(o), now)  # the reader hears BUSY
            self.link.drop("nic_send_quota")
            return []
        try:
            return list(self.transport.send(
                now=now, src_port=NIC_PORT, dst_node=o.dst_node, dst_port=o.dst_port,
                msg_type=o.msg_type, payload=o.payload, handle=handle, am_handler=o.am_handler,
                args=o.args,
            ))  # fmt: skip
        except UsageError:
            self.nic_sends.release(handle)
            self.link.drop("grim_reply_unsendable")
            return []

    def _step_port_send(self, o: PortSend, now: float) -> list[TransportAction]:
        return self.transport.send(
            now=now, src_port=o.src_port, dst_node=o.dst_node, dst_port=o.dst_port,
            msg_type=o.msg_type, payload=o.payload, handle=o.handle, am_handler=o.am_handler,
            args=o.args,
        )  # fmt: skip

    def _step_give_back(self, action: GiveBack, now: float) -> list[CoreAction]:
        state = self.ports.get(action.port)
        if state is None:
            return []
        self.ports.provide(state, 1)
        return list(self.transport.resume_port(action.port, now=now))

    def _admit(self, first: DataPacket) -> Verdict:
        """The transport's admission of a message's FIRST fragment: GRIM's verdict, else a
        receive token (:meth:`Partials.admit <nicd.gm.reassembly.Partials.admit>`)."""
        return self.partials.admit(first, self._grim_claim, now=self._now)

    def _grim_claim(self, first: DataPacket) -> Verdict | None:
        """GRIM's verdict on ``first``, asked only where it may claim one (the NIC's own port,
        its message types): it leaves every other message to the port table, so a plain GM
        message makes no call into the service."""
        if first.dst_port == NIC_PORT or first.msg_type in self._grim_types:
            return self.grim.admit(first)
        return None

    def _expire_partials(self, now: float) -> list[CoreAction]:
        """Abort the partial messages whose senders went silent (their senders are told, so
        their requests fail instead of ending SENT); return their tokens."""
        out: list[CoreAction] = []
        for (src_node, src_port, dst_port), token in self.partials.expired(now):
            out += self.transport.abort_partial(src_node, src_port, dst_port, now=now)
            if token:
                out.append(GiveBack(dst_port))
        return out

    def _set_routes_record(self, conn: int, req: hl.SetRoutesReq, now: float) -> list[NicAction]:
        """Only the launcher sets routes, once (:meth:`RoutingTable.may_set
        <nicd.core.routing.RoutingTable.may_set>` says why)."""
        if not self.routing.may_set(ports_opened=self.ports.any_opened):
            self.link.drop("routes_refused")
            return [ToHost(conn, hl.Refused(SET_ONCE))]
        self.set_routes(req.routes)
        return [ToHost(conn, hl.RoutesOk())]

    def _add_routes_record(self, conn: int, req: hl.AddRoutesReq, now: float) -> list[NicAction]:
        """Nodes started at run time joined the fabric: their routes are added (never a change
        of one in force, :meth:`RoutingTable.extend <nicd.core.routing.RoutingTable.extend>`)."""
        why = self.routing.extend(req.routes)
        if why is not None:
            self.link.drop("routes_refused")
            return [ToHost(conn, hl.Refused(why))]
        self.gm.nodes = frozenset(self.routing.by_node)
        return [ToHost(conn, hl.RoutesOk())]

    # -- host records that take two services ----------------------------------------------

    def _refuse(self, conn: int, reason: str) -> list[NicAction]:
        return self._run(self.gm.refuse(conn, reason), 0.0)

    def _multisend(self, conn: int, req: hl.MultiSendReq, now: float) -> list[NicAction]:
        """One host request, one copy per destination over the reliable transport; the
        multicast service folds their completions into one."""
        state = self.ports.port_of(conn)
        if state is None:
            return self._refuse(conn, f"{type(req).__name__} before OPEN")
        msg_type = HOST_MSG_TYPES.get(req.msg_type)
        if msg_type is None or msg_type is MsgType.MCAST_DATA:
            return self._refuse(conn, f"message type {req.msg_type} is not for hosts to send")
        if not req.dests or len(set(req.dests)) != len(req.dests):
            return self._refuse(conn, "a multisend needs distinct destinations")
        size = len(req.payload)
        refused = self.gm.start_send(conn, state, req.handle, req.dests, size, req.dests[0])
        if refused is not None:
            return self._run(refused, now)
        self.mcast.start_multisend(state.port, req)
        copies = [PortSend(state.port, dst, req.dst_port, msg_type, req.payload, req.handle,
                           req.am_handler, req.args) for dst in req.dests]  # fmt: skip
        return self._run(copies, now)

    def _mcast_send(self, conn: int, req: hl.McastSendReq, now: float) -> list[NicAction]:
        """The root's host hands a multicast message over once (a send token, as any send)."""
        state = self.ports.port_of(conn)
        if state is None:
            return self._refuse(conn, f"{type(req).__name__} before OPEN")
        size = len(req.payload)
        refused = self.gm.start_send(conn, state, req.handle, (), size, self.node_id)
        if refused is not None:
            return self._run(refused, now)
        result = self.mcast.on_send(state, req, now=now)
        if isinstance(result, str):
            self.ports.return_send_token(state.port)
            return self._refuse(conn, result)
        return self._run(result, now)

    def _service_record(
        self, service: NicService, conn: int, record: hl.HostRecord, now: float
    ) -> list[NicAction]:
        state = self.ports.port_of(conn)
        if state is None:
            return self._refuse(conn, f"{service.family or type(record).__name__} before OPEN")
        result = service.on_host(state, record, now=now)
        if isinstance(result, str):
            return self._refuse(conn, result)
        return self._run(result, now)

    def _transmit_all(
        self, datagrams: list[tuple[Addr, bytes]], control: bool = False
    ) -> list[NicAction]:
        link = self.link
        link.datagrams_out += len(datagrams)
        if len(datagrams) == 1:  # the usual case
            addr, datagram = datagrams[0]
            link.bytes_out += len(datagram)
            return [Transmit(addr, datagram, control)]
        link.bytes_out += sum(len(d) for _, d in datagrams)
        return [Transmit(addr, datagram, control) for addr, datagram in datagrams]


def _overrides(service: NicService, name: str) -> bool:
    """Whether ``service``'s class replaces :class:`NicService`'s method ``name``."""
    return getattr(type(service), name) is not getattr(NicService, name)
