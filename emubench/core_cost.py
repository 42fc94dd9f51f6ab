"""``emubench core``: the NIC core's own Python cost per message, without sockets or scheduler.

Two :class:`~nicd.core.nic.NicCore` s in this process exchange 8-byte GM sends the way two nicds
would, the shells' per-input work included (a host record through the codec, the datagram to
the peer core, ``flush`` after each datagram, ``next_deadline`` after each input, the records
to the host encoded). Nothing sleeps and nothing else runs, so the figures hardly move between
runs on a noisy machine: the regression figure for the fast path, beside ``emubench overhead``
(which measures the whole path, scheduler and caches included, and moves by 10 % from run to
run here). What a warm core costs is a floor of what a cold one costs there.

* ``pingpong``: one message at a time, alternating direction (the reply carries the ACK).
* ``stream``: ``--burst`` messages from node 0, then their datagrams and the ACKs.

Per mode: microseconds per message for both cores together (best of ``--repeats``), and the
Python function calls per message (``sys.setprofile``, exact: a change that adds a call on the
fast path shows up here whatever the machine's load).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from emubench.common import command_line, environment, load_average, print_table, write_json
from nicd import hostlink as hl
from nicd.config import NicConfig
from nicd.core.actions import NicAction, ToHost, Transmit
from nicd.core.nic import NicCore
from nicd.hostlink.codec import Assembler, encode_record

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["CorePair", "count_calls", "main", "measure"]

PORT = 2
PAYLOAD = b"12345678"
STEP_S = 100e-6
"""Virtual time between messages: below the delayed ACK, so ACKs ride on replies as they do."""


class CorePair:
    """Two NIC cores joined by a perfect virtual link, each with one open port."""

    def __init__(self) -> None:
        self.cores = [NicCore(NicConfig(i, "/tmp")) for i in range(2)]
        self.addrs = {0: ("127.0.0.1", 2000), 1: ("127.0.0.1", 2001)}
        for core in self.cores:
            core.set_routes(self.addrs)
        self.assemblers = [Assembler(), Assembler()]
        self.now = 0.0
        self.delivered = [0, 0]
        """Messages each host was handed (RECV records)."""
        self.wire: list[tuple[int, bytes]] = []
        for node in range(2):
            self.host(node, hl.OpenReq(PORT))
            self.host(node, hl.ProvideReq(1 << 30))

    def host(self, node: int, record: hl.HostRecord) -> None:
        """Host ``node`` writes ``record``: through the codec, as the shell reads it."""
        core, assembler = self.cores[node], self.assemblers[node]
        for part in encode_record(record):
            whole = assembler.feed(part)
            if whole is not None:
                self._apply(node, core.on_host(1, whole, now=self.now))
        core.next_deadline()

    def drain(self) -> None:
        """Deliver every datagram on the link (and those their arrival makes)."""
        wire = self.wire
        while wire:
            src, datagram = wire.pop(0)
            dst = 1 - src
            core = self.cores[dst]
            self._apply(dst, core.on_datagram(datagram, self.addrs[src], now=self.now))
            self._apply(dst, core.flush(now=self.now))
            core.next_deadline()

    def timers(self) -> None:
        """Fire what is due (the delayed ACKs of a stream's tail)."""
        for node, core in enumerate(self.cores):
            deadline = core.next_deadline()
            if deadline is not None and deadline <= self.now:
                self._apply(node, core.on_timer(now=self.now))

    def _apply(self, node: int, actions: Sequence[NicAction]) -> None:
        for action in actions:
            if type(action) is Transmit:
                self.wire.append((node, action.datagram))
            elif type(action) is ToHost:
                encode_record(action.record)  # the shell's write
                if type(action.record) is hl.RecvEvent:
                    self.delivered[node] += 1


def pingpong(pair: CorePair, count: int) -> None:
    """``count`` one-way messages, alternating direction."""
    for i in range(count):
        pair.now += STEP_S
        src = i & 1
        pair.host(src, hl.SendReq(i, 1 - src, PORT, PAYLOAD))
        pair.drain()
        if i % 64 == 63:
            pair.timers()


def stream(pair: CorePair, count: int, burst: int) -> None:
    """``count`` messages from node 0 in bursts of ``burst``."""
    sent = 0
    while sent < count:
        n = min(burst, count - sent)
        for i in range(n):
            pair.host(0, hl.SendReq(sent + i, 1, PORT, PAYLOAD))
        sent += n
        pair.drain()
        pair.now += 2e-3  # past the delayed ACK: the tail's ACK goes and completes the burst
        pair.timers()
        pair.drain()


def count_calls(run: Callable[[], None]) -> int:
    """Python and C function calls made by ``run()``."""
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" or event == "c_call":
            calls += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def measure(count: int, repeats: int, burst: int) -> dict[str, dict[str, float]]:
    """Both modes: microseconds per message (best of ``repeats``) and calls per message."""
    modes: dict[str, Callable[[CorePair, int], None]] = {
        "pingpong": pingpong,
        "stream": lambda pair, n: stream(pair, n, burst),
    }
    out: dict[str, dict[str, float]] = {}
    for name, mode in modes.items():
        pair = CorePair()
        mode(pair, 1000)  # warm: streams, estimators and caches exist
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            mode(pair, count)
            times.append((time.perf_counter() - started) / count * 1e6)
        calls = count_calls(lambda: mode(pair, 1000)) / 1000  # noqa: B023 - called at once
        expected = 2000 + repeats * count
        if sum(pair.delivered) != expected:  # every message reached its host, once
            raise RuntimeError(f"{name}: {sum(pair.delivered)} of {expected} messages delivered")
        out[name] = {"us_per_message": min(times), "calls_per_message": calls,
                     "us_spread": max(times) - min(times)}  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``emubench core``."""
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="emubench core", description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=20_000, help="messages per repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--burst", type=int, default=32, help="stream: messages per burst")
    p.add_argument("--out", help="write the JSON here")
    p.add_argument("--quick", action="store_true", help="a few hundred messages (tests)")
    args = p.parse_args(argv)
    if args.quick:
        args.count, args.repeats = 500, 2
    load = load_average()
    modes = measure(args.count, args.repeats, args.burst)
    record = {
        "command": command_line("core", argv),
        "environment": environment(
            load, wait_policy="none (one process)", nicd_priority="n/a", nodes=2
        ),
        "parameters": {"count": args.count, "repeats": args.repeats, "burst": args.burst},
        "modes": modes,
    }
    print_table("NIC core, warm, both cores, 8 B GM sends",
                ("mode", "us per message", "spread us", "calls per message"),
                [(name, f"{m['us_per_message']:.2f}", f"{m['us_spread']:.2f}",
                  f"{m['calls_per_message']:.1f}") for name, m in modes.items()])  # fmt: skip
    if args.out:
        write_json(args.out, record, indent=1)
    return 0
