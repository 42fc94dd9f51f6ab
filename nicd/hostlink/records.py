"""The host <-> nicd ("PCI") record codec: struct for small records, msgpack for structured ones.

One Unix SOCK_SEQPACKET record is one message on the PCI bus. Every record starts with a
one-byte opcode. A message payload longer than ``CHUNK_BYTES`` travels as its head record
(which states the total length) followed by ``CONT`` records, so no record outgrows the
socket buffer; :class:`Assembler` puts them back together. No I/O here.

Invariants: records of one connection arrive in order (SEQPACKET guarantees it), so a
head record is always followed by exactly the ``CONT`` records its length implies, and
nothing else of that connection comes in between.

Records are slotted dataclasses treated as immutable but not ``frozen``: on CPython 3.11 a
frozen one with 15 fields takes 1.7 us to build against 0.3 us, and every packet builds several.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import cast

import msgpack

from nicd.errors import ProtocolViolation
from nicd.hostlink.grim import GRIM_OPS, GrimRecord, decode_grim, encode_grim

__all__ = [
    "ANY_PORT",
    "CHUNK_BYTES",
    "MAX_RECORD_BYTES",
    "NICVM_MAX_DELEGATE",
    "NICVM_REQUESTS",
    "Assembler",
    "CloseReq",
    "DeregisterReq",
    "ErrorEvent",
    "HostOp",
    "HostRecord",
    "McastErrorEvent",
    "McastFreeReq",
    "McastGroupOk",
    "McastGroupReq",
    "McastSendReq",
    "MultiSendReq",
    "NicvmCommReq",
    "NicvmDelegateReq",
    "NicvmDone",
    "NicvmListReq",
    "NicvmLoadReq",
    "NicvmPurgeReq",
    "NicvmReply",
    "NicvmReport",
    "OpenReq",
    "Opened",
    "ProvideReq",
    "RecvEvent",
    "Refused",
    "RegisterReq",
    "Registered",
    "RmWriteEvent",
    "RoutesOk",
    "SendReq",
    "SentBatch",
    "SentEvent",
    "SetRoutesReq",
    "SignalCtl",
    "StatsReply",
    "StatsReq",
    "encode_record",
]

CHUNK_BYTES = 64 * 1024  # payload bytes per record; SEQPACKET's default limit is ~208 KiB
MAX_RECORD_BYTES = CHUNK_BYTES + 256  # receive buffer size that fits any record
ANY_PORT = 0xFFFF  # OpenReq.port meaning "any free port"


class HostOp(IntEnum):
    """First byte of every record."""

    OPEN = 1
    SEND = 2
    PROVIDE = 3
    CLOSE = 4
    SET_ROUTES = 5
    GET_STATS = 6
    REGISTER = 7
    DEREGISTER = 8
    SIGNALS = 9
    OPENED = 20
    RECV = 21
    SENT = 22
    ERROR = 23
    ROUTES_OK = 24
    STATS = 25
    REFUSED = 26
    REGISTERED = 27
    RM_DONE = 28
    SENT_MANY = 29
    CONT = 40
    RM_MAP = 80
    RM_UNMAP = 81
    RM_XLATE_REQ = 82
    RM_XLATE = 83
    RM_STATUS = 84
    MCAST_GROUP = 60
    MCAST_FREE = 61
    MCAST_SEND = 62
    MULTISEND = 63
    MCAST_GROUP_OK = 64
    MCAST_ERROR = 65
    NICVM_LOAD = 70
    NICVM_PURGE = 71
    NICVM_LIST = 72
    NICVM_COMM = 73
    NICVM_DELEGATE = 74
    NICVM_REPLY = 75
    NICVM_DONE = 76
    NICVM_REPORT = 77


# OPEN:     op (8) | port (16)
_OPEN = struct.Struct(">BH")
# SEND:     op (8) | msg type (8) | handle (32) | dst node (16) | dst port (16) | AM handler (16)
#           | user args 4 x 32 | message length (32), then the first chunk of payload
_SEND = struct.Struct(">BBIHHH4II")
# PROVIDE:  op (8) | receive tokens added (32)
_PROVIDE = struct.Struct(">BI")
# OPENED:   op (8) | port (16) | node id (16) | nodes in the job (16) | send tokens (16)
_OPENED = struct.Struct(">BHHHH")
# RECV:     op (8) | msg type (8) | src node (16) | src port (16) | AM handler (16)
#           | multicast group (16) | user args 4 x 32 | message length (32), then payload
_RECV = struct.Struct(">BBHHHH4II")
# SENT:     op (8) | handle (32)
_SENT = struct.Struct(">BI")
# SENT_MANY: op (8), then handles (32 each)
_HANDLE = struct.Struct(">I")
# ERROR:    op (8) | handle (32) | dst node (16), then the reason in UTF-8
_ERROR = struct.Struct(">BIH")
# REGISTER: op (8) | region id (16) | size (32), then the shared-memory name in UTF-8
_REGISTER = struct.Struct(">BHI")
# DEREGISTER, REGISTERED: op (8) | region id (16)
_REGION = struct.Struct(">BH")
# RM_DONE:  op (8) | src node (16) | src port (16) | region id (16) | offset (32) | length (32)
#           | user args 4 x 32
_RM_DONE = struct.Struct(">BHHHII4I")
# SIGNALS:  op (8) | enable (8) | host pid (32) | application-bypass events seen (32)
_SIGNALS = struct.Struct(">BBII")
_OP = struct.Struct(">B")
# MCAST_GROUP: op (8) | update (8) | group (16) | epoch (16) | root (16) | parent (16,
#           NO_NODE at the root) | children count (16), then the children (16 each)
_MCAST_GROUP = struct.Struct(">BBHHHHH")
# MCAST_FREE, MCAST_GROUP_OK: op (8) | group (16)
_MCAST_GID = struct.Struct(">BH")
# MCAST_SEND: op (8) | handle (32) | group (16) | AM handler (16) | user args 4 x 32
#           | message length (32), then the first chunk of payload
_MCAST_SEND = struct.Struct(">BIHH4II")
# MULTISEND: op (8) | msg type (8) | handle (32) | dst port (16) | AM handler (16)
#           | user args 4 x 32 | destinations (16) | message length (32), then the
#           destination nodes (16 each), then the first chunk of payload
_MULTISEND = struct.Struct(">BBIHH4IHI")
# MCAST_ERROR: op (8) | group (16) | child (16), then the reason in UTF-8
_MCAST_ERROR = struct.Struct(">BHH")
_NODE = struct.Struct(">H")
NO_NODE = 0xFFFF  # MCAST_GROUP parent field at the root

Args = tuple[int, int, int, int]


@dataclass(slots=True)
class OpenReq:
    """Open a GM port (``ANY_PORT`` for any free one)."""

    port: int = ANY_PORT


@dataclass(slots=True)
class SendReq:
    """Send ``payload`` to (``dst_node``, ``dst_port``); ``handle`` names it in SENT/ERROR."""

    handle: int
    dst_node: int
    dst_port: int
    payload: bytes
    msg_type: int = 1
    am_handler: int = 0
    args: Args = (0, 0, 0, 0)


@dataclass(slots=True)
class ProvideReq:
    """Give the NIC ``count`` more receive tokens (buffers for incoming messages)."""

    count: int


@dataclass(slots=True)
class CloseReq:
    """Close the port; its pending sends fail."""


@dataclass(slots=True)
class SetRoutesReq:
    """Management: the routing table, node id -> (host, UDP port)."""

    routes: dict[int, tuple[str, int]]


@dataclass(slots=True)
class StatsReq:
    """Management: ask for the counters."""


@dataclass(slots=True)
class RegisterReq:
    """Register the shared-memory segment ``name`` (``size`` bytes) as region ``region``
    of this port, so the NIC can place remote-memory writes into it."""

    region: int
    size: int
    name: str


@dataclass(slots=True)
class DeregisterReq:
    """Forget region ``region``; later writes into it are refused."""

    region: int


@dataclass(slots=True)
class SignalCtl:
    """Enable or disable signals on this port (thesis 3.4.1). Enabling also acknowledges the
    signal raised last: the NIC signals again at once if it has delivered more
    application-bypass messages than the host has ``seen`` (so none arriving in between is
    missed). ``pid`` is the host process to signal (SIGUSR1)."""

    enable: bool
    pid: int
    seen: int = 0
    """Application-bypass (AB_COLL) messages the host has taken in so far, modulo 2**32."""


@dataclass(slots=True)
class Registered:
    """Region ``region`` is registered."""

    region: int


@dataclass(slots=True)
class RmWriteEvent:
    """A remote-memory write landed in region ``region`` at ``offset`` (``length`` bytes);
    no receive token was used."""

    src_node: int
    src_port: int
    region: int
    offset: int
    length: int
    args: Args = (0, 0, 0, 0)


@dataclass(slots=True)
class Opened:
    """The port is open."""

    port: int
    node_id: int
    num_nodes: int
    send_tokens: int


@dataclass(slots=True)
class RecvEvent:
    """A message arrived for this port (it used one receive token)."""

    src_node: int
    src_port: int
    payload: bytes
    msg_type: int = 1
    am_handler: int = 0
    args: Args = (0, 0, 0, 0)
    mcast_group: int = 0


@dataclass(slots=True)
class SentEvent:
    """The send ``handle`` was acknowledged by the destination NIC; its token is back."""

    handle: int


@dataclass(slots=True)
class SentBatch:
    """Several sends completed: SENT events coalesced into one record (one host wake-up)."""

    handles: tuple[int, ...]


@dataclass(slots=True)
class ErrorEvent:
    """The send ``handle`` failed (``peer_dead``, ``no_port``, ``no_route``, ``closed``, ...);
    its send token is back."""

    handle: int
    dst_node: int
    reason: str


@dataclass(slots=True)
class RoutesOk:
    """Management: the routing table was installed."""


@dataclass(slots=True)
class StatsReply:
    """Management: the counters."""

    stats: dict[str, object]


@dataclass(slots=True)
class Refused:
    """A request was refused (misuse); ``reason`` says why."""

    reason: str


@dataclass(slots=True)
class McastGroupReq:
    """Post (or, with ``update``, replace under a new ``epoch``) this node's part of the
    multicast tree of group ``group`` (seed 001 §5.5: the host builds the tree, the NIC
    keeps it); the NIC answers McastGroupOk or Refused. The requesting port is the group's
    local port: it sends at the root, receives elsewhere and hears the group's errors."""

    group: int
    root: int
    parent: int | None
    """None exactly at the root."""
    children: tuple[int, ...]
    """In the order the NIC sends to them."""
    epoch: int = 0
    update: bool = False


