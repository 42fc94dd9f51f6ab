"""Untrusted input to nicd's decoders and its host-request checks (audit tests 8, 9, 10).

Each decoder raises its own error type and nothing else, whatever it is fed; a host SEND or
multisend with a message type that is the NIC's own is a counted refusal, never a packet.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nicd import hostlink as hl
from nicd.config import NicConfig
from nicd.core.actions import ToHost, Transmit
from nicd.core.nic import NicCore
from nicd.core.ready import decode_routes_untrusted
from nicd.errors import ProtocolViolation, UsageError
from nicd.gm.service import HOST_MSG_TYPES
from nicd.link.wire import MsgType
from nicd.shell.routes import load_routes, resolve_routes

if TYPE_CHECKING:
    from pathlib import Path

A = ("127.0.0.1", 1001)
B = ("127.0.0.1", 1002)

# -- the host-link Assembler (audit test 8) --------------------------------------------------

_ops = st.sampled_from([int(op) for op in hl.HostOp]) | st.integers(0, 255)
_records = st.tuples(_ops, st.binary(max_size=120)).map(lambda t: bytes([t[0]]) + t[1])


@settings(max_examples=300, deadline=None)
@given(st.lists(_records | st.binary(min_size=1, max_size=64), min_size=1, max_size=12))
def test_any_record_sequence_gives_records_or_protocol_violation(records: list[bytes]) -> None:
    """One connection's records in a row (a head, CONTs, garbage), through one Assembler."""
    assembler = hl.Assembler(max_message=4096)
    for record in records:
        try:
            assembler.feed(record)
        except ProtocolViolation:
            return  # the daemon closes the connection here


@pytest.mark.parametrize("op", [hl.HostOp.SET_ROUTES, hl.HostOp.STATS, hl.HostOp.NICVM_REPLY,
                                hl.HostOp.MCAST_GROUP, hl.HostOp.NICVM_LOAD])  # fmt: skip
@pytest.mark.parametrize(
    "body",
    [b"\x91" * 100_000 + b"\xc0", b"\xcb\x7f\xf0\x00\x00\x00\x00\x00\x00", b"\xdd\xff\xff\xff\xff"],
    ids=["deep", "inf", "huge-array"],
)
def test_hostile_msgpack_is_a_protocol_violation(op: int, body: bytes) -> None:
    with contextlib.suppress(ProtocolViolation):
        hl.Assembler().feed(bytes([op]) + body)


# -- the routing file and SET_ROUTES addresses (audit test 9) ---------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"0": [["h"], 7]}',
        '{"0": ["h", 7, 8]}',
        '{"0": ["", 7]}',
        '{"0": ["h", true]}',
        '{"0": ["h", 7.5]}',
        '{"0": [1, 7]}',
        '{"70000": ["h", 7]}',
        '{"0": ["h", 70000]}',
        "[" * 100_000 + "]" * 100_000,
        '{"0": ["h", 1e400]}',
        '{"1e400": ["h", 7]}',
    ],
)
def test_malformed_routes_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        decode_routes_untrusted(text)


def test_an_unreadable_routes_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"missing\.json"):
        load_routes(str(tmp_path / "missing.json"))
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{")
    with pytest.raises(UsageError, match=r"bin\.json"):
        load_routes(str(tmp_path / "bin.json"))


@pytest.mark.parametrize("host", ["bad\x00host", "a" * 300, "no-such-host.invalid", "", "\udcff"])
def test_an_unresolvable_route_is_a_usage_error_without_dns(host: str) -> None:
    """``numeric_only`` (the event loop's path) never asks DNS: a name is refused at once."""
    with pytest.raises(UsageError):
        resolve_routes({1: (host, 7000)}, numeric_only=True)


def test_numeric_routes_resolve_without_dns() -> None:
    assert resolve_routes({1: ("127.0.0.1", 7000)}, numeric_only=True) == {1: ("127.0.0.1", 7000)}


# -- reserved message types (audit test 10, finding 2) ----------------------------------------

RESERVED = [
    MsgType.ACK, MsgType.NACK, MsgType.MCAST_DATA, MsgType.MCAST_ACK, MsgType.RM_READ_REPLY,
    MsgType.MGMT_HELLO, MsgType.MGMT_ROUTING, MsgType.MGMT_STATS, MsgType.PING, MsgType.PONG,
    MsgType.SACK,
]  # fmt: skip
"""Types only a NIC puts on the wire: controls, multicast data, read replies, management."""


def _opened() -> NicCore:
    core = NicCore(NicConfig(0, "/tmp"))
    core.set_routes({0: A, 1: B})
    core.on_host(1, hl.OpenReq(0), now=0.0)
    return core


def test_the_reserved_types_and_the_host_types_partition_msg_type() -> None:
    assert set(HOST_MSG_TYPES.values()) == set(MsgType) - set(RESERVED)


@pytest.mark.parametrize("msg_type", [*RESERVED, 0, 63, 255], ids=str)
def test_a_host_send_of_a_reserved_type_is_refused(msg_type: int) -> None:
    core = _opened()
    for req in (
        hl.SendReq(1, 1, 0, b"x", msg_type=int(msg_type)),
        hl.MultiSendReq(2, (1,), 0, b"x", msg_type=int(msg_type)),
    ):
        out = core.on_host(1, req, now=0.0)
        assert not any(isinstance(a, Transmit) for a in out), out
        [refused] = out
        assert isinstance(refused, ToHost)
        assert isinstance(refused.record, hl.Refused)
        assert f"message type {int(msg_type)}" in refused.record.reason
    assert core.link.drops["host_misuse"] == 2


@pytest.mark.parametrize("msg_type", sorted(HOST_MSG_TYPES), ids=str)
def test_every_host_type_is_still_sent(msg_type: int) -> None:
    core = _opened()
    out = core.on_host(1, hl.SendReq(1, 1, 0, b"x", msg_type=msg_type), now=0.0)
    assert any(isinstance(a, Transmit) for a in out), out


def test_opened_fits_its_record_whatever_the_config() -> None:
    core = NicCore(NicConfig(0, "/tmp", send_tokens=70_000))
    core.set_routes({n: ("127.0.0.1", 2000 + n) for n in range(0x10000)})
    [opened] = core.on_host(1, hl.OpenReq(0), now=0.0)
    assert isinstance(opened, ToHost)
    hl.encode_record(opened.record)  # no struct.error
