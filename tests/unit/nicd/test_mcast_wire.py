"""wire.py multicast fields: MCAST_ACK kind and epoch packing, checked against the vectors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nicd.errors import BadPacket
from nicd.link.wire import (
    MCAST_EPOCH_MASK,
    ControlPacket,
    McastAck,
    McastAckKind,
    MsgType,
    decode_mcast_ack_untrusted,
    decode_untrusted,
    encode,
    mcast_ack_packet,
)
from tests.unit.nicd.test_wire import load_vector

U16 = st.integers(0, 0xFFFF)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mcast_ack", McastAck(7, 3, 18, McastAckKind.ACK, 9, 2)),
        ("mcast_ack_gap", McastAck(7, 0x3FFF, 0xFFFF_FFFF, McastAckKind.GAP, 9, 2)),
        ("mcast_ack_busy", McastAck(7, 3, 18, McastAckKind.BUSY, 9, 2)),
    ],
)
def test_vectors_carry_the_multicast_fields(name: str, expected: McastAck) -> None:
    raw = load_vector(name)
    packet = decode_untrusted(raw)
    assert isinstance(packet, ControlPacket)
    assert decode_mcast_ack_untrusted(packet) == expected
    built = mcast_ack_packet(
        expected.group, expected.epoch, expected.seq, expected.kind,
        expected.from_node, expected.to_node,
    )  # fmt: skip
    assert encode(built) == raw


@given(U16, st.integers(0, 1 << 20), st.integers(0, (1 << 40)), st.sampled_from(McastAckKind),
       U16, U16)  # fmt: skip
def test_ack_round_trips_through_the_wire(
    group: int, epoch: int, seq: int, kind: McastAckKind, child: int, parent: int
) -> None:
    packet = decode_untrusted(encode(mcast_ack_packet(group, epoch, seq, kind, child, parent)))
    assert isinstance(packet, ControlPacket)
    got = decode_mcast_ack_untrusted(packet)
    assert got == McastAck(group, epoch & MCAST_EPOCH_MASK, seq & 0xFFFF_FFFF, kind, child, parent)


def test_unknown_kind_and_wrong_type_are_bad_packets() -> None:
    bad_kind = ControlPacket(MsgType.MCAST_ACK, 1, 9, 2, 7, 0xC000)
    with pytest.raises(BadPacket) as info:
        decode_mcast_ack_untrusted(bad_kind)
    assert info.value.reason == "mcast_ack_kind"
    with pytest.raises(BadPacket) as info:
        decode_mcast_ack_untrusted(ControlPacket(MsgType.ACK, 1, 9, 2, 7, 3))
    assert info.value.reason == "msg_type"