@dataclass(slots=True)
class McastFreeReq:
    """Forget group ``group`` (unfinished multicasts from it end with an ERROR)."""

    group: int


@dataclass(slots=True)
class McastSendReq:
    """At the root: multicast ``payload`` on ``group``; the NIC replicates and forwards it
    (seed 001 §3). ``handle`` names it in SENT (every child acknowledged) or ERROR."""

    handle: int
    group: int
    payload: bytes
    am_handler: int = 0
    args: Args = (0, 0, 0, 0)


@dataclass(slots=True)
class MultiSendReq:
    """Send one message to port ``dst_port`` of each node in ``dests``: handed to the NIC
    once, replicated by it. One SENT when every copy was acknowledged, else one ERROR."""

    handle: int
    dests: tuple[int, ...]
    dst_port: int
    payload: bytes
    msg_type: int = 1
    am_handler: int = 0
    args: Args = (0, 0, 0, 0)


@dataclass(slots=True)
class McastGroupOk:
    """The group request for ``group`` took effect."""

    group: int


@dataclass(slots=True)
class McastErrorEvent:
    """Multicast child ``child`` of ``group`` is dead (``reason``: ``retries`` or
    ``peer_dead``): this NIC sends it nothing more on the group (seed 001: an error at the
    parent, not a hang)."""

    group: int
    child: int
    reason: str


