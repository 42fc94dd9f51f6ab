"""wire.py: checked-in vectors, truncation, bit flips, trailing bytes, round-trips, fuzzing."""

from __future__ import annotations

import dataclasses
import pathlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nicd.errors import BadPacket
from nicd.link.wire import (
    ACK_WORD,
    CONTROL_HEADER,
    CONTROL_TYPES,
    CRC,
    DATA_HEADER,
    MAX_NODE,
    MAX_PORT,
    SACK_TRAILER,
    SIGNAL_TYPES,
    ControlPacket,
    DataPacket,
    FragFlags,
    MsgType,
    NackReason,
    decode_untrusted,
    encode,
    encode_control,
    encode_data,
)
from tests.unit.factories import ack, data_packet, nack, with_crc

VECTORS = pathlib.Path(__file__).parents[1] / "vectors"
U16 = 0xFFFF
U32 = 0xFFFF_FFFF

# What each checked-in vector decodes to, every field spelled out.
EXPECTED: dict[str, DataPacket | ControlPacket] = {
    "data_only": DataPacket(
        msg_type=MsgType.GM_DATA,
        flags=FragFlags.FIRST | FragFlags.LAST,
        token=7,
        seq=42,
        src_node=1,
        src_port=2,
        dst_node=3,
        dst_port=4,
        msg_len=14,
        offset=0,
        payload=b"hello, myrinet",
        mcast_group=0,
        am_handler=0,
        args=(0, 0, 0, 0),
        route=b"",
    ),
    "data_acked": DataPacket(
        msg_type=MsgType.MPI_EAGER,
        flags=FragFlags.FIRST | FragFlags.LAST,
        token=5,
        seq=5,
        src_node=3,
        src_port=4,
        dst_node=1,
        dst_port=2,
        msg_len=8,
        offset=0,
        payload=b"pingpong",
        ack=0xFFFF_FFFF,
        ack_epoch=3,
        established=True,
    ),
    "data_middle": DataPacket(
        msg_type=MsgType.MPI_EAGER,
        flags=FragFlags.NONE,
        token=0xFFFF,
        seq=0xFFFF_FFFE,
        src_node=0x0102,
        src_port=0x0A0B,
        dst_node=0xFFFF,
        dst_port=0,
        msg_len=10000,
        offset=4096,
        payload=bytes(range(16)),
        mcast_group=5,
        am_handler=0x1234,
        args=(1, 0xDEADBEEF, 0xFFFF_FFFF, 7),
        route=b"\x81\x02\x03",
    ),
    "data_empty": DataPacket(
        msg_type=MsgType.AM_DATA,
        flags=FragFlags.ONLY,
        token=1,
        seq=0,
        src_node=9,
        src_port=0,
        dst_node=10,
        dst_port=1,
        msg_len=0,
        offset=0,
        payload=b"",
        mcast_group=0,
        am_handler=0x42,
        args=(0, 0, 0, 0),
        route=b"",
    ),
    "data_ab_coll": DataPacket(
        msg_type=MsgType.AB_COLL,
        flags=FragFlags.ONLY,
        token=3,
        seq=5,
        src_node=6,
        src_port=2,
        dst_node=4,
        dst_port=2,
        msg_len=8,
        offset=0,
        payload=bytes.fromhex("3ff0000000000000"),
        mcast_group=0,
        am_handler=1,
        args=(3, 6, 0x802, 0),
        route=b"",
    ),
    # the LAST fragment (token, seq 9; 1:2 -> 3:4; 300 B, offset 200) of an aborted message
    "data_skip": DataPacket(
        MsgType.GM_DATA, FragFlags.LAST, 9, 9, 1, 2, 3, 4, 300, 200, b"", skip=True
    ),
    "ack": ControlPacket(
        msg_type=MsgType.ACK,
        seq=100,
        from_node=3,
        to_node=1,
        src_port=2,
        dst_port=4,
        reason=None,
        route=b"",
        epoch=7,
    ),
    "sack": ControlPacket(
        msg_type=MsgType.SACK,
        seq=57,
        from_node=3,
        to_node=1,
        src_port=2,
        dst_port=4,
        reason=None,
        route=b"",
        sack=0x8000_0000_0000_0005,
    ),
    **{
        f"nack_{reason.name.lower()}": ControlPacket(
            msg_type=MsgType.NACK,
            seq=57,
            from_node=3,
            to_node=1,
            src_port=2,
            dst_port=4,
            reason=reason,
            route=b"",
            epoch=9 if reason is NackReason.RESET else 0,
        )
        for reason in NackReason
    },
    # Multicast (seed 001 §5.3): the reserved types in the data and control layouts.
    "mcast_data": DataPacket(
        msg_type=MsgType.MCAST_DATA,
        flags=FragFlags.FIRST,
        token=3,
        seq=17,
        src_node=2,
        src_port=5,
        dst_node=9,
        dst_port=0,
        msg_len=100,
        offset=0,
        payload=b"bcast!",
        mcast_group=7,
        am_handler=0x21,
        args=(1, 2, 3, 4),
        route=b"",
    ),
    **{
        name: ControlPacket(
            msg_type=MsgType.MCAST_ACK,
            seq=seq,
            from_node=9,
            to_node=2,
            src_port=7,
            dst_port=dst_port,
            reason=None,
            route=b"",
        )
        for name, seq, dst_port in (
            ("mcast_ack", 18, 0x0003),
            ("mcast_ack_gap", U32, 0x7FFF),
            ("mcast_ack_busy", 18, 0x8003),
        )
    },
}


