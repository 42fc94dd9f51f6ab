"""Link bundles (nicd.link.bundle): frames survive a round trip in order, runs fit a datagram,
and any byte string is either a bundle's frames or a BadPacket, never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nicd.errors import BadPacket
from nicd.link.bundle import (
    MAX_BUNDLE_BYTES,
    MAX_FRAME_BYTES,
    encode_bundle,
    is_bundle,
    plan_bundles,
    split_bundle_untrusted,
)
from nicd.link.wire import ControlPacket, MsgType, encode_control

frames_st = st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=40)


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


def test_encode_refuses_nothing_and_too_long() -> None:
    with pytest.raises(ValueError, match="at least one"):
        encode_bundle([])
    with pytest.raises(ValueError, match="does not fit"):
        encode_bundle([b"x", bytes(MAX_FRAME_BYTES + 1)])


@given(st.lists(st.integers(min_value=0, max_value=70_000), max_size=60))
def test_runs_cover_every_frame_in_order_and_fit(lengths: list[int]) -> None:
    runs = plan_bundles(lengths)
    assert [i for run in runs for i in run] == list(range(len(lengths)))
    for run in runs:
        assert len(run) > 0
        if len(run) > 1:
            assert all(lengths[i] <= MAX_FRAME_BYTES for i in run)
            assert len(encode_bundle([bytes(lengths[i]) for i in run])) <= MAX_BUNDLE_BYTES