# -- NICVM (thesis ch. 4): module upload, purge, list, communicator map, delegation -----------
# NICVM_DELEGATE: op (8) | handle (32) | root rank (16) | communicator id (16) | user args 4 x 32
#                 | name length (8), then the name (UTF-8), then the payload (one record)
_DELEGATE = struct.Struct(">BIHH4IB")
NICVM_MAX_DELEGATE = CHUNK_BYTES - 512  # payload bytes of one delegated message


@dataclass(slots=True)
class NicvmLoadReq:
    """Compile ``source`` into the NIC as module ``name`` (replacing one of that name). Unless
    ``persist``, the module is purged when this port closes. Answered by a NicvmReply."""

    name: str
    source: str
    persist: bool = False


@dataclass(slots=True)
class NicvmPurgeReq:
    """Remove module ``name``. Answered by a NicvmReply."""

    name: str


@dataclass(slots=True)
class NicvmListReq:
    """List the loaded modules. Answered by a NicvmReply with ``modules``."""


@dataclass(slots=True)
class NicvmCommReq:
    """The communicator map of this port (thesis §4.3.4): rank i of communicator ``comm`` is
    node ``nodes[i]`` (same port). Modules see rank, size and root through it. No reply."""

    comm: int
    nodes: tuple[int, ...]


