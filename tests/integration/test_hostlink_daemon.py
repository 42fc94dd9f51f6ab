"""A real nicd fed bad host records: each is a counted ``host_record`` drop, never a crash."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import pytest

from emubench.localcluster import NicCluster
from emucluster.port.client import Port
from nicd import hostlink as hl

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow

BAD_RECORDS = [
    bytes([0xFF]) + bytes(20),  # an opcode no family owns
    bytes([hl.HostOp.CONT]) + b"abc",  # a CONT with no head before it
    bytes([hl.HostOp.SEND, 1]),  # a truncated head
    bytes([hl.HostOp.NICVM_REPLY]) + b"\xc1",  # msgpack that does not parse
]


def test_bad_host_records_are_counted_drops_and_nicd_carries_on(tmp_path: Path) -> None:
    with NicCluster(1, tmp_path) as cluster:
        for record in BAD_RECORDS:
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as rogue:
                rogue.settimeout(30)
                rogue.connect(cluster.sockets[0])
                rogue.send(record)
                assert rogue.recv(hl.MAX_RECORD_BYTES) == b""  # nicd closed this connection
        drops = cluster.stats(0)["link"]["drops"]
        assert drops["host_record"] == len(BAD_RECORDS)
        with Port.open(cluster.sockets[0]) as a, Port.open(cluster.sockets[0]) as b:
            a.send(0, b.port_id, b"still alive")
            assert b.recv(timeout=30).payload == b"still alive"
            a.flush(timeout=30)
