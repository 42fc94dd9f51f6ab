"""Real nicd processes: an application-bypass message raises a real SIGUSR1 in the receiving
host process, only when enabled, at most one pending; other traffic never does."""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING

import pytest

from emubench.localcluster import NicCluster
from emucluster.port.client import Port, RecvEvent
from nicd.link.wire import MsgType

if TYPE_CHECKING:
    from pathlib import Path
    from types import FrameType

pytestmark = pytest.mark.slow
WAIT_S = 30.0


def test_signal_line_end_to_end(tmp_path: Path) -> None:
    got: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        with (
            NicCluster(2, tmp_path) as cluster,
            Port.open(cluster.sockets[0]) as a,
            Port.open(cluster.sockets[1]) as b,
        ):

            def take(n: int) -> list[RecvEvent]:
                return [b.recv(timeout=WAIT_S) for _ in range(n)]

            # Disabled (the default): an AB message arrives without a signal.
            a.send_collective(1, b.port_id, b"early", flags=1, args=(1, 2, 3, 4))
            [early] = take(1)
            assert (early.msg_type, early.am_handler, early.args) == (MsgType.AB_COLL, 1,
                                                                      (1, 2, 3, 4))  # fmt: skip
            # Enabled with the early one seen: plain traffic never signals ...
            b.enable_signals(seen=1)
            a.send(1, b.port_id, b"plain")
            take(1)
            assert got == []
            # ... an AB message does, once, however many follow before the acknowledgement.
            for i in range(3):
                a.send_collective(1, b.port_id, bytes([i]))
            take(3)
            deadline = time.monotonic() + WAIT_S
            while not got and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(0.05)
            assert got == [signal.SIGUSR1]
            # Acknowledging having seen only 2 of the 4: the NIC signals again at once.
            b.enable_signals(seen=2)
            while len(got) < 2 and time.monotonic() < deadline:
                b.poll()
                time.sleep(0.001)
            assert len(got) == 2
            b.disable_signals()
            a.send_collective(1, b.port_id, b"off")
            take(1)
            time.sleep(0.05)
            assert len(got) == 2
    finally:
        signal.signal(signal.SIGUSR1, old)