@dataclass(slots=True)
class NicvmDelegateReq:
    """Hand ``payload`` to this NIC's module ``name`` as if it had arrived (the loopback path
    of Fig 4.5), for root rank ``root`` of communicator ``comm``. Answered by a NicvmDone
    naming ``handle`` once the module ran and its sends completed."""

    handle: int
    name: str
    root: int
    comm: int
    payload: bytes
    args: Args = (0, 0, 0, 0)


@dataclass(slots=True)
class NicvmReply:
    """The answer to a load, purge or list. A refused module gives ``ok`` False with the
    compiler's ``error`` and its ``line``/``column`` (0 when not about a position)."""

    ok: bool
    error: str = ""
    line: int = 0
    column: int = 0
    modules: list[dict[str, object]] | None = None


@dataclass(slots=True)
class NicvmDone:
    """A delegated message ``handle`` is finished: ``outcome`` ``ok``, ``out_of_fuel``,
    ``fault``, ``vm_error``, ``no_module``, ``no_comm`` or ``send_failed``; ``result`` is the
    module's result code; ``detail`` and ``line`` describe a failure."""

    handle: int
    outcome: str
    result: int = 0
    detail: str = ""
    line: int = 0


@dataclass(slots=True)
class NicvmReport:
    """To the owner of module ``name``: an invocation on a received packet failed
    (``outcome`` as in NicvmDone); the packet went to the host as it arrived."""

    name: str
    outcome: str
    detail: str = ""
    line: int = 0


HostRecord = (
    OpenReq
    | SendReq
    | ProvideReq
    | CloseReq
    | SetRoutesReq
    | StatsReq
    | RegisterReq
    | DeregisterReq
    | SignalCtl
    | Registered
    | RmWriteEvent
    | Opened
    | RecvEvent
    | SentEvent
    | SentBatch
    | ErrorEvent
    | RoutesOk
    | StatsReply
    | Refused
    | GrimRecord
    | McastGroupReq
    | McastFreeReq
    | McastSendReq
    | MultiSendReq
    | McastGroupOk
    | McastErrorEvent
    | NicvmLoadReq
    | NicvmPurgeReq
    | NicvmListReq
    | NicvmCommReq
    | NicvmDelegateReq
    | NicvmReply
    | NicvmDone
    | NicvmReport
)


def _chunked(head: bytes, payload: bytes) -> list[bytes]:
    first = head + payload[:CHUNK_BYTES]
    if len(payload) <= CHUNK_BYTES:
        return [first]
    cont = bytes((HostOp.CONT,))
    view = memoryview(payload)
    rest = [cont + view[i : i + CHUNK_BYTES] for i in range(CHUNK_BYTES, len(payload), CHUNK_BYTES)]
    return [first, *rest]


def _packb(op: HostOp, obj: object) -> bytes:
    packed: bytes = msgpack.packb(obj, use_bin_type=True)
    return bytes((op,)) + packed


