"""launcher.control: pinned frame vectors, round trips of every message, and garbage (any bytes,
any truncation, wrong field types) giving ControlError and nothing else."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
from dataclasses import fields
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launcher import control as c

VECTORS: list[tuple[c.Message, str]] = [
    (
        c.Challenge(1, bytes(range(16))),
        "0000002e83a174a96368616c6c656e6765a776657273696f6e01a56e6f6e6365c410"
        "000102030405060708090a0b0c0d0e0f",
    ),
    (
        c.Ready(3, b"NICD_READY {}", True),
        "0000002d84a174a57265616479a46e6f646503a46c696e65c40d4e4943445f5245414459207b7d"
        "a87265616c74696d65c3",
    ),
    (
        c.Routes([[0, "198.18.7.10", 40000]]),
        "0000002282a174a6726f75746573a57461626c65919300ab3139382e31382e372e3130cd9c40",
    ),
    (c.Stop(), "0000000881a174a473746f70"),
    (
        c.Exit("host", 2, 1234, -9, False, 0.5, 0.25, 1.0, 0.125),
        "0000007c8aa174a465786974a4726f6c65a4686f7374a46e6f646502a3706964cd04d2aa72657475726e"
        "636f6465f7a873746f7070696e67c2a6757365725f73cb3fe0000000000000a873797374656d5f73cb3f"
        "d0000000000000a677616c6c5f73cb3ff0000000000000ab72756e5f64656c61795f73cb3fc000000000"
        "0000",
    ),
    (  # the run delay unknown: nil
        c.Exit("nicd", 2, 1235, 0, True, 0.5, 0.25, 1.0, None),
        "000000748aa174a465786974a4726f6c65a46e696364a46e6f646502a3706964cd04d3aa72657475726e"
        "636f646500a873746f7070696e67c3a6757365725f73cb3fe0000000000000a873797374656d5f73cb3f"
        "d0000000000000a677616c6c5f73cb3ff0000000000000ab72756e5f64656c61795f73c0",
    ),
]


@pytest.mark.parametrize(("message", "hex_"), VECTORS)
def test_vectors(message: c.Message, hex_: str) -> None:
    assert c.encode_message(message).hex() == hex_
    assert c.FrameDecoder().feed(bytes.fromhex(hex_)) == [message]


def test_macs_are_pinned_and_differ() -> None:
    token, e, a = b"secret-token", bytes(16), bytes([1]) * 16
    hello = c.hello_mac(token, e, a)
    assert hello.hex() == "5b3505435bdbc7ba3740612c0c3344a3a4b17b0a3bc86bee886b620eb78beaf1"
    assert hello == hmac.new(token, b"emucluster hello v1\0" + e + a, hashlib.sha256).digest()
    assert c.welcome_mac(token, e, a) != hello  # a Hello mac cannot be replayed as Welcome
    assert c.hello_mac(b"other", e, a) != hello


SAMPLES: dict[str, Any] = {
    "version": 1, "agent_id": -1, "name": "h1", "hostname": "vm", "pid": 7, "cpus": 2,
    "slots": 2, "bind_addr": "198.18.7.11", "nonce": b"n" * 16, "mac": b"m" * 32,
    "job_id": "abc", "np": 4, "nodes": [2, 3], "program": ["app.py", "-v"], "module": None,
    "cwd": "/app", "env": {"EMU_BCAST": "binomial"}, "faults": {"loss": 0.1, "seed": 3},
    "nicd_args": [], "stats": True, "bind_to": "core", "nic_priority": "rt",
    "stop_grace": 3.0, "ready_timeout": 60.0, "multi_host": True, "node": 3,
    "line": b"NICD_READY {}", "realtime": False, "table": [[0, "198.18.7.10", 4000]],
    "priority": "nice", "role": "host", "fd": 1, "data": b"x\n", "returncode": 0,
    "stopping": False, "user_s": 0.1, "system_s": 0.2, "wall_s": 0.3, "run_delay_s": 0.05,
    "code": 127, "message": "app.py: no such file", "killed": ["nicd[4]"], "segments": [],
    "survivors": [], "trace": True, "seq": 2, "agent_ns": 123456789, "offset": 1 << 20,
}  # fmt: skip


def sample(cls: type) -> c.Message:
    return cls(**{f.name: SAMPLES[f.name] for f in fields(cls)})  # type: ignore[no-any-return]


@pytest.mark.parametrize("cls", list(c.MESSAGES.values()), ids=list(c.MESSAGES))
def test_every_message_round_trips_and_frames_split_anywhere(cls: type) -> None:
    message = sample(cls)
    frame = c.encode_message(message)
    assert c.decode_message_untrusted(frame[4:]) == message
    for cut in range(len(frame) + 1):
        decoder = c.FrameDecoder()
        got = decoder.feed(frame[:cut]) + decoder.feed(frame[cut:] + frame)
        assert got == [message, message]
        assert decoder.pending == 0


@pytest.mark.parametrize("cls", list(c.MESSAGES.values()), ids=list(c.MESSAGES))
def test_a_wrong_field_type_missing_or_extra_field_is_a_control_error(cls: type) -> None:
    body = {"t": cls.TAG, **{f.name: SAMPLES[f.name] for f in fields(cls)}}
    for name in list(body)[1:]:
        bad = {**body, name: b"\xff\xff\xff"}
        if isinstance(body[name], bytes):
            bad[name] = 3.5
        with pytest.raises(c.ControlError):
            c.decode_message_untrusted(msgpack.packb(bad, use_bin_type=True))
        missing = {k: v for k, v in body.items() if k != name}
        with pytest.raises(c.ControlError):
            c.decode_message_untrusted(msgpack.packb(missing, use_bin_type=True))
    with pytest.raises(c.ControlError):
        c.decode_message_untrusted(msgpack.packb({**body, "extra": 1}, use_bin_type=True))


@pytest.mark.parametrize(
    "body",
    [b"", b"\xc1", msgpack.packb([1, 2]), msgpack.packb({"t": "nope"}), msgpack.packb({"t": 3}),
     msgpack.packb({1: 2}), msgpack.packb({"t": "stop"}) + b"\x00", b"\x91" * 5000,
     msgpack.packb({"t": "ready", "node": -1, "line": b"", "realtime": True}),
     msgpack.packb({"t": "exit", "role": "host", "node": 1, "pid": 1, "returncode": 0,
                    "stopping": True, "user_s": float("nan"), "system_s": 0.0, "wall_s": 0.0})],
)  # fmt: skip
def test_garbage_bodies_are_control_errors(body: bytes) -> None:
    with pytest.raises(c.ControlError):
        c.decode_message_untrusted(body)


def test_an_oversized_frame_is_refused_before_it_is_buffered() -> None:
    decoder = c.FrameDecoder()
    with pytest.raises(c.ControlError, match="exceeds"):
        decoder.feed((c.MAX_FRAME + 1).to_bytes(4, "big") + b"x")


def test_encoding_a_non_message_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        c.encode_message("stop")  # type: ignore[arg-type]


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_any_bytes_give_messages_or_control_error(data: bytes) -> None:
    with contextlib.suppress(c.ControlError):
        c.FrameDecoder().feed(data)


@settings(max_examples=300)
@given(
    st.dictionaries(
        st.sampled_from(["t", *SAMPLES]),
        st.one_of(
            st.none(),
            st.integers(-(2**63), 2**63 - 1),
            st.text(max_size=5),
            st.binary(max_size=5),
            st.lists(st.integers(0, 2**40), max_size=3),
            st.sampled_from(list(c.MESSAGES)),
            st.floats(),
        ),
        max_size=20,
    )
)
def test_any_map_gives_a_message_or_control_error(body: dict[str, Any]) -> None:
    try:
        message = c.decode_message_untrusted(msgpack.packb(body, use_bin_type=True))
    except c.ControlError:
        return
    assert c.decode_message_untrusted(c.encode_message(message)[4:]) == message
