"""Link bundles (nicd.link.bundle): frames survive a round trip in order, runs fit a datagram,
and any byte string is either a bundle's frames or a BadPacket, never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nicd.errors import BadPacket
from nicd.link.bundle import (
    MAX_BUNDLE_BYTES,
    MAX_BUNDLE_FRAMES,
    MAX_FRAME_BYTES,
    MIN_FRAME_BYTES,
    encode_bundle,
    is_bundle,
    plan_bundles,
    split_bundle_untrusted,
)
from nicd.link.wire import ControlPacket, MsgType, encode_control

frames_st = st.lists(st.binary(min_size=MIN_FRAME_BYTES, max_size=300), min_size=1, max_size=40)


@given(frames_st)
def test_frames_round_trip_in_order(frames: list[bytes]) -> None:
    bundle = encode_bundle(frames)
    assert is_bundle(bundle)
    assert split_bundle_untrusted(bundle) == frames


@given(st.binary(max_size=200))
def test_any_bytes_are_frames_or_a_bad_packet(data: bytes) -> None:
    reason = None
    try:
        frames = split_bundle_untrusted(data)
    except BadPacket as exc:
        reason = exc.reason
    if reason is None:
        assert encode_bundle(frames) == data
    else:
        assert reason == "bundle"


def test_no_grim_frame_reads_as_a_bundle() -> None:
    ack = encode_control(ControlPacket(MsgType.ACK, 5, 1, 0, 2, 3))
    assert not is_bundle(ack)
    with pytest.raises(BadPacket):
        split_bundle_untrusted(ack)


def test_encode_refuses_nothing_too_many_too_short_and_too_long() -> None:
    with pytest.raises(ValueError, match="1 to"):
        encode_bundle([])
    with pytest.raises(ValueError, match="1 to"):
        encode_bundle([bytes(MIN_FRAME_BYTES)] * (MAX_BUNDLE_FRAMES + 1))
    with pytest.raises(ValueError, match="does not fit"):
        encode_bundle([bytes(MIN_FRAME_BYTES), b"x"])
    with pytest.raises(ValueError, match="does not fit"):
        encode_bundle([bytes(MIN_FRAME_BYTES), bytes(MAX_FRAME_BYTES + 1)])


def test_a_bundle_of_thousands_of_tiny_frames_is_refused() -> None:
    tiny = b"\x00\x06\x37" + (3000).to_bytes(2, "big") + b"\x00\x01x" * 3000
    with pytest.raises(BadPacket, match="3000 frames"):
        split_bundle_untrusted(tiny)
    short = encode_bundle([bytes(MIN_FRAME_BYTES)])[:5] + b"\x00\x01x"
    with pytest.raises(BadPacket, match="of 1 bytes"):
        split_bundle_untrusted(short)


@given(
    st.lists(
        st.one_of(
            st.integers(min_value=MIN_FRAME_BYTES, max_value=70_000),
            st.integers(min_value=MIN_FRAME_BYTES, max_value=80),
        ),
        max_size=600,
    )
)
def test_runs_cover_every_frame_in_order_and_fit(lengths: list[int]) -> None:
    runs = plan_bundles(lengths)
    assert [i for run in runs for i in run] == list(range(len(lengths)))
    for run in runs:
        assert len(run) > 0
        if len(run) > 1:
            assert all(lengths[i] <= MAX_FRAME_BYTES for i in run)
            assert len(encode_bundle([bytes(lengths[i]) for i in run])) <= MAX_BUNDLE_BYTES