def encode_record(rec: HostRecord) -> list[bytes]:
    """Encode a record as the list of SEQPACKET records that carry it."""
    if isinstance(rec, GrimRecord):  # GRIM remote memory (nicd.grimlink)
        return encode_grim(rec)
    if isinstance(rec, SendReq):
        head = _SEND.pack(
            HostOp.SEND,
            rec.msg_type,
            rec.handle,
            rec.dst_node,
            rec.dst_port,
            rec.am_handler,
            *rec.args,
            len(rec.payload),
        )
        return _chunked(head, rec.payload)
    if isinstance(rec, RecvEvent):
        head = _RECV.pack(
            HostOp.RECV,
            rec.msg_type,
            rec.src_node,
            rec.src_port,
            rec.am_handler,
            rec.mcast_group,
            *rec.args,
            len(rec.payload),
        )
        return _chunked(head, rec.payload)
    if isinstance(rec, SentEvent):
        return [_SENT.pack(HostOp.SENT, rec.handle)]
    if isinstance(rec, SentBatch):
        if len(rec.handles) * _HANDLE.size >= MAX_RECORD_BYTES:
            raise ValueError(f"{len(rec.handles)} handles do not fit one record")
        return [struct.pack(f">B{len(rec.handles)}I", HostOp.SENT_MANY, *rec.handles)]
    if isinstance(rec, ProvideReq):
        return [_PROVIDE.pack(HostOp.PROVIDE, rec.count)]
    if isinstance(rec, ErrorEvent):
        return [_ERROR.pack(HostOp.ERROR, rec.handle, rec.dst_node) + rec.reason.encode()]
    if isinstance(rec, RmWriteEvent):
        fields = (HostOp.RM_DONE, rec.src_node, rec.src_port, rec.region, rec.offset, rec.length)
        return [_RM_DONE.pack(*fields, *rec.args)]
    if isinstance(rec, RegisterReq):
        return [_REGISTER.pack(HostOp.REGISTER, rec.region, rec.size) + rec.name.encode()]
    if isinstance(rec, DeregisterReq):
        return [_REGION.pack(HostOp.DEREGISTER, rec.region)]
    if isinstance(rec, SignalCtl):
        return [_SIGNALS.pack(HostOp.SIGNALS, int(rec.enable), rec.pid, rec.seen)]
    if isinstance(rec, Registered):
        return [_REGION.pack(HostOp.REGISTERED, rec.region)]
    if isinstance(rec, OpenReq):
        return [_OPEN.pack(HostOp.OPEN, rec.port)]
    if isinstance(rec, Opened):
        return [_OPENED.pack(HostOp.OPENED, rec.port, rec.node_id, rec.num_nodes, rec.send_tokens)]
    if isinstance(rec, CloseReq):
        return [_OP.pack(HostOp.CLOSE)]
    if isinstance(rec, StatsReq):
        return [_OP.pack(HostOp.GET_STATS)]
    if isinstance(rec, RoutesOk):
        return [_OP.pack(HostOp.ROUTES_OK)]
    if isinstance(rec, SetRoutesReq):
        table = {node: [host, port] for node, (host, port) in rec.routes.items()}
        return [_packb(HostOp.SET_ROUTES, table)]
    if isinstance(rec, StatsReply):
        return [_packb(HostOp.STATS, rec.stats)]
    if isinstance(rec, McastSendReq):
        head = _MCAST_SEND.pack(HostOp.MCAST_SEND, rec.handle, rec.group, rec.am_handler,
                                *rec.args, len(rec.payload))  # fmt: skip
        return _chunked(head, rec.payload)
    if isinstance(rec, MultiSendReq):
        head = _MULTISEND.pack(
            HostOp.MULTISEND,
            rec.msg_type,
            rec.handle,
            rec.dst_port,
            rec.am_handler,
            *rec.args,
            len(rec.dests),
            len(rec.payload),
        )
        dests = b"".join(_NODE.pack(d) for d in rec.dests)  # fmt: skip
        return _chunked(head + dests, rec.payload)
    if isinstance(rec, McastGroupReq):
        parent = NO_NODE if rec.parent is None else rec.parent
        head = _MCAST_GROUP.pack(HostOp.MCAST_GROUP, int(rec.update), rec.group, rec.epoch,
                                 rec.root, parent, len(rec.children))  # fmt: skip
        return [head + b"".join(_NODE.pack(c) for c in rec.children)]
    if isinstance(rec, McastFreeReq):
        return [_MCAST_GID.pack(HostOp.MCAST_FREE, rec.group)]
    if isinstance(rec, McastGroupOk):
        return [_MCAST_GID.pack(HostOp.MCAST_GROUP_OK, rec.group)]
    if isinstance(rec, McastErrorEvent):
        return [_MCAST_ERROR.pack(HostOp.MCAST_ERROR, rec.group, rec.child) + rec.reason.encode()]
    if not isinstance(rec, Refused):
        return [_encode_nicvm(rec)]
    return [bytes((HostOp.REFUSED,)) + rec.reason.encode()]


