"""The GRIM remote-memory family (HostOp 80-87): its records, their codec, and the field
layout GRIM messages use in the data header. No I/O, no logic.

Records (struct, big-endian)::

    RM_MAP      80 host->NIC  op | vaddr (32) | size (32) | region (16) | offset (32)
                               program a static translation-cache entry (GRIM 4.5.2)
    RM_UNMAP    81 host->NIC  op | vaddr (32)                 the block was freed
    RM_XLATE_REQ 82 NIC->host op | vaddr (32) | length (32)  a miss: the "kernel" upcall
    RM_XLATE    83 host->NIC  op | asked vaddr (32) | vaddr (32) | size (32) | region (16)
                               | offset (32); size 0 = no such registered memory
    RM_STATUS   84 NIC->host  op | request id (32) | status (16)   a remote-memory operation
                               this host started finished (0) or was refused (status)
    RM_SIGNALS  85 host->NIC  op | enable (8) | host pid (32)   SIGUSR1 after every
                               RM_XLATE_REQ to this port (the upcall "interrupt")
    RM_WATCH    86 host->NIC  op | enable (8)   report remote writes landing in this port's
                               memory (while the host waits on it); enabling is answered
                               with one RM_LANDED at once, the "armed" marker
    RM_LANDED   87 NIC->host  op            a GRIM write (RM-V, RM-P) landed in this port's
                               memory, or the watch was just armed

Message fields (data header, GRIM Fig 4.2 words 5 and 8-11)::

    RM_WRITE_V     handler = flags; args = (vaddr, notify vaddr, notify value, request id)
    RM_WRITE_P     handler = flags | RM_API (0 keeps the MPI rendezvous meaning: args =
                   (region, offset, notify0, notify1), reported with RM_DONE);
                   args = (region, offset, request id, notify value); with NOTIFY the
                   payload starts with the notify word's physical address (region 16, pad 16,
                   offset 32): RM-P never translates
    RM_READ        handler = flags; args = (source vaddr, length, reply vaddr, request id);
                   payload = notify vaddr (32) | notify value (32) at the reader
    RM_READ_REPLY  handler = status; args = (reply vaddr, notify vaddr, request id, kind);
                   payload = the data (kind READ) or empty (kind WRITE: a write's status)
    RM_ATOMIC      handler = 0; args = (target vaddr, reply vaddr, request id, meta);
                   meta = op (8) | element type character (8) | fetch (bit 16), see
                   nicd.grim.atomics; payload = the operand (CAS: compare value, then new
                   value); answered like an RM_READ (fetch: the old contents to the reply
                   vaddr) or like a write (a status)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import TYPE_CHECKING, Final

from nicd.errors import ProtocolViolation
from nicd.hostlink.records import Encoder, HostOp, encoder

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "DECODERS",
    "ENCODERS",
    "NIC_PORT",
    "NOTIFY_P",
    "READ_META",
    "REGISTRY_NODE",
    "GrimRecord",
    "ReplyKind",
    "RmFlags",
    "RmLanded",
    "RmMapReq",
    "RmStatus",
    "RmStatusEvent",
    "RmUnmapReq",
    "RmUpcallSignals",
    "RmWatch",
    "RmXlateReply",
    "RmXlateReq",
]

NIC_PORT: Final = 0xFFF0
"""The NIC's own endpoint: replies the NIC generates (RM reads, statuses, the AM handler
registry) come from it, so they never use a host's send tokens or share its streams."""
REGISTRY_NODE: Final = 0
"""The node whose NIC serves the AM handler registry (:mod:`nicd.grim.amregistry`): hosts send
their registry requests to its ``NIC_PORT``."""

# RM_MAP:       op (8) | vaddr (32) | size (32) | region (16) | offset (32)
_MAP: Final = struct.Struct(">BIIHI")
# RM_UNMAP:     op (8) | vaddr (32)
_VADDR: Final = struct.Struct(">BI")
# RM_XLATE_REQ: op (8) | vaddr (32) | length (32)
_XREQ: Final = struct.Struct(">BII")
# RM_XLATE:     op (8) | asked vaddr (32) | vaddr (32) | size (32) | region (16) | offset (32)
_XLATE: Final = struct.Struct(">BIIIHI")
# RM_STATUS:    op (8) | request id (32) | status (16)
_STATUS: Final = struct.Struct(">BIH")
# RM_SIGNALS:   op (8) | enable (8) | host pid (32)
_RM_SIGNALS: Final = struct.Struct(">BBI")
# RM_WATCH:     op (8) | enable (8);  RM_LANDED: op (8)
_WATCH: Final = struct.Struct(">BB")
_LANDED: Final = struct.Struct(">B")
NOTIFY_P: Final = struct.Struct(">HxxI")
"""RM-P notify prefix: region (16) | pad (16) | offset (32)."""
READ_META: Final = struct.Struct(">II")
"""RM_READ payload: notify vaddr (32, 0 = none) | notify value (32)."""


class RmFlags(IntFlag):
    """Flags in the handler field of remote-memory messages."""

    NONE = 0
    NOTIFY = 0x0001
    """Write the 32-bit notify word when the operation completes (GRIM 4.5.5)."""
    RM_API = 0x8000
    """RM_WRITE_P from the GRIM API (not the MPI rendezvous)."""


