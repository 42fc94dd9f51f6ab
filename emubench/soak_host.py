"""One host of `emubench soak`: all-pairs traffic on port 0, every message checked on arrival.

argv: node size socket seconds

It talks to the soak (its parent) in JSON lines: prints ``{"ready": pid}`` once its port is
open; sends one message to every peer per round for ``seconds`` (a peer whose send failed gets
nothing more), then waits until no send is outstanding and prints ``{"sent": ..., "failed":
...}``: per destination, the sends its NIC completed (SENT) and the indexes that failed (ERROR,
with the reason). The soak answers with ``{"expect": {src: count}}``, the messages the live
senders got SENT for; the host receives until it has them all (or a generous time passes),
listens a little longer for anything extra, and prints its last line: counts and the first
violations (a duplicate, a gap, a corrupted or misdelivered message, a send left outstanding).
A host whose NIC goes away (the soak killed its nicd) prints ``{"lost_nic": ...}`` with what it
saw and exits 3. Every message carries (src, dst, index) and a payload derived from them.
"""

from __future__ import annotations

import faulthandler
import json
import os
import queue
import random
import signal
import struct
import sys
import threading
import time
from collections import Counter
from typing import Any

from emucluster.port.client import ErrorEvent, Port, PortError, RecvEvent, SentEvent

__all__ = ["HEADER", "main", "payload"]

HEADER = struct.Struct(">HHI")  # src, dst, index
PORT = 0
MAX_SIZE_LOG2 = 14  # messages of 8 B .. 16 KiB: several fragments at the top end
DRAIN_S = 180.0  # the longest a host waits for its sends or its expected messages
EXTRA_S = 1.0  # how long it listens for messages beyond the expected ones
EXIT_LOST_NIC = 3


def payload(src: int, dst: int, index: int) -> bytes:
    """The message ``index`` from ``src`` to ``dst``, the same at both ends."""
    rng = random.Random(f"{src}:{dst}:{index}")
    size = max(HEADER.size, int(2 ** rng.uniform(0, MAX_SIZE_LOG2)))
    return HEADER.pack(src, dst, index) + rng.randbytes(size - HEADER.size)


class SoakHost:
    """The sender's and the receiver's books of one host."""

    def __init__(self, node: int, size: int) -> None:
        self.node = node
        self.peers = [p for p in range(size) if p != node]
        self.next_send = dict.fromkeys(self.peers, 0)
        self.next_recv = dict.fromkeys(self.peers, 0)
        self.inflight: dict[int, tuple[int, int]] = {}  # handle -> (dst, index)
        self.sent_ok: Counter[int] = Counter()
        self.failed: dict[int, list[tuple[int, str]]] = {}
        self.violations: list[str] = []
        self.extra = 0

    def send_round(self, port: Port, deadline: float) -> None:
        for dst in self.peers:
            if dst in self.failed:
                continue
            index = self.next_send[dst]
            handle = port.send(dst, PORT, payload(self.node, dst, index), timeout=DRAIN_S)
            self.inflight[handle] = (dst, index)
            self.next_send[dst] = index + 1
            if time.monotonic() > deadline:
                return

    def take(self, event: object) -> None:
        if isinstance(event, SentEvent):
            dst, _ = self.inflight.pop(event.handle)
            self.sent_ok[dst] += 1
        elif isinstance(event, ErrorEvent):
            dst, index = self.inflight.pop(event.handle)
            self.failed.setdefault(dst, []).append((index, event.reason))
        elif isinstance(event, RecvEvent):
            self._received(event)

    def _received(self, event: RecvEvent) -> None:
        if len(event.payload) < HEADER.size:
            self.violations.append(f"a {len(event.payload)}-byte message from {event.src_node}")
            return
        src, dst, index = HEADER.unpack_from(event.payload)
        want = self.next_recv.get(event.src_node)
        if src != event.src_node or dst != self.node or want is None:
            self.violations.append(f"misdelivered {src}->{dst} at {self.node}")
        elif index != want:
            kind = "duplicate" if index < want else "gap"
            self.violations.append(f"{kind}: from {src} got {index}, expected {want}")
        elif event.payload != payload(src, dst, index):
            self.violations.append(f"from {src}: message {index} corrupted")
        else:
            self.next_recv[src] = index + 1

    def books(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "sent": {str(d): self.sent_ok[d] for d in self.peers},
            "started": {str(d): n for d, n in self.next_send.items()},
            "failed": {str(d): f for d, f in self.failed.items()},
            "received": {str(s): n for s, n in self.next_recv.items()},
            "outstanding": len(self.inflight),
            "extra": self.extra,
            "violations": self.violations[:20],
        }


def _say(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


def _run(host: SoakHost, port: Port, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not host.violations:
        host.send_round(port, end)
        for event in port.poll():
            host.take(event)
    deadline = time.monotonic() + DRAIN_S
    while host.inflight and time.monotonic() < deadline:
        host.take(port.wait(timeout=max(0.0, deadline - time.monotonic())))
    if host.inflight:
        host.violations.append(f"{len(host.inflight)} sends left outstanding after {DRAIN_S} s")
    _say({"phase": "sent", **host.books()})
    answer: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: answer.put(sys.stdin.readline()), daemon=True).start()
    while answer.empty():  # receiving all the while: a host that stops reading stops its peers
        host.take(port.wait(timeout=0.1))
    expect = {int(s): n for s, n in json.loads(answer.get())["expect"].items()}
    deadline = time.monotonic() + DRAIN_S

    def short() -> bool:
        return any(host.next_recv[s] < n for s, n in expect.items())

    while short() and not host.violations and time.monotonic() < deadline:
        host.take(port.wait(timeout=max(0.0, deadline - time.monotonic())))
    for src, n in expect.items():
        if host.next_recv[src] < n:
            host.violations.append(f"from {src}: {host.next_recv[src]} of {n} SENT arrived")
    before = dict(host.next_recv)
    listen_end = time.monotonic() + EXTRA_S
    while time.monotonic() < listen_end:
        got = port.wait(timeout=max(0.0, listen_end - time.monotonic()))
        if isinstance(got, RecvEvent):
            host.extra += 1
        host.take(got)
    for src, n in expect.items():
        if host.next_recv[src] != before[src] or before[src] > n:
            host.violations.append(f"from {src}: more arrived than was SENT ({n})")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    node, size, socket_path, seconds = int(args[0]), int(args[1]), args[2], float(args[3])
    faulthandler.register(signal.SIGUSR2)  # the soak's stack dump of a host that hangs
    host = SoakHost(node, size)
    try:
        with Port.open(socket_path, PORT, receive_buffers=16) as port:
            _say({"ready": os.getpid()})
            _run(host, port, seconds)
    except PortError as exc:
        _say({"phase": "lost_nic", "lost_nic": str(exc), **host.books()})
        return EXIT_LOST_NIC
    _say({"phase": "done", **host.books()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
