"""Packet factories for tests: valid records with defaults, any field overridable; and a sent
stream's scoreboard for the sender's parts."""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

from nicd.core.stats import TransportStats
from nicd.link.rto import Rto, RttEstimator
from nicd.link.scoreboard import Scoreboard
from nicd.link.wire import CRC, ControlPacket, DataPacket, FragFlags, MsgType, NackReason

__all__ = ["ack", "data_packet", "nack", "sent_stream", "with_crc"]


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


def sent_stream(count: int, *, initial_s: float = 0.05) -> tuple[Scoreboard, Rto, TransportStats]:
    """A stream from node 1 port 2 to node 3 port 4 whose ``count`` one-packet messages were
    each sent once, 1 ms apart from 0 (orders 1 .. count); its RTO has no sample yet."""
    stats = TransportStats()
    board = Scoreboard(node_id=1, src_port=2, dst_node=3, dst_port=4, mtu=64, stats=stats)
    rto = Rto(RttEstimator(initial_s=initial_s, min_s=0.001, max_s=1.0))
    for h in range(count):
        board.queue(msg_type=MsgType.GM_DATA, payload=b"x", handle=h)
        board.send(count, now=h * 0.001)
    return board, rto, stats