def load_vector(name: str) -> bytes:
    """Hex digits of ``vectors/<name>.hex``; whitespace and ``#`` comments are ignored."""
    text = (VECTORS / f"{name}.hex").read_text()
    return bytes.fromhex("".join(line.split("#", 1)[0].strip() for line in text.splitlines()))


VALID = sorted(EXPECTED)


@pytest.fixture(params=VALID)
def vector(request: pytest.FixtureRequest) -> bytes:
    name: str = request.param
    return load_vector(name)


# -- vectors ----------------------------------------------------------------------------------


def test_every_vector_file_is_checked_and_every_nack_reason_has_one() -> None:
    assert {p.stem for p in VECTORS.glob("*.hex")} == set(EXPECTED)
    for reason in NackReason:
        assert f"nack_{reason.name.lower()}" in EXPECTED


@pytest.mark.parametrize("name", VALID)
def test_vector_decodes_to_every_field(name: str) -> None:
    expected = EXPECTED[name]
    got = decode_untrusted(load_vector(name))
    assert type(got) is type(expected)
    for f in dataclasses.fields(expected):
        assert getattr(got, f.name) == getattr(expected, f.name), f.name
    assert type(got.msg_type) is MsgType
    if isinstance(got, DataPacket):
        assert type(got.flags) is FragFlags
        assert type(got.payload) is bytes
        assert type(got.route) is bytes
    else:
        assert got.reason is None or type(got.reason) is NackReason


@pytest.mark.parametrize("name", VALID)
def test_vector_encodes_to_the_exact_bytes(name: str) -> None:
    expected = EXPECTED[name]
    raw = load_vector(name)
    assert encode(expected) == raw
    if isinstance(expected, DataPacket):
        assert encode_data(expected) == raw
        word = 0 if expected.ack is None else ACK_WORD.size
        assert (
            len(raw)
            == 1 + len(expected.route) + DATA_HEADER.size + word + len(expected.payload) + 4
        )
    else:
        assert encode_control(expected) == raw
        trailer = SACK_TRAILER.size if expected.msg_type is MsgType.SACK else 0
        assert len(raw) == 1 + len(expected.route) + CONTROL_HEADER.size + trailer + 4


def test_decode_accepts_bytearray_and_memoryview(vector: bytes) -> None:
    want = decode_untrusted(vector)
    assert decode_untrusted(bytearray(vector)) == want
    assert decode_untrusted(memoryview(vector)) == want
    padded = memoryview(b"xx" + vector + b"yy")
    assert decode_untrusted(padded[2:-2]) == want


# -- damaged packets --------------------------------------------------------------------------


