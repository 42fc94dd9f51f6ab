"""The NIC-multicast family (seed 001, HostOp 60-65): its records and their codec.

The host builds each group's tree and posts this node's part of it (MCAST_GROUP); the root
hands one message to the NIC (MCAST_SEND), which replicates and forwards it. MULTISEND sends
one message to a list of nodes, replicated by the NIC. No I/O here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from nicd.errors import ProtocolViolation
from nicd.hostlink.records import Args, Chunked, Encoder, HostOp, chunked, encoder

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "DECODERS",
    "ENCODERS",
    "NO_NODE",
    "McastErrorEvent",
    "McastFreeReq",
    "McastGroupOk",
    "McastGroupReq",
    "McastRecord",
    "McastSendReq",
    "MultiSendReq",
]

NO_NODE: Final = 0xFFFF  # MCAST_GROUP parent field at the root

# MCAST_GROUP: op (8) | update (8) | group (16) | epoch (16) | root (16) | parent (16,
#           NO_NODE at the root) | children count (16), then the children (16 each)
_MCAST_GROUP: Final = struct.Struct(">BBHHHHH")
# MCAST_FREE, MCAST_GROUP_OK: op (8) | group (16)
_MCAST_GID: Final = struct.Struct(">BH")
# MCAST_SEND: op (8) | handle (32) | group (16) | AM handler (16) | user args 4 x 32
#           | message length (32), then the first chunk of payload
_MCAST_SEND: Final = struct.Struct(">BIHH4II")
# MULTISEND: op (8) | msg type (8) | handle (32) | dst port (16) | AM handler (16)
#           | user args 4 x 32 | destinations (16) | message length (32), then the
#           destination nodes (16 each), then the first chunk of payload
_MULTISEND: Final = struct.Struct(">BBIHH4IHI")
# MCAST_ERROR: op (8) | group (16) | child (16), then the reason in UTF-8
_MCAST_ERROR: Final = struct.Struct(">BHH")
_NODE: Final = struct.Struct(">H")


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


McastRecord = (
    McastGroupReq | McastFreeReq | McastSendReq | MultiSendReq | McastGroupOk | McastErrorEvent
)


def _nodes(nodes: tuple[int, ...]) -> bytes:
    return struct.pack(f">{len(nodes)}H", *nodes)


def _encode_group(rec: McastGroupReq) -> list[bytes]:
    parent = NO_NODE if rec.parent is None else rec.parent
    head = _MCAST_GROUP.pack(HostOp.MCAST_GROUP, int(rec.update), rec.group, rec.epoch,
                             rec.root, parent, len(rec.children))  # fmt: skip
    return [head + _nodes(rec.children)]


def _encode_send(rec: McastSendReq) -> list[bytes]:
    head = _MCAST_SEND.pack(HostOp.MCAST_SEND, rec.handle, rec.group, rec.am_handler,
                            *rec.args, len(rec.payload))  # fmt: skip
    return chunked(head, rec.payload)


def _encode_multisend(rec: MultiSendReq) -> list[bytes]:
    head = _MULTISEND.pack(HostOp.MULTISEND, rec.msg_type, rec.handle, rec.dst_port,
                           rec.am_handler, *rec.args, len(rec.dests), len(rec.payload))  # fmt: skip
    return chunked(head + _nodes(rec.dests), rec.payload)


def _encode_error(rec: McastErrorEvent) -> list[bytes]:
    return [_MCAST_ERROR.pack(HostOp.MCAST_ERROR, rec.group, rec.child) + rec.reason.encode()]


ENCODERS: dict[type, Encoder] = dict(
    [
        encoder(McastGroupReq, _encode_group),
        encoder(McastFreeReq, lambda rec: [_MCAST_GID.pack(HostOp.MCAST_FREE, rec.group)]),
        encoder(McastSendReq, _encode_send),
        encoder(MultiSendReq, _encode_multisend),
        encoder(McastGroupOk, lambda rec: [_MCAST_GID.pack(HostOp.MCAST_GROUP_OK, rec.group)]),
        encoder(McastErrorEvent, _encode_error),
    ]
)
"""Multicast record class -> encoder."""


def _decode_send(record: bytes) -> Chunked[McastSendReq]:
    handle, group, am, a0, a1, a2, a3, total = _MCAST_SEND.unpack_from(record)[1:]
    head = McastSendReq(handle, group, b"", am, (a0, a1, a2, a3))
    return Chunked(head, total, memoryview(record)[_MCAST_SEND.size :])


def _decode_multisend(record: bytes) -> Chunked[MultiSendReq]:
    m, handle, port, am, a0, a1, a2, a3, count, total = _MULTISEND.unpack_from(record)[1:]
    end = _MULTISEND.size + count * _NODE.size
    if len(record) < end:
        raise ProtocolViolation("MULTISEND shorter than its destination list")
    view = memoryview(record)
    dests = tuple(d for (d,) in _NODE.iter_unpack(view[_MULTISEND.size : end]))
    head = MultiSendReq(handle, dests, port, b"", m, am, (a0, a1, a2, a3))
    return Chunked(head, total, view[end:])


def _decode_group(record: bytes) -> McastGroupReq:
    update, group, epoch, root, parent, count = _MCAST_GROUP.unpack_from(record)[1:]
    if update > 1 or len(record) != _MCAST_GROUP.size + count * _NODE.size:
        raise ProtocolViolation("malformed MCAST_GROUP")
    kids = tuple(c for (c,) in _NODE.iter_unpack(memoryview(record)[_MCAST_GROUP.size :]))
    up = None if parent == NO_NODE else parent
    return McastGroupReq(group, root, up, kids, epoch, bool(update))


def _decode_error(record: bytes) -> McastErrorEvent:
    _, group, child = _MCAST_ERROR.unpack_from(record)
    return McastErrorEvent(group, child, record[_MCAST_ERROR.size :].decode())


DECODERS: dict[HostOp, Callable[[bytes], McastRecord | Chunked[McastSendReq | MultiSendReq]]] = {
    HostOp.MCAST_GROUP: _decode_group,
    HostOp.MCAST_FREE: lambda record: McastFreeReq(_MCAST_GID.unpack(record)[1]),
    HostOp.MCAST_SEND: _decode_send,
    HostOp.MULTISEND: _decode_multisend,
    HostOp.MCAST_GROUP_OK: lambda record: McastGroupOk(_MCAST_GID.unpack(record)[1]),
    HostOp.MCAST_ERROR: _decode_error,
}
"""Multicast opcode -> decoder (MCAST_SEND and MULTISEND return a :class:`Chunked` head)."""
