"""Host <-> nicd records of the GRIM remote-memory interface (HostOp 80-84), and the field
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
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum, IntFlag

from nicd.errors import ProtocolViolation

__all__ = [
    "GRIM_OPS",
    "NIC_PORT",
    "NOTIFY_P",
    "READ_META",
    "GrimRecord",
    "ReplyKind",
    "RmFlags",
    "RmMapReq",
    "RmStatus",
    "RmStatusEvent",
    "RmUnmapReq",
    "RmXlateReply",
    "RmXlateReq",
    "decode_grim",
    "encode_grim",
]

NIC_PORT = 0xFFF0
"""The NIC's own endpoint: replies the NIC generates (RM reads, statuses, the AM handler
registry) come from it, so they never use a host's send tokens or share its streams."""

RM_MAP, RM_UNMAP, RM_XLATE_REQ, RM_XLATE, RM_STATUS = 80, 81, 82, 83, 84
GRIM_OPS = frozenset({RM_MAP, RM_UNMAP, RM_XLATE_REQ, RM_XLATE, RM_STATUS})

_MAP = struct.Struct(">BIIHI")
_VADDR = struct.Struct(">BI")
_XREQ = struct.Struct(">BII")
_XLATE = struct.Struct(">BIIIHI")
_STATUS = struct.Struct(">BIH")
NOTIFY_P = struct.Struct(">HxxI")
"""RM-P notify prefix: region (16) | pad (16) | offset (32)."""
READ_META = struct.Struct(">II")
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


GrimRecord = RmMapReq | RmUnmapReq | RmXlateReq | RmXlateReply | RmStatusEvent


def encode_grim(rec: GrimRecord) -> list[bytes]:
    """The SEQPACKET record(s) carrying ``rec``."""
    if isinstance(rec, RmMapReq):
        return [_MAP.pack(RM_MAP, rec.vaddr, rec.size, rec.region, rec.offset)]
    if isinstance(rec, RmUnmapReq):
        return [_VADDR.pack(RM_UNMAP, rec.vaddr)]
    if isinstance(rec, RmXlateReq):
        return [_XREQ.pack(RM_XLATE_REQ, rec.vaddr, rec.length)]
    if isinstance(rec, RmXlateReply):
        return [_XLATE.pack(RM_XLATE, rec.asked, rec.vaddr, rec.size, rec.region, rec.offset)]
    return [_STATUS.pack(RM_STATUS, rec.req_id, rec.status)]


def decode_grim(op: int, record: bytes) -> GrimRecord:
    """Decode a record whose opcode is in ``GRIM_OPS`` (struct.error for a bad length)."""
    if op == RM_MAP:
        return RmMapReq(*_MAP.unpack(record)[1:])
    if op == RM_UNMAP:
        return RmUnmapReq(_VADDR.unpack(record)[1])
    if op == RM_XLATE_REQ:
        return RmXlateReq(*_XREQ.unpack(record)[1:])
    if op == RM_XLATE:
        return RmXlateReply(*_XLATE.unpack(record)[1:])
    if op == RM_STATUS:
        return RmStatusEvent(*_STATUS.unpack(record)[1:])
    raise ProtocolViolation(f"opcode {op} is not a GRIM record")
