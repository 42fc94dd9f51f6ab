"""A real nicd and a host that floods its PCI socket (audit test 11): the link is still
served, and a host that never reads its replies is cut off at a bounded output queue."""

from __future__ import annotations

import socket
import threading
import time
from typing import TYPE_CHECKING

import pytest

from emubench.localcluster import NicCluster
from emucluster.port.client import Port
from nicd import hostlink as hl

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow

STATS_REQ = b"".join(hl.encode_record(hl.StatsReq()))
WAIT_S = 60.0  # generous: the machine is shared


def _flood(path: str, stop: threading.Event, *, read: bool, sent: list[int]) -> str:
    """Send StatsReq until ``stop`` or the NIC closes the connection; say how it ended."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.connect(path)
        sock.settimeout(WAIT_S)
        reader = None
        if read:

            def drain() -> None:
                try:
                    while sock.recv(hl.MAX_RECORD_BYTES):
                        pass
                except OSError:
                    pass

            reader = threading.Thread(target=drain, daemon=True)
            reader.start()
        try:
            while not stop.is_set():
                sock.send(STATS_REQ)
                sent[0] += 1
        except OSError as exc:
            return f"closed: {exc}"
        finally:
            if reader is not None:
                sock.shutdown(socket.SHUT_RDWR)
                reader.join(WAIT_S)
        return "stopped"


def _ping(a: Port, b: Port, payload: bytes) -> float:
    start = time.monotonic()
    a.send(b.node_id, b.port_id, payload)
    assert b.recv(timeout=WAIT_S).payload == payload
    a.flush(timeout=WAIT_S)
    return time.monotonic() - start


def test_a_host_flooding_its_nic_does_not_starve_the_link(tmp_path: Path) -> None:
    with NicCluster(2, tmp_path) as cluster:
        with Port.open(cluster.sockets[1]) as a, Port.open(cluster.sockets[0]) as b:
            stop = threading.Event()
            sent = [0]
            outcome: list[str] = []
            flooder = threading.Thread(
                target=lambda: outcome.append(
                    _flood(cluster.sockets[0], stop, read=True, sent=sent)
                ),
                daemon=True,
            )
            flooder.start()
            try:
                deadline = time.monotonic() + WAIT_S
                while sent[0] < 2000 and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert sent[0] >= 2000, "the flood never got going"
                for i in range(5):  # node 0's NIC serves the link while its host floods
                    _ping(a, b, b"through the flood %d" % i)
                assert flooder.is_alive(), "the flood must still run during the pings"
            finally:
                stop.set()
                flooder.join(WAIT_S)
            assert outcome == ["stopped"]
        link = cluster.stats(0)["link"]
        assert link["host_read_yields"] > 0


def test_a_host_that_never_reads_is_cut_off_and_the_nic_carries_on(tmp_path: Path) -> None:
    args = ["--host-out-bytes", "65536", "--max-message", "65536"]
    with NicCluster(2, tmp_path, args) as cluster:
        stop = threading.Event()
        timer = threading.Timer(WAIT_S, stop.set)
        timer.start()
        try:
            outcome = _flood(cluster.sockets[0], stop, read=False, sent=[0])
        finally:
            timer.cancel()
        assert outcome.startswith("closed"), "nicd kept queueing for a host that never reads"
        assert cluster.stats(0)["link"]["drops"]["host_outq_full"] == 1
        with Port.open(cluster.sockets[1]) as a, Port.open(cluster.sockets[0]) as b:
            _ping(a, b, b"still alive")