class Assembler:
    """Decodes the records of one connection, joining chunked payloads.

    ``feed`` raises :class:`ProtocolViolation` for a malformed record; the caller decides
    whether that ends the connection.
    """

    def __init__(self, max_message: int = 1 << 30) -> None:
        self._max_message = max_message
        self._head: SendReq | RecvEvent | McastSendReq | MultiSendReq | None = None
        self._parts: list[bytes] = []
        self._missing = 0

    def feed(self, record: bytes) -> HostRecord | None:
        """Take one SEQPACKET record; return a whole record when one is complete."""
        try:
            return self._feed(record)
        except (struct.error, IndexError, ValueError, TypeError, UnicodeDecodeError) as exc:
            raise ProtocolViolation(f"malformed host record: {exc}") from None
        except msgpack.UnpackException as exc:
            raise ProtocolViolation(f"malformed host record: {exc}") from None

    def _feed(self, record: bytes) -> HostRecord | None:
        op = record[0]
        if self._missing:
            if op != HostOp.CONT:
                raise ProtocolViolation(f"expected CONT, got opcode {op}")
            part = record[1:]
            if len(part) > self._missing:
                raise ProtocolViolation("CONT longer than the message")
            self._parts.append(part)
            self._missing -= len(part)
            return self._finish() if not self._missing else None
        if op == HostOp.SEND:
            m, handle, node, port, am, a0, a1, a2, a3, total = _SEND.unpack_from(record)[1:]
            first = record[_SEND.size :]
            head: SendReq | RecvEvent = SendReq(handle, node, port, b"", m, am, (a0, a1, a2, a3))
            return self._start(head, total, first)
        if op == HostOp.RECV:
            m, node, port, am, group, a0, a1, a2, a3, total = _RECV.unpack_from(record)[1:]
            first = record[_RECV.size :]
            head = RecvEvent(node, port, b"", m, am, (a0, a1, a2, a3), group)
            return self._start(head, total, first)
        if op == HostOp.SENT:
            return SentEvent(_SENT.unpack(record)[1])
        if op == HostOp.SENT_MANY:
            if (len(record) - 1) % _HANDLE.size:
                raise ProtocolViolation("SENT_MANY is not a whole number of handles")
            return SentBatch(tuple(h for (h,) in _HANDLE.iter_unpack(record[1:])))
        if op == HostOp.PROVIDE:
            return ProvideReq(_PROVIDE.unpack(record)[1])
        if op == HostOp.ERROR:
            _, handle, node = _ERROR.unpack_from(record)
            return ErrorEvent(handle, node, record[_ERROR.size :].decode())
        if op == HostOp.RM_DONE:
            node, port, region, offset, length, a0, a1, a2, a3 = _RM_DONE.unpack(record)[1:]
            return RmWriteEvent(node, port, region, offset, length, (a0, a1, a2, a3))
        if op == HostOp.REGISTER:
            _, region, size = _REGISTER.unpack_from(record)
            return RegisterReq(region, size, record[_REGISTER.size :].decode())
        if op == HostOp.DEREGISTER:
            return DeregisterReq(_REGION.unpack(record)[1])
        if op == HostOp.SIGNALS:
            _, enable, pid, seen = _SIGNALS.unpack(record)
            if enable > 1:
                raise ProtocolViolation(f"SIGNALS enable flag {enable}")
            return SignalCtl(bool(enable), pid, seen)
        if op == HostOp.REGISTERED:
            return Registered(_REGION.unpack(record)[1])
        if op == HostOp.OPEN:
            return OpenReq(_OPEN.unpack(record)[1])
        if op == HostOp.OPENED:
            return Opened(*_OPENED.unpack(record)[1:])
        if op == HostOp.CLOSE:
            return CloseReq()
        if op == HostOp.GET_STATS:
            return StatsReq()
        if op == HostOp.ROUTES_OK:
            return RoutesOk()
        if op == HostOp.SET_ROUTES:
            return SetRoutesReq(_decode_routes(msgpack.unpackb(record[1:], strict_map_key=False)))
        if op == HostOp.STATS:
            stats = msgpack.unpackb(record[1:], strict_map_key=False)
            if not isinstance(stats, dict):
                raise ProtocolViolation("STATS is not a map")
            return StatsReply(stats)
        if op == HostOp.REFUSED:
            return Refused(record[1:].decode())
        if op in GRIM_OPS:
            return decode_grim(op, record)
        if HostOp.MCAST_GROUP <= op <= HostOp.MCAST_ERROR:
            return self._mcast(op, record)
        if HostOp.NICVM_LOAD <= op <= HostOp.NICVM_REPORT:
            return _decode_nicvm(HostOp(op), record)
        raise ProtocolViolation(f"unknown opcode {op}")

    def _start(
        self, head: SendReq | RecvEvent | McastSendReq | MultiSendReq, total: int, first: bytes
    ) -> HostRecord | None:
        if total > self._max_message:
            raise ProtocolViolation(f"message of {total} bytes exceeds {self._max_message}")
        if len(first) > total:
            raise ProtocolViolation("payload longer than its stated length")
        self._head, self._parts, self._missing = head, [first], total - len(first)
        return self._finish() if not self._missing else None

    def _finish(self) -> HostRecord:
        head, parts = self._head, self._parts
        assert head is not None
        self._head, self._parts = None, []
        payload = parts[0] if len(parts) == 1 else b"".join(parts)
        if isinstance(head, McastSendReq | MultiSendReq):
            head.payload = payload  # a fresh record, made by _mcast for this message
            return head
        if isinstance(head, SendReq):
            return SendReq(
                head.handle, head.dst_node, head.dst_port, payload, head.msg_type,
                head.am_handler, head.args,
            )  # fmt: skip
        return RecvEvent(
            head.src_node, head.src_port, payload, head.msg_type, head.am_handler, head.args,
            head.mcast_group,
        )  # fmt: skip

    def _mcast(self, op: int, record: bytes) -> HostRecord | None:
        """Decode the multicast records (HostOp 60-69)."""
        if op == HostOp.MCAST_SEND:
            handle, group, am, a0, a1, a2, a3, total = _MCAST_SEND.unpack_from(record)[1:]
            head = McastSendReq(handle, group, b"", am, (a0, a1, a2, a3))
            return self._start(head, total, record[_MCAST_SEND.size :])
        if op == HostOp.MULTISEND:
            fields = _MULTISEND.unpack_from(record)[1:]
            m, handle, port, am, a0, a1, a2, a3, count, total = fields
            end = _MULTISEND.size + count * _NODE.size
            if len(record) < end:
                raise ProtocolViolation("MULTISEND shorter than its destination list")
            dests = tuple(d for (d,) in _NODE.iter_unpack(record[_MULTISEND.size : end]))
            multi = MultiSendReq(handle, dests, port, b"", m, am, (a0, a1, a2, a3))
            return self._start(multi, total, record[end:])
        if op == HostOp.MCAST_GROUP:
            update, group, epoch, root, parent, count = _MCAST_GROUP.unpack_from(record)[1:]
            if update > 1 or len(record) != _MCAST_GROUP.size + count * _NODE.size:
                raise ProtocolViolation("malformed MCAST_GROUP")
            kids = tuple(c for (c,) in _NODE.iter_unpack(record[_MCAST_GROUP.size :]))
            up = None if parent == NO_NODE else parent
            return McastGroupReq(group, root, up, kids, epoch, bool(update))
        if op == HostOp.MCAST_FREE:
            return McastFreeReq(_MCAST_GID.unpack(record)[1])
        if op == HostOp.MCAST_GROUP_OK:
            return McastGroupOk(_MCAST_GID.unpack(record)[1])
        if op == HostOp.MCAST_ERROR:
            _, group, child = _MCAST_ERROR.unpack_from(record)
            return McastErrorEvent(group, child, record[_MCAST_ERROR.size :].decode())
        raise ProtocolViolation(f"unknown opcode {op}")


