"""The NICVM framework inside one NIC: modules by name, the receive-path hook, module sends.

Thesis §4.3.3 (Figs 4.5-4.8). Hosts upload modules by name (``NicvmLoadReq``), several at once,
purge and list them; a module lives until purged or, unless loaded with ``persist``, until the
port that loaded it closes. Only that port may purge or replace it (a counted refusal
otherwise); a persistent module whose port closed is any local port's. A ``NICVM_DATA`` message
(its own type, so other traffic pays one type test) runs its module on the receive path before
host delivery; a host may also hand one to its own NIC (``NicvmDelegateReq``, the loopback
path). The module's ``mpi_send_message`` calls become send descriptors, carried out by the
reliable transport after it returns: one outstanding at a time as in Fig 4.8, or all at once
(``pipelined``). The host delivery waits until they have completed, and is skipped when the
module consumed the packet. Ranks come from the port's communicator map (``NicvmCommReq``);
without one, communicator 0 is the whole job with rank = node id.

Invariants: nothing a host or peer sends raises out of this class. A received NICVM message
is delivered to its host exactly once unless the module ran OK and consumed it, or it was
garbage (a bad preamble: counted and dropped); a failing module (fault, out of fuel, VM error)
is counted, reported to its owner, and its packet delivered unchanged. Every receive token a
message took comes back to the port when nothing is delivered. Every delegation ends in
exactly one ``NicvmDone`` to its connection while it is open. Sends of modules never use the
host's send tokens (the thesis gives them a dedicated token); their handles are this engine's.
Remote uploads (``NICVM_SOURCE`` packets) are refused and counted unless ``allow_remote_upload``.

A :class:`~nicd.core.service.NicService`: the engine's only handle on the rest of the NIC is the
``send`` callable NicCore gives it (module sends must learn at once whether the transport took
them); everything else it asks for (an ACK now, a receive token back, a report to a port) is
a returned action. :class:`NicvmOff` answers the same records when NICVM is disabled.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import msgpack

from emutrace.kinds import K_NICVM_RUN
from nicd import hostlink as hl
from nicd.core.actions import (
    AckNow,
    CoreAction,
    GiveBack,
    SendFailed,
    ToHost,
    ToPort,
    TransportAction,
)
from nicd.core.service import NicService
from nicd.errors import BadPacket, UsageError
from nicd.link.wire import MsgType
from nicd.nicvm.builtins import Result
from nicd.nicvm.errors import NicvmError
from nicd.nicvm.packet import check_name, decode_preamble_untrusted, encode_preamble
from nicd.nicvm.vm import Outcome, Packet, run

if TYPE_CHECKING:
    from emutrace.recorder import Facts
    from nicd.config import NicvmConfig
    from nicd.core.actions import Deliver, SendComplete
    from nicd.gm.ports import PortState
    from nicd.nicvm.machine import SendDescriptor
    from nicd.nicvm.program import Module

__all__ = ["NICVM_RECORDS", "NICVM_TYPES", "EngineAction", "Loaded", "NicvmEngine", "NicvmOff"]

NICVM_TYPES = frozenset({MsgType.NICVM_DATA, MsgType.NICVM_SOURCE})
"""The message types the engine takes from the receive path; nothing else is touched."""
NICVM_RECORDS: tuple[type, ...] = (
    hl.NicvmLoadReq, hl.NicvmPurgeReq, hl.NicvmListReq, hl.NicvmCommReq, hl.NicvmDelegateReq,
)  # fmt: skip
"""The host records of the NICVM family."""
SendFn = Callable[..., list[TransportAction]]
"""``Transport.send``'s signature (keyword arguments); raises UsageError when it cannot."""
HANDLE_BASE = 0x8000_0000  # module sends are named from here (hosts count up from 1)
MAX_MODULES = 32
MAX_COMMS_PER_PORT = 64

EngineAction = CoreAction
"""What the engine returns: transport work for the NIC core, records for hosts."""


@dataclass(slots=True)
class Loaded:
    """A compiled module on this NIC."""

    name: str
    module: Module
    owner: int | None
    """The port that loaded it (None: a remote upload)."""
    persist: bool
    counters: Counter[str] = field(default_factory=Counter)

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "owner": self.owner, "persist": self.persist,
                "instructions": len(self.module.code), **self.counters}  # fmt: skip