def test_every_truncation_is_bad_packet(vector: bytes) -> None:
    for n in range(len(vector)):
        with pytest.raises(BadPacket) as info:
            decode_untrusted(vector[:n])
        assert info.value.reason, n


def test_every_truncation_with_a_fresh_crc_is_truncated_or_length(vector: bytes) -> None:
    # The CRC alone would catch a cut; re-sealing the cut body tests the length checks.
    framed = vector[: -CRC.size]
    for n in range(len(framed)):
        with pytest.raises(BadPacket) as info:
            decode_untrusted(with_crc(framed[:n]))
        assert info.value.reason in {"truncated", "length"}, n


def test_dropping_leading_bytes_is_bad_packet(vector: bytes) -> None:
    for n in range(1, len(vector) + 1):
        with pytest.raises(BadPacket):
            decode_untrusted(vector[n:])


def test_every_single_bit_flip_fails_the_crc(vector: bytes) -> None:
    for bit in range(len(vector) * 8):
        damaged = bytearray(vector)
        damaged[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(BadPacket) as info:
            decode_untrusted(bytes(damaged))
        assert info.value.reason == "crc", bit


@pytest.mark.parametrize("extra", [b"\x00", b"\xff" * 3, b"\x00" * 4, b"tail bytes"])
def test_trailing_bytes_are_refused(vector: bytes, extra: bytes) -> None:
    with pytest.raises(BadPacket):
        decode_untrusted(vector + extra)
    # Even under a valid CRC, a body longer than its header says is refused.
    with pytest.raises(BadPacket) as info:
        decode_untrusted(with_crc(vector[: -CRC.size] + extra))
    assert info.value.reason == "length"


def resealed(packet: DataPacket | ControlPacket, offset: int, value: int) -> bytes:
    """``packet`` encoded with the byte at ``offset`` (from the route length byte) replaced."""
    framed = bytearray(encode(packet)[: -CRC.size])
    framed[offset] = value
    return with_crc(bytes(framed))


@pytest.mark.parametrize(
    ("offset", "value", "reason"),
    [
        (1, 0x07, "packet_type"),  # 0x0736
        (3, 0, "msg_type"),
        (3, 63, "msg_type"),
        (4, 0x20, "flags"),  # a data flag bit that does not exist (0x10 is ESTABLISHED)
    ],
)
def test_bad_header_fields_under_a_valid_crc(offset: int, value: int, reason: str) -> None:
    with pytest.raises(BadPacket) as info:
        decode_untrusted(resealed(data_packet(), offset, value))
    assert info.value.reason == reason


def test_control_flag_checks() -> None:
    with pytest.raises(BadPacket) as info:
        decode_untrusted(resealed(nack(NackReason.GAP), 4, 0))
    assert info.value.reason == "nack_reason"
    with pytest.raises(BadPacket) as info:
        decode_untrusted(resealed(nack(NackReason.GAP), 4, max(NackReason) + 1))
    assert info.value.reason == "nack_reason"
    with pytest.raises(BadPacket) as info:
        decode_untrusted(resealed(ack(), 4, 1))
    assert info.value.reason == "flags"


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"offset": 1, "msg_len": 20}, "offset"),  # FIRST at a non-zero offset
        ({"msg_len": 100}, "offset"),  # LAST that does not end the message
        ({"flags": FragFlags.NONE, "offset": 10, "msg_len": 12}, "length"),  # past the end
        ({"skip": True}, "length"),  # a SKIP packet with a payload
    ],
)
def test_inconsistent_fragments_are_refused(overrides: dict[str, object], reason: str) -> None:
    raw = encode(data_packet(**overrides))  # the encoder does not validate; the decoder does
    with pytest.raises(BadPacket) as info:
        decode_untrusted(raw)
    assert info.value.reason == reason


def test_route_longer_than_255_bytes_cannot_be_encoded() -> None:
    assert decode_untrusted(encode(ack(route=bytes(255)))).route == bytes(255)
    with pytest.raises(ValueError, match="route"):
        encode(ack(route=bytes(256)))


def test_largest_fragment_round_trips() -> None:
    with pytest.raises(struct.error):  # the fragment length field is 16 bits
        encode(data_packet(payload=b"x" * (U16 + 1)))
    p = data_packet(payload=b"\xa5" * U16)
    assert decode_untrusted(encode(p)) == p