def _decode_routes(obj: object) -> dict[int, tuple[str, int]]:
    if not isinstance(obj, dict):
        raise ProtocolViolation("routing table is not a map")
    routes: dict[int, tuple[str, int]] = {}
    for node, addr in obj.items():
        if not isinstance(node, int) or not isinstance(addr, list | tuple) or len(addr) != 2:
            raise ProtocolViolation(f"bad route entry {node!r}: {addr!r}")
        host, port = addr
        if not isinstance(host, str) or not isinstance(port, int):
            raise ProtocolViolation(f"bad route entry {node!r}: {addr!r}")
        routes[node] = (host, port)
    return routes


NICVM_REQUESTS = (NicvmLoadReq, NicvmPurgeReq, NicvmListReq, NicvmCommReq, NicvmDelegateReq)
"""The NICVM records a host sends (the NIC answers with the others)."""


def _encode_nicvm(
    rec: NicvmLoadReq
    | NicvmPurgeReq
    | NicvmListReq
    | NicvmCommReq
    | NicvmDelegateReq
    | NicvmReply
    | NicvmDone
    | NicvmReport,
) -> bytes:
    if isinstance(rec, NicvmDelegateReq):
        name = rec.name.encode()
        if len(rec.payload) > NICVM_MAX_DELEGATE or not 0 < len(name) < 256:
            raise ValueError("delegated message too large or bad module name")
        head = _DELEGATE.pack(HostOp.NICVM_DELEGATE, rec.handle, rec.root & 0xFFFF,
                              rec.comm & 0xFFFF, *rec.args, len(name))  # fmt: skip
        return head + name + rec.payload
    if isinstance(rec, NicvmLoadReq):
        return _packb(HostOp.NICVM_LOAD, [rec.name, rec.source, rec.persist])
    if isinstance(rec, NicvmPurgeReq):
        return _packb(HostOp.NICVM_PURGE, rec.name)
    if isinstance(rec, NicvmListReq):
        return _OP.pack(HostOp.NICVM_LIST)
    if isinstance(rec, NicvmCommReq):
        return _packb(HostOp.NICVM_COMM, [rec.comm, list(rec.nodes)])
    if isinstance(rec, NicvmReply):
        return _packb(HostOp.NICVM_REPLY, [rec.ok, rec.error, rec.line, rec.column, rec.modules])
    if isinstance(rec, NicvmDone):
        return _packb(HostOp.NICVM_DONE, [rec.handle, rec.outcome, rec.result, rec.detail,
                                          rec.line])  # fmt: skip
    return _packb(HostOp.NICVM_REPORT, [rec.name, rec.outcome, rec.detail, rec.line])