def _may_change(loaded: Loaded, port: int | None) -> bool:
    """Only the port that loaded a module purges or replaces it; a module nobody owns any
    more (persistent, its port closed) is any local port's. A remote upload (``port`` None)
    replaces nothing that a port owns."""
    return loaded.owner is None or loaded.owner == port


@dataclass(slots=True)
class _SendContext:
    """Fig 4.7's NICVM send context: the sends still to start and what follows them."""

    port: int
    pending: deque[tuple[int, bytes, tuple[int, int, int, int]]]  # (node, message, args)
    outstanding: int = 0
    failed: int = 0
    delivery: ToHost | None = None
    """The host delivery deferred until every send completed (None: consumed)."""
    done: tuple[int, int] | None = None
    """(connection, handle) of a delegation, told when everything completed."""
    result: int = 0


class NicvmEngine(NicService):
    """Modules, communicator maps and the send contexts of one NIC (sans-IO)."""

    msg_types: ClassVar[frozenset[MsgType]] = NICVM_TYPES
    record_types: ClassVar[tuple[type, ...]] = NICVM_RECORDS
    family: ClassVar[str] = "NICVM request"

    def __init__(
        self,
        node_id: int,
        config: NicvmConfig,
        send: SendFn,
        world_size: Callable[[], int],
    ) -> None:
        self.node_id = node_id
        self.config = config
        self._send = send
        self._world_size = world_size
        self.modules: dict[str, Loaded] = {}
        self._comms: dict[tuple[int, int], tuple[int, ...]] = {}
        self._contexts: dict[tuple[int, int], _SendContext] = {}  # (port, handle) -> context
        self.owned_sends = self._contexts  # NicCore asks on_done only for these
        self._next_handle = HANDLE_BASE
        self.counters: Counter[str] = Counter()
        self.trace: Facts | None = None
        """Set while tracing: every module run is noted there."""

    # -- host records -----------------------------------------------------------------------

    def on_host(
        self, state: PortState, record: hl.HostRecord, *, now: float
    ) -> list[EngineAction] | str:
        """A NICVM record from the host owning ``state``."""
        conn, port = state.conn, state.port
        if isinstance(record, hl.NicvmDelegateReq):
            return self._delegate(conn, port, record, now)
        if isinstance(record, hl.NicvmCommReq):
            key = (port, record.comm)
            if key not in self._comms and sum(k[0] == port for k in self._comms) >= (
                MAX_COMMS_PER_PORT
            ):
                self.counters["comm_refused"] += 1
                return []
            self._comms[key] = record.nodes
            return []
        if isinstance(record, hl.NicvmLoadReq):
            return [ToHost(conn, self.load(record.name, record.source, port, record.persist))]
        if isinstance(record, hl.NicvmPurgeReq):
            loaded = self.modules.get(record.name)
            if loaded is None:
                return [ToHost(conn, hl.NicvmReply(False, f"no module {record.name!r}"))]
            if not _may_change(loaded, port):
                self.counters["purge_refused"] += 1
                why = f"module {record.name!r} belongs to port {loaded.owner}"
                return [ToHost(conn, hl.NicvmReply(False, why))]
            del self.modules[record.name]
            self.counters["purged"] += 1
            return [ToHost(conn, hl.NicvmReply(True))]
        if isinstance(record, hl.NicvmListReq):
            listing = [m.describe() for m in self.modules.values()]
            return [ToHost(conn, hl.NicvmReply(True, modules=listing))]
        return [ToHost(conn, hl.Refused(f"{type(record).__name__} is not a NICVM request"))]

    def load(self, name: str, source: str, owner: int | None, persist: bool) -> hl.NicvmReply:
        """Compile and install ``source`` as ``name``; the reply says why not."""
        try:
            check_name(name)
        except ValueError as exc:
            return hl.NicvmReply(False, str(exc))
        existing = self.modules.get(name)
        if existing is None and len(self.modules) >= MAX_MODULES:
            return hl.NicvmReply(False, f"{MAX_MODULES} modules are loaded already")
        if existing is not None and not _may_change(existing, owner):
            self.counters["replace_refused"] += 1
            return hl.NicvmReply(False, f"module {name!r} belongs to port {existing.owner}")
        from nicd.nicvm.compiler import compile_module  # lark, only once a module is loaded

        try:
            module = compile_module(source)
        except NicvmError as exc:
            self.counters["refused"] += 1
            return hl.NicvmReply(False, exc.message, exc.line, exc.column)
        except Exception as exc:  # a compiler bug must not take nicd down
            self.counters["refused"] += 1
            return hl.NicvmReply(False, f"internal compiler error: {exc!r}")
        self.counters["loaded"] += 1
        self.modules[name] = Loaded(name, module, owner, persist)
        return hl.NicvmReply(True)

    def on_port_closed(self, port: int) -> None:
        """``port`` closed: its non-persistent modules and its communicator maps go."""
        for name, loaded in list(self.modules.items()):
            if loaded.owner == port:
                if loaded.persist:
                    loaded.owner = None  # nobody to report to any more
                else:
                    del self.modules[name]
                    self.counters["purged_at_close"] += 1
        for key in [k for k in self._comms if k[0] == port]:
            del self._comms[key]
        for ctx in self._contexts.values():
            if ctx.port == port:  # its sends in flight fail with the port's streams
                ctx.delivery = ctx.done = None
                ctx.pending.clear()

    # -- the receive path -------------------------------------------------------------------

    def on_deliver(
        self, d: Deliver, state: PortState | None, *, now: float
    ) -> list[EngineAction] | None:
        """A whole NICVM message arrived for port ``d.port``; it took one receive token.
        None when the port closed (a counted drop of plain delivery)."""
        if state is None:
            return None
        conn = state.conn
        out: list[EngineAction] = [AckNow(d.src_node, d.src_port, d.port)]
        if d.msg_type is MsgType.NICVM_SOURCE:
            out += self._give_back(d.port, now)
            if not self.config.allow_remote_upload:
                self.counters["remote_upload_refused"] += 1
                return out
            try:
                name, source, persist = msgpack.unpackb(d.payload)
                reply = self.load(str(name), str(source), None, bool(persist))
            except Exception:
                self.counters["garbage"] += 1
                return out
            self.counters["remote_upload" if reply.ok else "remote_upload_failed"] += 1
            return out
        try:
            pre = decode_preamble_untrusted(d.payload)
        except BadPacket as exc:
            self.counters[exc.reason] += 1
            self.counters["garbage"] += 1
            return out + self._give_back(d.port, now)
        body = d.payload[pre.body_offset :]
        event = hl.RecvEvent(d.src_node, d.src_port, body, int(MsgType.NICVM_DATA), pre.root,
                             d.args, pre.comm)  # fmt: skip
        loaded = self.modules.get(pre.name)
        if loaded is None:
            self.counters["no_module"] += 1
            return [*out, ToHost(conn, event)]
        return out + self._invoke(loaded, d.port, conn, event, pre.name, None, now, pre.hops)

    def _delegate(
        self, conn: int, port: int, req: hl.NicvmDelegateReq, now: float
    ) -> list[EngineAction]:
        loaded = self.modules.get(req.name)
        if loaded is None:
            self.counters["no_module"] += 1
            return [
                ToHost(conn, hl.NicvmDone(req.handle, "no_module", 0, f"no module {req.name!r}"))
            ]
        self.counters["delegated"] += 1
        event = hl.RecvEvent(self.node_id, port, req.payload, int(MsgType.NICVM_DATA), req.root,
                             req.args, req.comm)  # fmt: skip
        return self._invoke(loaded, port, conn, event, req.name, req.handle, now)

    def _invoke(
        self, loaded: Loaded, port: int, conn: int, event: hl.RecvEvent, name: str,
        handle: int | None, now: float, hops: int = 0,
    ) -> list[EngineAction]:  # fmt: skip
        """Run ``loaded`` on ``event`` (as received on ``port``, after ``hops`` module sends)
        and act on its result."""
        nodes = self._nodes(port, event.mcast_group)
        rank = -1 if nodes is None else _index(nodes, self.node_id)
        counters = loaded.counters
        counters["invocations"] += 1
        if nodes is None or rank < 0 or event.am_handler >= len(nodes):
            counters["no_comm"] += 1
            return self._failed(loaded, conn, event, handle, "no_comm",
                                f"no rank for node {self.node_id} in communicator "
                                f"{event.mcast_group} with root {event.am_handler}", 0)  # fmt: skip
        payload = bytearray(event.payload)
        args = list(event.args)
        packet = Packet(rank, len(nodes), event.am_handler, args, payload)
        result = run(loaded.module, packet, fuel=self.config.fuel)
        counters["instructions"] += result.fuel_used
        if self.trace is not None:
            self.trace.append((K_NICVM_RUN, name, result.fuel_used, len(result.sends),
                               result.outcome.value, int(result.result)))  # fmt: skip
        if result.outcome is not Outcome.OK:
            counters[result.outcome.value] += 1
            detail = result.fault.value if result.fault is not None else result.detail
            if result.outcome is Outcome.OUT_OF_FUEL:
                detail = f"out of fuel after {result.fuel_used} instructions"
            return self._failed(loaded, conn, event, handle, result.outcome.value, detail,
                                result.line or 0)  # fmt: skip
        counters["ok"] += 1
        new_args = (args[0], args[1], args[2], args[3])
        delivery: ToHost | None = None
        if result.result is Result.PACKET_CONSUMED:
            counters["consumed"] += 1
        else:
            delivery = ToHost(conn, hl.RecvEvent(event.src_node, event.src_port, bytes(payload),
                                                 event.msg_type, event.am_handler, new_args,
                                                 event.mcast_group))  # fmt: skip
        out: list[EngineAction] = []
        if delivery is None and handle is None:
            out += self._give_back(port, now)
        sends = self._within_budget(result.sends, hops)
        if not sends:
            if delivery is not None and handle is None:
                out.append(delivery)
            elif handle is not None:
                out.append(ToHost(conn, hl.NicvmDone(handle, "ok", int(result.result))))
                if delivery is not None:
                    out.append(delivery)
            return out
        preamble = encode_preamble(name, event.am_handler, event.mcast_group, hops + 1)
        message = preamble + bytes(payload)
        counters["sends"] += len(sends)
        ctx = _SendContext(port, deque(_targets(nodes, sends, message, new_args)),
                           delivery=delivery,
                           done=None if handle is None else (conn, handle),
                           result=int(result.result))  # fmt: skip
        return out + self._start_sends(ctx, now)

    def _within_budget(
        self, sends: tuple[SendDescriptor, ...], hops: int
    ) -> tuple[SendDescriptor, ...]:
        """The module's sends, or none when the packet made its last hop or this NIC has too
        many module sends in flight (each dropped send counted)."""
        if not sends:
            return sends
        if hops >= self.config.max_hops:
            self.counters["hop_limit"] += len(sends)
            return ()
        if len(self._contexts) + len(sends) > self.config.max_sends_outstanding:
            self.counters["send_budget"] += len(sends)
            return ()
        return sends

    def _failed(
        self, loaded: Loaded, conn: int, event: hl.RecvEvent, handle: int | None, outcome: str,
        detail: str, line: int,
    ) -> list[EngineAction]:  # fmt: skip
        """A module failed: count it, tell its owner; the packet goes to the host as it came
        (a delegation gets the failure instead)."""
        self.counters[outcome] += 1
        if handle is not None:
            return [ToHost(conn, hl.NicvmDone(handle, outcome, int(Result.FAILURE), detail, line))]
        out: list[EngineAction] = [ToHost(conn, event)]
        if loaded.owner is not None:
            out.append(ToPort(loaded.owner, hl.NicvmReport(loaded.name, outcome, detail, line)))
        return out

    # -- module sends (Figs 4.7-4.8) ----------------------------------------------------------

    def on_done(self, done: SendComplete | SendFailed, *, now: float) -> list[CoreAction] | None:
        """A transport completion: a module send's (None when it is the host's)."""
        if not self.owns(done.port, done.handle):
            return None
        failed = done if isinstance(done, SendFailed) else None
        return self.on_send_done(done.port, done.handle, failed, now=now)

    def owns(self, port: int, handle: int) -> bool:
        """Whether a transport completion for (``port``, ``handle``) is a module send."""
        return (port, handle) in self._contexts

    def on_send_done(self, port: int, handle: int, failed: SendFailed | None, *, now: float
                     ) -> list[EngineAction]:  # fmt: skip
        """A module send completed (or failed: counted; the rest still go out)."""
        ctx = self._contexts.pop((port, handle))
        ctx.outstanding -= 1
        if failed is not None:
            ctx.failed += 1
            self.counters["send_failed"] += 1
        return self._start_sends(ctx, now)

    def _start_sends(self, ctx: _SendContext, now: float) -> list[EngineAction]:
        out: list[EngineAction] = []
        burst = len(ctx.pending) if self.config.pipelined else 1
        while ctx.pending and ctx.outstanding < burst:
            node, message, args = ctx.pending.popleft()
            handle = self._next_handle
            self._next_handle = HANDLE_BASE + ((handle - HANDLE_BASE + 1) & 0x7FFF_FFFF)
            try:
                actions = self._send(
                    now=now, src_port=ctx.port, dst_node=node, dst_port=ctx.port,
                    msg_type=MsgType.NICVM_DATA, payload=message, handle=handle, args=args,
                )  # fmt: skip
            except UsageError:
                ctx.failed += 1
                self.counters["send_failed"] += 1
                continue
            ctx.outstanding += 1
            self._contexts[(ctx.port, handle)] = ctx
            if len(self._contexts) > self.counters["max_sends_outstanding"]:
                self.counters["max_sends_outstanding"] = len(self._contexts)
            for action in actions:
                if isinstance(action, SendFailed) and action.handle == handle:
                    del self._contexts[(ctx.port, handle)]  # failed at once (dead peer)
                    ctx.outstanding -= 1
                    ctx.failed += 1
                    self.counters["send_failed"] += 1
                else:
                    out.append(action)
        if ctx.outstanding or ctx.pending:
            return out
        if ctx.delivery is not None:
            out.append(ctx.delivery)
        if ctx.done is not None:
            outcome, detail = (
                ("ok", "") if not ctx.failed else ("send_failed", f"{ctx.failed} sends failed")
            )
            out.insert(
                0, ToHost(ctx.done[0], hl.NicvmDone(ctx.done[1], outcome, ctx.result, detail))
            )
        return out

    # -- helpers ----------------------------------------------------------------------------

    def _nodes(self, port: int, comm: int) -> tuple[int, ...] | None:
        nodes = self._comms.get((port, comm))
        if nodes is None and comm == 0:
            return tuple(range(self._world_size()))
        return nodes

    def _give_back(self, port: int, now: float) -> list[EngineAction]:
        """Nothing goes to the host: the receive token the message took comes back."""
        return [GiveBack(port)]

    def stats(self) -> dict[str, object] | None:
        """Counters and the loaded modules, JSON-able."""
        return {"counters": dict(self.counters), "modules": [m.describe() for m in
                                                             self.modules.values()],
                "sends_outstanding": len(self._contexts)}  # fmt: skip


