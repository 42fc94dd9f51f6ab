"""A restarted receiving nicd (peer reset, issue 30) with real nicd processes, at the GM-port
level (emurun ends a job when a nicd dies, so the ports are driven from here, as `emubench
soak` does): node 1's nicd is killed after it took a few messages of node 0's stream, node 0
sends three more, and node 1's nicd is started again with the same node id and UDP address.
Its new epochs tell node 0 it lost its state: each of the three sends ends in an ERROR naming
node 1 (``peer_reset``), never SENT and not retried for ever; new traffic then flows both
ways. Before stream epochs the restarted nicd NACKed a gap its peer no longer held and the
sends were retried for ever. Every wait has a generous timeout; nothing asserts a duration.
"""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from emubench.localcluster import NicCluster, _read_ready
from emucluster.port.client import ErrorEvent, Port, RecvEvent, SentEvent
from nicd.shell import manage

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow

PORT = 0
WAIT_S = 60.0
NICD_ARGS = ["--dead-peer-s", "120"]  # never declared dead meanwhile: the reset must tell


def outcome(port: Port, handle: int) -> SentEvent | ErrorEvent:
    """The SENT or ERROR of send ``handle`` (other events are dropped)."""
    while True:
        event = port.wait(timeout=WAIT_S)
        assert event is not None, f"no outcome for send {handle} within {WAIT_S} s"
        if isinstance(event, SentEvent | ErrorEvent) and event.handle == handle:
            return event


def received(port: Port) -> bytes:
    while True:
        event = port.wait(timeout=WAIT_S)
        assert event is not None, f"nothing received within {WAIT_S} s"
        if isinstance(event, RecvEvent):
            return event.payload


def test_a_restarted_receiving_nicd_fails_what_was_in_flight_and_new_traffic_flows(
    tmp_path: Path,
) -> None:
    cluster = NicCluster(2, tmp_path, NICD_ARGS)
    again: subprocess.Popen[bytes] | None = None
    try:
        cluster.start()
        sender = Port.open(cluster.sockets[0], PORT, receive_buffers=8)
        old = Port.open(cluster.sockets[1], PORT, receive_buffers=8)
        for i in range(3):
            assert isinstance(outcome(sender, sender.send(1, PORT, b"before %d" % i)), SentEvent)
            assert received(old) == b"before %d" % i
        cluster.kill(1)
        old.close()
        lost = [sender.send(1, PORT, b"in flight %d" % i) for i in range(3)]
        host, udp = cluster.udp[1]
        run_dir = tmp_path / "again"
        run_dir.mkdir()
        again = subprocess.Popen(
            [sys.executable, "-m", "nicd", "--node-id", "1", "--run-dir", str(run_dir),
             "--listen", f"{host}:{udp}", *NICD_ARGS],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        ready = _read_ready(again)
        assert ready.udp == (host, udp)
        manage.set_routes(ready.socket, cluster.udp, timeout=10)
        ends = [outcome(sender, handle) for handle in lost]
        assert [(type(e).__name__, e.dst_node, e.reason) for e in ends] == [  # type: ignore[union-attr]
            ("ErrorEvent", 1, "peer_reset")
        ] * 3
        new = Port.open(ready.socket, PORT, receive_buffers=8)
        assert isinstance(outcome(sender, sender.send(1, PORT, b"after")), SentEvent)
        assert received(new) == b"after"  # the first thing it gets: nothing of the old stream
        assert isinstance(outcome(new, new.send(0, PORT, b"hello again")), SentEvent)
        assert received(sender) == b"hello again"
        stats = manage.read_stats(ready.socket, timeout=10)
        assert stats["transport"]["nacks_sent"]["reset"] >= 1, stats["transport"]
        old_side = cluster.stats(0)["transport"]
        assert old_side["messages_failed"] == {"peer_reset": 3}, old_side
        new.close()
        sender.close()
    finally:
        if again is not None:
            again.terminate()
            assert again.wait(timeout=10) == 0
            assert again.stdout is not None
            again.stdout.close()
        cluster.stop()
