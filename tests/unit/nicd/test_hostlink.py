"""Host link codec: every record round-trips, chunking is invisible, bad records are refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nicd import hostlink as hl
from nicd.errors import ProtocolViolation
from tests.unit.hostlink_strategies import records


def feed_all(assembler: hl.Assembler, wire: list[bytes]) -> hl.HostRecord | None:
    out = None
    for i, record in enumerate(wire):
        out = assembler.feed(record)
        assert (out is None) == (i < len(wire) - 1)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(records, min_size=1, max_size=4))
def test_records_round_trip_in_sequence(recs: list[hl.HostRecord]) -> None:
    assembler = hl.Assembler()
    for rec in recs:
        wire = hl.encode_record(rec)
        assert all(len(r) <= hl.MAX_RECORD_BYTES for r in wire)
        assert feed_all(assembler, wire) == rec


def test_large_payload_is_chunked() -> None:
    payload = bytes(range(256)) * 1000
    wire = hl.encode_record(hl.SendReq(7, 1, 2, payload))
    assert len(wire) == 4
    assert wire[1][0] == hl.HostOp.CONT


@pytest.mark.parametrize(
    "record",
    [b"\xff", b"\x02\x01", b"\x16", b"\x05\xc1", b"\x19\x01"],
    ids=["unknown-op", "short-send", "short-sent", "bad-msgpack", "stats-not-map"],
)
def test_malformed_records_raise_protocol_violation(record: bytes) -> None:
    with pytest.raises(ProtocolViolation):
        hl.Assembler().feed(record)


def test_cont_without_head_and_head_without_cont_are_refused() -> None:
    with pytest.raises(ProtocolViolation):
        hl.Assembler().feed(bytes((hl.HostOp.CONT,)) + b"abc")
    assembler = hl.Assembler()
    wire = hl.encode_record(hl.SendReq(1, 1, 1, b"x" * (hl.CHUNK_BYTES + 1)))
    assert assembler.feed(wire[0]) is None
    with pytest.raises(ProtocolViolation):
        assembler.feed(hl.encode_record(hl.SentEvent(3))[0])


def test_message_over_the_limit_is_refused() -> None:
    wire = hl.encode_record(hl.SendReq(1, 1, 1, b"x" * 100))
    with pytest.raises(ProtocolViolation):
        hl.Assembler(max_message=99).feed(wire[0])


def test_bad_routing_entries_are_refused() -> None:
    bad = bytes((hl.HostOp.SET_ROUTES,)) + b"\x81\x00\x91\x01"  # {0: [1]}
    with pytest.raises(ProtocolViolation):
        hl.Assembler().feed(bad)


def test_signal_control_bytes_and_bad_flag() -> None:
    assert hl.encode_record(hl.SignalCtl(True, 0x1234, 7)) == [
        bytes.fromhex("09010000123400000007")
    ]
    with pytest.raises(ProtocolViolation):
        hl.Assembler().feed(bytes.fromhex("09020000123400000007"))


def test_grim_records_round_trip() -> None:
    from nicd.hostlink import grim as gl

    grim_records = [
        gl.RmMapReq(0x1000_0000, 64, 1, 128),
        gl.RmUnmapReq(0x1000_0000),
        gl.RmXlateReq(0x1000_0004, 8),
        gl.RmXlateReply(5, 0, 0, 0, 0),
        gl.RmXlateReply(0x1000_0004, 0x1000_0000, 64, 2, 0),
        gl.RmStatusEvent(7, 3),
        gl.RmUpcallSignals(True, 4242),
        gl.RmUpcallSignals(False, 0),
        gl.RmWatch(True),
        gl.RmWatch(False),
        gl.RmLanded(),
    ]
    for rec in grim_records:
        [wire] = hl.encode_record(rec)
        assert hl.Assembler().feed(wire) == rec
    assert set(gl.DECODERS) == {hl.HostOp[n] for n in ("RM_MAP", "RM_UNMAP", "RM_XLATE_REQ",
                                                       "RM_XLATE", "RM_STATUS",
                                                       "RM_SIGNALS", "RM_WATCH",
                                                       "RM_LANDED")}  # fmt: skip
    with pytest.raises(ProtocolViolation):
        hl.Assembler().feed(bytes([hl.HostOp.RM_STATUS, 1]))
    with pytest.raises(ProtocolViolation):  # the enable flag is 0 or 1
        hl.Assembler().feed(bytes([hl.HostOp.RM_SIGNALS, 2, 0, 0, 0, 1]))
    with pytest.raises(ProtocolViolation):
        hl.Assembler().feed(bytes([hl.HostOp.RM_WATCH, 2]))


def test_a_delegate_the_encoder_would_refuse_is_refused_when_decoded() -> None:
    # found by the fuzzer (tests/fuzz, target hostlink): an empty module name decoded, and the
    # decoded record then failed to encode; the decoder now refuses what the encoder refuses
    good = hl.encode_record(hl.NicvmDelegateReq(1, "m", 0, 0, b"x", (0, 0, 0, 0)))[0]
    head = good[: -len(b"mx")]
    for record in (head[:-1] + b"\x00x", head + b"m" + bytes(hl.NICVM_MAX_DELEGATE + 1)):
        with pytest.raises(ProtocolViolation, match="NICVM_DELEGATE"):
            hl.Assembler().feed(record)
    assert hl.Assembler().feed(good) == hl.NicvmDelegateReq(1, "m", 0, 0, b"x", (0, 0, 0, 0))