def _index(nodes: tuple[int, ...], node: int) -> int:
    try:
        return nodes.index(node)
    except ValueError:
        return -1


def _targets(
    nodes: tuple[int, ...],
    sends: tuple[SendDescriptor, ...],
    message: bytes,
    args: tuple[int, int, int, int],
) -> list[tuple[int, bytes, tuple[int, int, int, int]]]:
    return [(nodes[s.rank], message, args) for s in sends]


class NicvmOff(NicService):
    """NICVM disabled on this NIC: its records get a refusal of their own kind (a delegation
    its NicvmDone, a communicator map nothing); NICVM messages are delivered as they came."""

    record_types: ClassVar[tuple[type, ...]] = NICVM_RECORDS
    family: ClassVar[str] = "NICVM request"

    def on_host(
        self, state: PortState, record: hl.HostRecord, *, now: float
    ) -> list[CoreAction] | str:
        """Every NICVM request: NICVM is off."""
        if isinstance(record, hl.NicvmDelegateReq):
            return [ToHost(state.conn, hl.NicvmDone(record.handle, "disabled", 2, "NICVM is off"))]
        if isinstance(record, hl.NicvmCommReq):
            return []
        return [ToHost(state.conn, hl.NicvmReply(False, "NICVM is disabled on this NIC"))]