# -- properties -------------------------------------------------------------------------------

u16 = st.integers(0, U16)
u32 = st.integers(0, U32)
routes = st.binary(max_size=255)
DATA_TYPES = [t for t in MsgType if t not in CONTROL_TYPES]


@st.composite
def data_packets(draw: st.DrawFn) -> DataPacket:
    flags = draw(st.sampled_from([FragFlags.NONE, FragFlags.FIRST, FragFlags.LAST, FragFlags.ONLY]))
    payload = draw(st.binary(max_size=600))
    offset = 0 if FragFlags.FIRST in flags else draw(st.integers(0, U32 - len(payload)))
    end = offset + len(payload)
    msg_len = end if FragFlags.LAST in flags else draw(st.integers(end, U32))
    return DataPacket(
        msg_type=draw(st.sampled_from(DATA_TYPES)),
        flags=flags,
        token=draw(u16),
        seq=draw(u32),
        src_node=draw(st.integers(0, MAX_NODE)),
        src_port=draw(st.integers(0, MAX_PORT)),
        dst_node=draw(st.integers(0, MAX_NODE)),
        dst_port=draw(st.integers(0, MAX_PORT)),
        msg_len=msg_len,
        offset=offset,
        payload=payload,
        mcast_group=draw(u16),
        am_handler=draw(u16),
        args=draw(st.tuples(u32, u32, u32, u32)),
        route=draw(routes),
        ack=draw(st.none() | u32),
    )


@st.composite
def control_packets(draw: st.DrawFn) -> ControlPacket:
    msg_type = draw(st.sampled_from(sorted(CONTROL_TYPES)))
    reason = draw(st.sampled_from(list(NackReason))) if msg_type is MsgType.NACK else None
    return ControlPacket(
        msg_type=msg_type,
        seq=draw(u32),
        from_node=draw(st.integers(0, MAX_NODE)),
        to_node=draw(st.integers(0, MAX_NODE)),
        src_port=draw(st.integers(0, MAX_PORT)),
        dst_port=draw(st.integers(0, MAX_PORT)),
        reason=reason,
        route=draw(routes),
        sack=draw(st.integers(0, (1 << 64) - 1)) if msg_type is MsgType.SACK else 0,
    )


packets = st.one_of(data_packets(), control_packets())


def decode_or_reason(raw: bytes) -> DataPacket | ControlPacket | str:
    """The packet, or the reason of the :class:`BadPacket`; any other exception escapes."""
    try:
        return decode_untrusted(raw)
    except BadPacket as exc:
        return exc.reason


@given(packets)
def test_encode_decode_round_trip(packet: DataPacket | ControlPacket) -> None:
    raw = encode(packet)
    assert decode_untrusted(raw) == packet
    assert encode(decode_untrusted(raw)) == raw


@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_bad_packet(raw: bytes) -> None:
    assert decode_or_reason(raw)


@given(st.binary(max_size=300))
def test_arbitrary_bytes_under_a_valid_crc_raise_only_bad_packet(framed: bytes) -> None:
    assert decode_or_reason(with_crc(framed))


@given(packets, st.data())
def test_mutated_packets_under_a_valid_crc_raise_only_bad_packet(
    packet: DataPacket | ControlPacket, data: st.DataObject
) -> None:
    framed = bytearray(encode(packet)[: -CRC.size])
    for _ in range(data.draw(st.integers(1, 4))):
        framed[data.draw(st.integers(0, len(framed) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(framed)))
    raw = with_crc(bytes(framed[:cut]))
    decoded = decode_or_reason(raw)
    assert decoded
    if not isinstance(decoded, str):
        assert encode(decoded) == raw  # whatever decodes has exactly one encoding


def test_only_the_application_bypass_type_signals_and_its_number_is_pinned() -> None:
    assert {MsgType.AB_COLL} == SIGNAL_TYPES
    assert int(MsgType.AB_COLL) == 14  # DESIGN §3; data_ab_coll.hex carries it
    assert not SIGNAL_TYPES & CONTROL_TYPES