def _fields(record: bytes, types: tuple[type, ...]) -> list[object]:
    obj = msgpack.unpackb(record[1:], strict_map_key=False)
    if not isinstance(obj, list) or len(obj) != len(types):
        raise ProtocolViolation("malformed NICVM record")
    for value, kind in zip(obj, types, strict=True):
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ProtocolViolation(f"malformed NICVM record field {value!r}")
    return obj


def _decode_nicvm(op: HostOp, record: bytes) -> HostRecord:
    if op == HostOp.NICVM_DELEGATE:
        _, handle, root, comm, a0, a1, a2, a3, length = _DELEGATE.unpack_from(record)
        end = _DELEGATE.size + length
        if len(record) < end:
            raise ProtocolViolation("NICVM_DELEGATE shorter than its name")
        name = record[_DELEGATE.size : end].decode()
        return NicvmDelegateReq(handle, name, root, comm, record[end:], (a0, a1, a2, a3))
    if op == HostOp.NICVM_LIST:
        return NicvmListReq()
    if op == HostOp.NICVM_PURGE:
        name = msgpack.unpackb(record[1:])
        if not isinstance(name, str):
            raise ProtocolViolation("NICVM_PURGE without a name")
        return NicvmPurgeReq(name)
    if op == HostOp.NICVM_LOAD:
        load = _fields(record, (str, str, bool))
        return NicvmLoadReq(*cast("tuple[str, str, bool]", tuple(load)))
    if op == HostOp.NICVM_COMM:
        comm, nodes = cast("tuple[int, list[object]]", tuple(_fields(record, (int, list))))
        if not all(isinstance(n, int) and 0 <= n <= 0xFFFF for n in nodes) or not nodes:
            raise ProtocolViolation("NICVM_COMM nodes must be node ids")
        return NicvmCommReq(comm, tuple(cast("list[int]", nodes)))
    if op == HostOp.NICVM_REPLY:
        ok, error, line, column, modules = msgpack.unpackb(record[1:], strict_map_key=False)
        if modules is not None and not isinstance(modules, list):
            raise ProtocolViolation("NICVM_REPLY modules is not a list")
        return NicvmReply(bool(ok), str(error), int(line), int(column), modules)
    if op == HostOp.NICVM_DONE:
        done = _fields(record, (int, str, int, str, int))
        return NicvmDone(*cast("tuple[int, str, int, str, int]", tuple(done)))
    report = _fields(record, (str, str, str, int))
    return NicvmReport(*cast("tuple[str, str, str, int]", tuple(report)))
