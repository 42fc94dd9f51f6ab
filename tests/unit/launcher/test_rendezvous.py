"""The address exchange: ready lines in, a complete routing table out. (The ready line's
codec itself is nicd's: tests/unit/test_ready.py.)"""

from __future__ import annotations

import json

import pytest

from launcher.errors import RendezvousError
from launcher.rendezvous import Rendezvous


def line(node: int, host: str = "127.0.0.1", port: int = 40000, sock: str | None = None) -> str:
    obj = {"node": node, "udp": [host, port + node], "socket": sock or f"/run/nic{node}.sock"}
    return "NICD_READY " + json.dumps(obj) + "\n"


@pytest.mark.parametrize(
    "text",
    ["", "hello", "NICD_READY {", 'NICD_READY {"node": 0, "udp": ["h", 0], "socket": "/s"}'],
)
def test_garbage_raises_rendezvous_error_and_changes_nothing(text: str) -> None:
    rv = Rendezvous(1)
    with pytest.raises(RendezvousError):
        rv.on_line(0, text)
    with pytest.raises(RendezvousError):
        rv.on_line(0, text.encode() + b"\xff")
    assert rv.missing() == [0]
    assert rv.on_line(0, line(0).encode())


def test_table_appears_when_every_node_spoke() -> None:
    rv = Rendezvous(3)
    assert not rv.on_line(2, line(2))
    assert not rv.on_line(0, line(0))
    assert rv.missing() == [1]
    with pytest.raises(RendezvousError, match=r"\[1\]"):
        rv.routes()
    assert rv.on_line(1, line(1))
    assert rv.routes() == {n: ("127.0.0.1", 40000 + n) for n in range(3)}
    assert rv.socket(1) == "/run/nic1.sock"


def test_strangers_and_duplicates_change_nothing() -> None:
    rv = Rendezvous(2)
    with pytest.raises(RendezvousError, match="announced itself as node 1"):
        rv.on_line(0, line(1))
    with pytest.raises(RendezvousError, match="not in a job of 2"):
        rv.on_line(5, line(5))
    rv.on_line(0, line(0))
    with pytest.raises(RendezvousError, match="twice"):
        rv.on_line(0, line(0))
    assert rv.missing() == [1]
