"""nicd.core.ready: the NICD_READY line (exact bytes, round trip, garbage gives only BadReadyLine),
the socket path, the log tag and the ``--routes`` file format."""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nicd.core.ready import (
    LOG_TAG_START,
    READY_PREFIX,
    UNSPECIFIED_HOSTS,
    BadReadyLine,
    Ready,
    decode_ready_untrusted,
    decode_routes_untrusted,
    encode_ready,
    encode_routes,
    log_tag,
    socket_path,
)
from nicd.errors import UsageError
from nicd.shell.routes import load_routes

if TYPE_CHECKING:
    from pathlib import Path


def line(node: int, host: str = "127.0.0.1", port: int = 40000, sock: str | None = None) -> str:
    obj = {"node": node, "udp": [host, port + node], "socket": sock or f"/run/nic{node}.sock"}
    return "NICD_READY " + json.dumps(obj) + "\n"


def test_vector() -> None:
    ready = Ready(3, ("10.0.0.7", 40003), "/run/nic3.sock")
    text = 'NICD_READY {"node": 3, "udp": ["10.0.0.7", 40003], "socket": "/run/nic3.sock"}'
    assert encode_ready(ready) == text
    assert decode_ready_untrusted(text) == ready
    assert decode_ready_untrusted(line(3, "10.0.0.7").encode()) == ready


def test_socket_path_and_log_tag() -> None:
    assert socket_path("/run/emurun-x", 7) == "/run/emurun-x/nic7.sock"
    assert log_tag(12) == "nicd[12]"
    assert log_tag(12).startswith(LOG_TAG_START)


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
        "NICD_READY " + "[" * 100_000,
    ],
)
def test_garbage_raises_only_bad_ready_line(text: str) -> None:
    with pytest.raises(BadReadyLine):
        decode_ready_untrusted(text)


_hosts = (
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=40)
    .filter(str.strip)
    .filter(lambda h: h not in UNSPECIFIED_HOSTS)  # refused (issue 16)
)
_readies = st.builds(
    Ready,
    node=st.integers(0, 0xFFFF),
    udp=st.tuples(_hosts, st.integers(1, 0xFFFF)),
    socket=st.text(st.characters(codec="utf-8"), min_size=1, max_size=120),
)


@given(_readies)
def test_round_trip(ready: Ready) -> None:
    text = encode_ready(ready)
    assert "\n" not in text
    assert decode_ready_untrusted(text) == ready
    assert decode_ready_untrusted(text.encode() + b"\n") == ready


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_bad_ready_line(data: bytes) -> None:
    for candidate in (data, READY_PREFIX.encode() + data):
        with contextlib.suppress(BadReadyLine):
            decode_ready_untrusted(candidate)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)


@given(
    st.fixed_dictionaries(
        {},
        optional={"node": _json, "udp": _json, "socket": _json, "extra": _json},
    )
    | _json
)
def test_any_json_decodes_or_raises_bad_ready_line(obj: object) -> None:
    with contextlib.suppress(BadReadyLine):
        ready = decode_ready_untrusted(READY_PREFIX + json.dumps(obj))
        assert decode_ready_untrusted(encode_ready(ready)) == ready


# -- the --routes file ------------------------------------------------------------------------


def test_routes_round_trip_in_nicd_format(tmp_path: Path) -> None:
    table = {1: ("node1", 4001), 0: ("10.1.2.3", 4000)}
    text = encode_routes(table)
    assert json.loads(text) == {"0": ["10.1.2.3", 4000], "1": ["node1", 4001]}
    assert decode_routes_untrusted(text) == table
    path = tmp_path / "routes.json"
    path.write_text(text)
    assert load_routes(str(path)) == table


@pytest.mark.parametrize(
    "text",
    ["", "[]", '{"0": "x"}', '{"a": ["h", 1]}', '{"0": ["h", 0]}', '{"0": ["h", 1e400]}'],
)
def test_bad_routes(text: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        decode_routes_untrusted(text)
    path = tmp_path / "routes.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=str(path)):
        load_routes(str(path))


@given(st.text(max_size=200) | _json.map(json.dumps))
def test_any_routes_text_decodes_or_raises_usage_error(text: str) -> None:
    with contextlib.suppress(UsageError):
        table = decode_routes_untrusted(text)
        assert decode_routes_untrusted(encode_routes(table)) == table


@pytest.mark.parametrize("host", ["0.0.0.0", "::", ""])
def test_an_unspecified_address_is_never_announced(host: str) -> None:
    from nicd.core.ready import announce_host

    with pytest.raises(BadReadyLine, match="bad host"):
        decode_ready_untrusted(line(1, host))
    with pytest.raises(UsageError, match="concrete address"):
        announce_host(None, host)
    assert announce_host("198.18.7.11", host) == "198.18.7.11"
    assert announce_host(None, "198.18.7.11") == "198.18.7.11"
