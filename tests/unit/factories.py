"""Packet factories for tests: valid records with defaults, any field overridable."""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

from nicd.link.wire import CRC, ControlPacket, DataPacket, FragFlags, MsgType, NackReason

__all__ = ["ack", "data_packet", "nack", "with_crc"]


def data_packet(**overrides: Any) -> DataPacket:
    """A single-fragment GM data packet from node 1 port 2 to node 3 port 4.

    Any field may be overridden; ``msg_len`` defaults to ``offset + len(payload)`` so a
    packet stays valid when only the payload changes.
    """
    fields: dict[str, Any] = {
        "msg_type": MsgType.GM_DATA,
        "flags": FragFlags.ONLY,
        "token": 7,
        "seq": 0,
        "src_node": 1,
        "src_port": 2,
        "dst_node": 3,
        "dst_port": 4,
        "offset": 0,
        "payload": b"payload",
    }
    fields.update(overrides)
    fields.setdefault("msg_len", fields["offset"] + len(fields["payload"]))
    return DataPacket(**fields)


def ack(seq: int = 1, **overrides: Any) -> ControlPacket:
    """A cumulative ACK from node 3 to node 1 for the stream 1:2 -> 3:4."""
    base = ControlPacket(MsgType.ACK, seq, from_node=3, to_node=1, src_port=2, dst_port=4)
    return dataclasses.replace(base, **overrides)


def nack(reason: NackReason = NackReason.GAP, seq: int = 1, **overrides: Any) -> ControlPacket:
    """A NACK from node 3 to node 1 for the stream 1:2 -> 3:4."""
    base = ControlPacket(
        MsgType.NACK, seq, from_node=3, to_node=1, src_port=2, dst_port=4, reason=reason
    )
    return dataclasses.replace(base, **overrides)


def with_crc(framed: bytes) -> bytes:
    """Append a valid CRC to ``framed`` (route length, route, body): for crafting bad packets
    that get past the CRC check."""
    return framed + CRC.pack(zlib.crc32(framed))
