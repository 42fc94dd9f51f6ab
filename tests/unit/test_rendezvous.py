"""The address exchange: ready lines in, a complete routing table out."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from launcher.errors import RendezvousError
from launcher.rendezvous import (
    NicReady,
    Rendezvous,
    decode_ready_untrusted,
    decode_routes_untrusted,
    encode_routes,
)


def line(node: int, host: str = "127.0.0.1", port: int = 40000, sock: str | None = None) -> str:
    obj = {"node": node, "udp": [host, port + node], "socket": sock or f"/run/nic{node}.sock"}
    return "NICD_READY " + json.dumps(obj) + "\n"


def test_decode_ready_line() -> None:
    ready = decode_ready_untrusted(line(3, "10.0.0.7").encode())
    assert ready == NicReady(3, ("10.0.0.7", 40003), "/run/nic3.sock")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello",
        "NICD_READY",
        "NICD_READY {",
        "NICD_READY []",
        'NICD_READY {"node": 0}',
        'NICD_READY {"node": "0", "udp": ["h", 1], "socket": "/s"}',
        'NICD_READY {"node": true, "udp": ["h", 1], "socket": "/s"}',
        'NICD_READY {"node": 70000, "udp": ["h", 1], "socket": "/s"}',
        'NICD_READY {"node": 0, "udp": ["h", 0], "socket": "/s"}',
        'NICD_READY {"node": 0, "udp": ["h", 1, 2], "socket": "/s"}',
        'NICD_READY {"node": 0, "udp": ["", 1], "socket": "/s"}',
        'NICD_READY {"node": 0, "udp": ["h", 1], "socket": ""}',
    ],
)
def test_garbage_raises_only_rendezvous_error(text: str) -> None:
    with pytest.raises(RendezvousError):
        decode_ready_untrusted(text)


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_rendezvous_error(data: bytes) -> None:
    for candidate in (data, b"NICD_READY " + data):
        with contextlib.suppress(RendezvousError):
            decode_ready_untrusted(candidate)


def test_table_appears_when_every_node_spoke() -> None:
    rv = Rendezvous(3)
    assert not rv.on_ready(2, decode_ready_untrusted(line(2)))
    assert not rv.on_ready(0, decode_ready_untrusted(line(0)))
    assert rv.missing() == [1]
    with pytest.raises(RendezvousError, match=r"\[1\]"):
        rv.routes()
    assert rv.on_ready(1, decode_ready_untrusted(line(1)))
    assert rv.routes() == {n: ("127.0.0.1", 40000 + n) for n in range(3)}
    assert rv.socket(1) == "/run/nic1.sock"


def test_strangers_and_duplicates_change_nothing() -> None:
    rv = Rendezvous(2)
    with pytest.raises(RendezvousError, match="announced itself as node 1"):
        rv.on_ready(0, decode_ready_untrusted(line(1)))
    with pytest.raises(RendezvousError, match="not in a job of 2"):
        rv.on_ready(5, decode_ready_untrusted(line(5)))
    rv.on_ready(0, decode_ready_untrusted(line(0)))
    with pytest.raises(RendezvousError, match="twice"):
        rv.on_ready(0, decode_ready_untrusted(line(0)))
    assert rv.missing() == [1]


def test_routes_round_trip_in_nicd_format() -> None:
    table = {1: ("node1", 4001), 0: ("10.1.2.3", 4000)}
    text = encode_routes(table)
    assert json.loads(text) == {"0": ["10.1.2.3", 4000], "1": ["node1", 4001]}
    assert decode_routes_untrusted(text) == table


@pytest.mark.parametrize("text", ["", "[]", '{"0": "x"}', '{"a": ["h", 1]}', '{"0": ["h", 0]}'])
def test_bad_routes(text: str) -> None:
    with pytest.raises(RendezvousError):
        decode_routes_untrusted(text)
