"""HostOp, the framing every host <-> nicd ("PCI") record shares, and the GM port records.

One Unix SOCK_SEQPACKET record is one message on the PCI bus. Every record starts with a
one-byte opcode, a :class:`HostOp` declared here once for every family (GM here, GRIM in
:mod:`~nicd.hostlink.grim`, multicast in :mod:`~nicd.hostlink.mcast`, NICVM in
:mod:`~nicd.hostlink.nicvm`). A message payload longer than ``CHUNK_BYTES`` travels as its
head record (which states the total length) followed by ``CONT`` records, so no record
outgrows the socket buffer; :func:`chunked` splits it and :class:`Chunked` is what a head
decoder hands :class:`~nicd.hostlink.codec.Assembler` to join. No I/O here.

Records are slotted dataclasses treated as immutable but not ``frozen``: on CPython 3.11 a
frozen one with 15 fields takes 1.7 us to build against 0.3 us, and every packet builds several.
Those built per message write their own ``__init__`` (``dataclass`` keeps it and still makes
``__eq__`` and ``__repr__``): compiled with mypyc, the ``__init__`` that ``dataclass`` generates
is interpreted code, about 7x slower to call than the class's own, which is native.
"""

from __future__ import annotations

from builtins import memoryview  # mypyc: a field annotated memoryview needs the name at run time
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, Generic, TypeVar, cast

import msgpack

__all__ = [
    "ANY_PORT",
    "CHUNK_BYTES",
    "MAX_RECORD_BYTES",
    "AddRoutesReq",
    "Args",
    "Chunked",
    "CloseReq",
    "DeregisterReq",
    "Encoder",
    "ErrorEvent",
    "GmRecord",
    "HostOp",
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
    "chunked",
    "encoder",
    "packb",
]

CHUNK_BYTES: Final = 64 * 1024  # payload bytes per record; SEQPACKET's default limit is ~208 KiB
MAX_RECORD_BYTES: Final = CHUNK_BYTES + 256  # receive buffer size that fits any record
ANY_PORT: Final = 0xFFFF  # OpenReq.port meaning "any free port"


class HostOp(IntEnum):
    """First byte of every record; each family's module maps its ops to decoders."""

    # GM ports (records below, codec in nicd.hostlink.gm): host -> NIC
    OPEN = 1
    SEND = 2
    PROVIDE = 3
    CLOSE = 4
    SET_ROUTES = 5
    GET_STATS = 6
    REGISTER = 7
    DEREGISTER = 8
    SIGNALS = 9
    ADD_ROUTES = 10
    # GM ports: NIC -> host
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
    # framing: the rest of a chunked payload (the Assembler's, no decoder of its own)
    CONT = 40
    # GRIM remote memory (nicd.hostlink.grim)
    RM_MAP = 80
    RM_UNMAP = 81
    RM_XLATE_REQ = 82
    RM_XLATE = 83
    RM_STATUS = 84
    RM_SIGNALS = 85
    RM_WATCH = 86
    RM_LANDED = 87
    # NIC multicast, seed 001 (nicd.hostlink.mcast)
    MCAST_GROUP = 60
    MCAST_FREE = 61
    MCAST_SEND = 62
    MULTISEND = 63
    MCAST_GROUP_OK = 64
    MCAST_ERROR = 65
    # NICVM, thesis ch. 4 (nicd.hostlink.nicvm)
    NICVM_LOAD = 70
    NICVM_PURGE = 71
    NICVM_LIST = 72
    NICVM_COMM = 73
    NICVM_DELEGATE = 74
    NICVM_REPLY = 75
    NICVM_DONE = 76
    NICVM_REPORT = 77


Args = tuple[int, int, int, int]

_R = TypeVar("_R")
_H_co = TypeVar("_H_co", covariant=True)

Encoder = Callable[[object], list[bytes]]
"""A table entry: the SEQPACKET records carrying one record (called only with its class)."""


def encoder(cls: type[_R], encode: Callable[[_R], list[bytes]]) -> tuple[type, Encoder]:
    """Pair a record class with its encoder for a family's ``ENCODERS`` table.

    mypy checks here that ``encode`` takes ``cls``; the table calls it only with exact
    instances of ``cls`` (looked up by ``type(rec)``), which is what makes the cast sound.
    """
    return cls, cast("Encoder", encode)


class Chunked(Generic[_H_co]):
    """What a head decoder returns for a message whose payload may continue in CONT records
    (a plain class, not a NamedTuple: compiled, building one is a native call)."""

    __slots__ = ("first", "head", "total")

    head: _H_co
    """The record with an empty payload; the Assembler sets ``payload`` once it is whole."""
    total: int
    """Payload bytes the head record states (checked against the Assembler's limit)."""
    first: memoryview
    """The payload bytes carried in the head record itself."""

    def __init__(self, head: _H_co, total: int, first: memoryview) -> None:
        self.head = head
        self.total = total
        self.first = first


_CONT: Final = bytes((HostOp.CONT,))


def chunked(head: bytes, payload: bytes) -> list[bytes]:
    """``head`` and ``payload`` as a head record and as many CONT records as needed.

    Each payload byte is copied once, into the record that carries it (a slice of a view,
    never a slice of the payload followed by a concatenation).
    """
    if len(payload) <= CHUNK_BYTES:
        return [head + payload]
    view = memoryview(payload)
    records = [head + view[:CHUNK_BYTES]]
    records += [
        _CONT + view[i : i + CHUNK_BYTES] for i in range(CHUNK_BYTES, len(view), CHUNK_BYTES)
    ]
    return records


def packb(op: HostOp, obj: object) -> bytes:
    """A structured record: ``op`` then ``obj`` in msgpack."""
    packed: bytes = msgpack.packb(obj, use_bin_type=True)
    return bytes((op,)) + packed


# -- GM ports: the records (their codec is nicd.hostlink.gm) ---------------------------------


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

    def __init__(
        self,
        handle: int,
        dst_node: int,
        dst_port: int,
        payload: bytes,
        msg_type: int = 1,
        am_handler: int = 0,
        args: Args = (0, 0, 0, 0),
    ) -> None:
        self.handle = handle
        self.dst_node = dst_node
        self.dst_port = dst_port
        self.payload = payload
        self.msg_type = msg_type
        self.am_handler = am_handler
        self.args = args


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
class AddRoutesReq:
    """Management: more nodes joined the running fabric (processes started at run time),
    node id -> (host, UDP port); only new node ids, never a change of a route in force."""

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

    def __init__(
        self,
        src_node: int,
        src_port: int,
        payload: bytes,
        msg_type: int = 1,
        am_handler: int = 0,
        args: Args = (0, 0, 0, 0),
        mcast_group: int = 0,
    ) -> None:
        self.src_node = src_node
        self.src_port = src_port
        self.payload = payload
        self.msg_type = msg_type
        self.am_handler = am_handler
        self.args = args
        self.mcast_group = mcast_group


@dataclass(slots=True)
class SentEvent:
    """The send ``handle`` was acknowledged by the destination NIC; its token is back."""

    handle: int

    def __init__(self, handle: int) -> None:
        self.handle = handle


@dataclass(slots=True)
class SentBatch:
    """Several sends completed: SENT events coalesced into one record (one host wake-up)."""

    handles: tuple[int, ...]

    def __init__(self, handles: tuple[int, ...]) -> None:
        self.handles = handles


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


GmRecord = (
    OpenReq
    | SendReq
    | ProvideReq
    | CloseReq
    | SetRoutesReq
    | AddRoutesReq
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
)
