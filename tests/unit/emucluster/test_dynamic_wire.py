"""The rank <-> launcher messages of processes started at run time (`emucluster.mpi.dynamic.wire`):
every message survives its codec, and every malformed line is refused with BadMessage."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emucluster.mpi.dynamic import client, wire
from emucluster.mpi.errors import ERR_NAME, ERR_SPAWN
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from pathlib import Path

texts = st.text(max_size=30)
commands = st.builds(
    wire.Command,
    st.lists(texts, min_size=1, max_size=4).filter(lambda a: bool(a[0])).map(tuple),
    st.integers(1, 16),
    st.none() | texts,
    st.lists(st.tuples(texts, texts), max_size=3).map(tuple),
)
requests = (
    st.builds(
        wire.Spawn, st.integers(0, 0xFFFF), st.lists(commands, min_size=1, max_size=3).map(tuple)
    )
    | st.builds(wire.Publish, texts, texts)
    | st.builds(wire.Lookup, texts)
    | st.builds(wire.Unpublish, texts, texts)
)
replies = st.builds(wire.Reply, texts, st.integers(0, 1 << 20),
                    st.lists(st.integers(0, 0xFFFF), max_size=5).map(tuple), texts)  # fmt: skip


@given(requests)
def test_every_request_survives_its_codec(request: wire.Request) -> None:
    line = wire.encode(request)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert wire.decode_request(line) == request


@given(replies)
def test_every_reply_survives_its_codec(reply: wire.Reply) -> None:
    assert wire.decode_reply(wire.encode(reply)) == reply


def _spawn(**command: object) -> bytes:
    doc = {"argv": ["prog"], "maxprocs": 1, "wdir": None, "env": [], **command}
    return json.dumps({"kind": "spawn", "node": 0, "commands": [doc]}).encode()


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"kind": "launch"}',
        b'{"kind": "spawn", "node": 0, "commands": []}',
        b'{"kind": "spawn", "node": -1, "commands": [{}]}',
        b'{"kind": "lookup", "service": 7}',
        b'{"kind": "publish", "service": "a"}',
        _spawn(argv=[]),
        _spawn(argv=[""]),
        _spawn(argv=["x", 3]),
        _spawn(maxprocs=0),
        _spawn(maxprocs=True),
        _spawn(maxprocs=wire.MAX_PROCS + 1),
        _spawn(env=[["A"]]),
        _spawn(wdir=5),
        _spawn(extra=1),
        b" " * (wire.MAX_LINE + 1),
    ],
)
def test_malformed_requests_are_refused(line: bytes) -> None:
    with pytest.raises(wire.BadMessage):
        wire.decode_request(line)


def test_too_many_processes_in_one_spawn_are_refused() -> None:
    many = wire.Command(("p",), wire.MAX_PROCS)
    with pytest.raises(wire.BadMessage, match="more than"):
        wire.decode_request(wire.encode(wire.Spawn(0, (many, many))))


@pytest.mark.parametrize(
    "line", [b"{}x", b'{"nodes": [1, "2"]}', b'{"error": 3}', b'{"spawn": -4}']
)
def test_malformed_replies_are_refused(line: bytes) -> None:
    with pytest.raises(wire.BadMessage):
        wire.decode_reply(line)


def test_a_rank_whose_launcher_serves_no_socket_gets_the_reason(tmp_path: Path) -> None:
    """Under agents or a PMI launcher the run directory has no launcher socket: ERR_SPAWN."""
    spawn = wire.Spawn(0, (wire.Command(("prog",), 1),))
    with pytest.raises(MPIException) as raised:
        client.ask(str(tmp_path), spawn, ERR_SPAWN)
    assert raised.value.Get_error_class() == ERR_SPAWN
    assert "only emurun's one-machine launch" in str(raised.value)
    with pytest.raises(MPIException, match="not started by emurun"):
        client.ask(None, wire.Lookup("svc"), ERR_NAME)
