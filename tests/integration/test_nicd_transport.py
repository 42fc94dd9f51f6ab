"""Real nicd processes on loopback: reliable delivery under faults, dead peers, garbage."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emubench.localcluster import NicCluster, run_hosts
from emucluster.port.client import Port, PortError, RmWriteEvent, SendFailedError
from nicd import hostlink as hl
from nicd.config import FaultConfig

HOSTS = Path(__file__).parent / "hosts"
pytestmark = pytest.mark.slow


def test_all_pairs_exchange_survives_loss_dup_reorder(tmp_path: Path) -> None:
    faults = FaultConfig(loss=0.2, dup=0.05, reorder=0.05, seed=7)  # one seed per node
    per_node = 2500  # 4 nodes x 2500 = 10,000 messages, 0 B .. 64 KiB
    with NicCluster(4, tmp_path, faults=faults) as cluster:
        results = run_hosts(HOSTS / "exchange.py", cluster.sockets, [str(per_node), "11"], 400)
        stats = [cluster.stats(n) for n in range(4)]
    for result in results:
        assert result["errors"] == [], result
        assert result["received"] == result["expected"] > 0
    assert sum(r["received"] for r in results) == 4 * per_node
    for s in stats:
        assert s["faults"]["dropped"] > 0
        assert s["faults"]["duplicated"] > 0
        assert s["transport"]["retransmissions"] > 0


@pytest.mark.parametrize("recovery", ["selective", "gbn"])
def test_exchange_at_30_percent_loss_is_exactly_once_with_either_recovery(
    tmp_path: Path, recovery: str
) -> None:
    faults = FaultConfig(loss=0.3, dup=0.05, reorder=0.1, seed=3)
    per_node = 150  # 3 nodes x 150 messages, 0 B .. 64 KiB, all pairs
    with NicCluster(3, tmp_path, ["--recovery", recovery], faults=faults) as cluster:
        results = run_hosts(HOSTS / "exchange.py", cluster.sockets, [str(per_node), "5"], 600)
        stats = [cluster.stats(n) for n in range(3)]
    for result in results:
        assert result["errors"] == [], result
        assert result["received"] == result["expected"] > 0
    assert sum(r["received"] for r in results) == 3 * per_node
    held = sum(s["transport"]["recovery"].get("held", 0) for s in stats)
    assert (held > 0) == (recovery == "selective")
    for s in stats:
        assert s["faults"]["dropped"] > 0
        assert s["link"]["peers_dead"] == []


def test_stats_file_written_on_sigterm(tmp_path: Path) -> None:
    cluster = NicCluster(2, tmp_path)
    with cluster, Port.open(cluster.sockets[0]) as a, Port.open(cluster.sockets[1]) as b:
        a.send(1, b.port_id, b"ping")
        assert b.recv(timeout=30).payload == b"ping"
        a.flush(timeout=30)
    assert cluster.stop() == [0, 0]
    for node in range(2):
        saved = json.loads(cluster.stats_path(node).read_text())
        assert saved["node"] == node
        assert saved["link"]["datagrams_out"] > 0
        assert not os.path.exists(cluster.sockets[node])


def test_killed_peer_fails_its_sends_while_others_continue(tmp_path: Path) -> None:
    with NicCluster(3, tmp_path, ["--dead-peer-s", "1.5"]) as cluster:
        a = Port.open(cluster.sockets[0], 0)
        b = Port.open(cluster.sockets[1], 0)
        c = Port.open(cluster.sockets[2], 0)
        a.send(2, 0, b"before")
        assert c.recv(timeout=30).payload == b"before"
        a.flush(timeout=30)
        cluster.kill(2)
        started = time.monotonic()
        a.send(2, 0, b"into the void")
        with pytest.raises(SendFailedError) as failure:
            a.flush(timeout=60)
        assert failure.value.dst_node == 2
        assert failure.value.reason == "peer_dead"
        assert time.monotonic() - started < 30  # generous: the limit is 1.5 s plus backoff
        for i in range(50):
            a.send(1, 0, f"still here {i}".encode())
        got = [b.recv(timeout=30).payload for _ in range(50)]
        assert got == [f"still here {i}".encode() for i in range(50)]
        a.flush(timeout=30)
        a.send(2, 0, b"again")
        with pytest.raises(SendFailedError, match="peer_dead"):
            a.flush(timeout=30)
        for port in (a, b):
            port.close()
        c.close()


def test_messages_wait_for_a_port_that_opens_after_the_dead_peer_limit(tmp_path: Path) -> None:
    # A rank whose host starts late (a loaded machine) must not fail the early senders: a port
    # never opened answers "not ready" and the stream resumes when it opens; a port that was
    # open and closed answers NO_PORT, which fails the sends once it lasts.
    with NicCluster(2, tmp_path, ["--dead-peer-s", "0.5"]) as cluster:
        a = Port.open(cluster.sockets[0])
        a.send(1, 5, b"early")
        time.sleep(1.5)  # three dead-peer limits pass before the port opens
        b = Port.open(cluster.sockets[1], 5)
        event = b.recv(timeout=30)
        assert (event.src_node, event.payload) == (0, b"early")
        a.flush(timeout=30)
        assert cluster.stats(1)["gm"]["refused_not_open"] >= 1
        b.close()
        a.send(1, 5, b"late")
        with pytest.raises(SendFailedError, match="no_port"):
            a.flush(timeout=60)
        a.close()


def test_garbage_datagrams_never_stop_nicd(tmp_path: Path) -> None:
    rogue = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rogue.bind(("127.0.0.1", 0))
    outsider = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    outsider.bind(("127.0.0.1", 0))
    cluster = NicCluster(2, tmp_path)
    try:
        # The rogue socket is in the routing table as node 9, so its bytes reach the decoder.
        cluster.start(extra_routes={9: rogue.getsockname()})
        rng = random.Random(3)
        target = cluster.udp[0]
        for _ in range(3000):
            junk = rng.randbytes(rng.choice([0, 1, 5, 20, 60, 200, 4200]))
            rogue.sendto(junk, target)
            outsider.sendto(junk, target)
        with Port.open(cluster.sockets[0]) as a, Port.open(cluster.sockets[1]) as b:
            for i in range(20):
                b.send(0, a.port_id, bytes([i]) * 100)
            assert [a.recv(timeout=30).payload for _ in range(20)] == [
                bytes([i]) * 100 for i in range(20)
            ]
        link = cluster.stats(0)["link"]
        assert link["drops"]["unknown_source"] >= 3000
        assert link["drops_total"] >= 6000 - 5  # a random 0x0636 frame with a valid CRC is unlikely
        assert cluster.procs[0].poll() is None
    finally:
        cluster.stop()
        rogue.close()
        outsider.close()


def test_nicd_help_and_bad_flags() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "nicd", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0
    for flag in ("--loss", "--mtu", "--routes", "--stats", "--fault-seed", "--dead-peer-s"):
        assert flag in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "nicd", "--node-id", "0", "--run-dir", "/tmp", "--loss", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert "probability" in bad.stderr


def test_remote_memory_write_lands_in_registered_shared_memory(tmp_path: Path) -> None:
    with NicCluster(2, tmp_path, ["--dead-peer-s", "1"]) as cluster:
        a = Port.open(cluster.sockets[0])
        b = Port.open(cluster.sockets[1], receive_buffers=0, auto_replenish=False)
        region = b.register_memory(100_000)
        data = bytes(range(256)) * 300  # 76,800 B: 19 fragments
        a.rm_write(1, b.port_id, region.id, 100, data, notify=(5, 6))
        event = b.wait(timeout=30)
        assert event == RmWriteEvent(
            0, a.port_id, region.id, 100, len(data), (region.id, 100, 5, 6)
        )
        assert bytes(region.buf[100 : 100 + len(data)]) == data
        a.flush(timeout=30)
        a.rm_write(1, b.port_id, region.id, 99_999, b"zz")  # past the end: refused
        with pytest.raises(SendFailedError, match="no_port"):
            a.flush(timeout=60)
        assert not os.path.exists(f"/dev/shm/{region.name}")  # a memfd: nothing named
        b.close()
        a.close()


def test_registered_memory_cannot_shrink_under_the_nic(tmp_path: Path) -> None:
    """Audit finding 5: a segment truncated after registration used to SIGBUS nicd on the next
    remote write. The region is a sealed memfd now: truncating it fails, writes still land,
    and a descriptor without seals (or none at all) is refused at registration."""
    with NicCluster(2, tmp_path) as cluster:
        a = Port.open(cluster.sockets[0])
        b = Port.open(cluster.sockets[1], receive_buffers=0, auto_replenish=False)
        region = b.register_memory(8192)
        with pytest.raises(PermissionError):
            os.ftruncate(region.segment.fd, 0)
        a.rm_write(1, b.port_id, region.id, 8000, b"still here")
        assert isinstance(b.wait(timeout=30), RmWriteEvent)
        assert bytes(region.buf[8000:8010]) == b"still here"
        unsealed = os.memfd_create("unsealed", os.MFD_CLOEXEC)
        os.ftruncate(unsealed, 8192)
        b.send_record(hl.RegisterReq(77, 8192, "unsealed"), fd=unsealed)
        os.close(unsealed)
        with pytest.raises(PortError, match="cannot map"):
            b.wait(timeout=30)
        b.send_record(hl.RegisterReq(78, 8192, "no-descriptor"))
        with pytest.raises(PortError, match="cannot map"):
            b.wait(timeout=30)
        a.rm_write(1, b.port_id, region.id, 0, b"nicd alive")
        assert isinstance(b.wait(timeout=30), RmWriteEvent)
        assert cluster.stats(1)["node"] == 1
        b.close()
        a.close()