class RmStatus(IntEnum):
    """Outcome of a remote-memory operation, as RM_STATUS reports it."""

    OK = 0
    NO_TRANSLATION = 1
    """No registered block at that virtual address (never allocated, or freed)."""
    OUT_OF_RANGE = 2
    """The range runs past the end of the block or segment."""
    NO_REGION = 3
    """RM-P: no registered segment with that id."""
    BAD_NOTIFY = 4
    """The notify word is not inside registered memory."""
    BAD_REPLY = 5
    """RM-RV: the reply address is not registered memory at the reader."""
    BUSY = 6
    """The target NIC has too many replies of its own in flight; try again later."""
    BAD_OP = 7
    """RM_ATOMIC: an operation or element type the NIC cannot apply."""
    LOCK_FAILED = 8
    """A window lock was not granted (waited too long, queue full, window closed)."""
    NOT_LOCKED = 9
    """An unlock from an origin that does not hold the lock."""


class ReplyKind(IntEnum):
    """What an RM_READ_REPLY answers."""

    READ = 0
    WRITE = 1


@dataclass(slots=True)
class RmMapReq:
    """Program a static translation entry for a block just allocated."""

    vaddr: int
    size: int
    region: int
    offset: int


@dataclass(slots=True)
class RmUnmapReq:
    """The block at ``vaddr`` was freed: forget its translations."""

    vaddr: int


@dataclass(slots=True)
class RmXlateReq:
    """The NIC missed in its translation cache for ``[vaddr, vaddr + length)``."""

    vaddr: int
    length: int


@dataclass(slots=True)
class RmXlateReply:
    """The host's answer to ``RmXlateReq(asked)``: the block containing it (``size`` 0: none)."""

    asked: int
    vaddr: int
    size: int
    region: int
    offset: int


@dataclass(slots=True)
class RmStatusEvent:
    """Remote-memory request ``req_id`` of this port completed with ``status``."""

    req_id: int
    status: int


@dataclass(slots=True)
class RmUpcallSignals:
    """Raise SIGUSR1 at process ``pid`` after every translation upcall to this port
    (``enable``), or stop. A real NIC interrupts its host for an upcall; this lets a host that
    is computing outside the library answer one without a polling thread."""

    enable: bool
    pid: int


@dataclass(slots=True)
class RmWatch:
    """Report (``enable``) or stop reporting GRIM writes landing in this port's memory. A
    host waiting on its memory (a notify word, data) asks for it, so the wait sleeps until a
    record instead of re-reading the memory on a timer; the NIC answers the enable with one
    :class:`RmLanded` at once, so a write that landed before is seen when that arrives."""

    enable: bool


@dataclass(slots=True)
class RmLanded:
    """A GRIM write landed in this port's memory (or the watch was just armed)."""


GrimRecord = (
    RmMapReq | RmUnmapReq | RmXlateReq | RmXlateReply | RmStatusEvent | RmUpcallSignals
    | RmWatch | RmLanded
)  # fmt: skip


ENCODERS: dict[type, Encoder] = dict(
    [
        encoder(RmMapReq, lambda rec: [
            _MAP.pack(HostOp.RM_MAP, rec.vaddr, rec.size, rec.region, rec.offset)]),
        encoder(RmUnmapReq, lambda rec: [_VADDR.pack(HostOp.RM_UNMAP, rec.vaddr)]),
        encoder(RmXlateReq, lambda rec: [_XREQ.pack(HostOp.RM_XLATE_REQ, rec.vaddr, rec.length)]),
        encoder(RmXlateReply, lambda rec: [
            _XLATE.pack(HostOp.RM_XLATE, rec.asked, rec.vaddr, rec.size, rec.region, rec.offset)]),
        encoder(RmStatusEvent, lambda rec: [
            _STATUS.pack(HostOp.RM_STATUS, rec.req_id, rec.status)]),
        encoder(RmUpcallSignals, lambda rec: [
            _RM_SIGNALS.pack(HostOp.RM_SIGNALS, int(rec.enable), rec.pid)]),
        encoder(RmWatch, lambda rec: [_WATCH.pack(HostOp.RM_WATCH, int(rec.enable))]),
        encoder(RmLanded, lambda rec: [_LANDED.pack(HostOp.RM_LANDED)]),
    ]
)  # fmt: skip
"""GRIM record class -> encoder."""

DECODERS: dict[HostOp, Callable[[bytes], GrimRecord]] = {
    HostOp.RM_MAP: lambda record: RmMapReq(*_MAP.unpack(record)[1:]),
    HostOp.RM_UNMAP: lambda record: RmUnmapReq(_VADDR.unpack(record)[1]),
    HostOp.RM_XLATE_REQ: lambda record: RmXlateReq(*_XREQ.unpack(record)[1:]),
    HostOp.RM_XLATE: lambda record: RmXlateReply(*_XLATE.unpack(record)[1:]),
    HostOp.RM_STATUS: lambda record: RmStatusEvent(*_STATUS.unpack(record)[1:]),
    HostOp.RM_SIGNALS: lambda record: _decode_signals(record),
    HostOp.RM_WATCH: lambda record: _decode_watch(record),
    HostOp.RM_LANDED: lambda record: (_LANDED.unpack(record), RmLanded())[1],
}
"""GRIM opcode -> decoder (``struct.error`` for a bad length; the Assembler types it)."""


def _decode_signals(record: bytes) -> RmUpcallSignals:
    _, enable, pid = _RM_SIGNALS.unpack(record)
    if enable > 1:
        raise ProtocolViolation(f"RM_SIGNALS enable flag {enable}")
    return RmUpcallSignals(bool(enable), pid)


def _decode_watch(record: bytes) -> RmWatch:
    _, enable = _WATCH.unpack(record)
    if enable > 1:
        raise ProtocolViolation(f"RM_WATCH enable flag {enable}")
    return RmWatch(bool(enable))
