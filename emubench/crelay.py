"""The physical floor: `emubench.nicd_port`'s three-hop relay compiled from C (``crelay.c``).

The Python relay is the floor a Python NIC could reach; this one is how far the machine itself
is: the same hops (Unix SEQPACKET, UDP on loopback, Unix SEQPACKET), the same fragments and
blocking sockets, with no interpreter. It is compiled by the system compiler (``CC`` or
``cc``) when a benchmark asks for it; without a compiler `measure` returns the reason instead,
and the benchmark reports the floor as skipped. Relays run where emurun puts the nicds (at
SCHED_FIFO where permitted, as nicd), hosts where it puts the hosts (`launcher.plan.place`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
from importlib import resources
from typing import TYPE_CHECKING, Any

from launcher.tuning import NICD_RT_PRIORITY

if TYPE_CHECKING:
    from collections.abc import Sequence

    from launcher.plan import Placement

__all__ = ["build", "measure"]

_TIMEOUT_S = 120.0


def build(work_dir: str) -> tuple[str | None, str]:
    """Compile the relay into ``work_dir``: (its path, the compiler's name and version), or
    (None, why not)."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None, f"no C compiler ({os.environ.get('CC', 'cc')} not found)"
    source = resources.files("emubench").joinpath("crelay.c")
    binary = os.path.join(work_dir, "crelay")
    with resources.as_file(source) as path:
        done = subprocess.run(
            [compiler, "-O2", "-o", binary, str(path)],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    if done.returncode != 0:
        return None, f"{compiler} failed: {done.stderr.strip()[:300]}"
    version = subprocess.run(
        [compiler, "--version"], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
    ).stdout.partition("\n")[0]
    return binary, version or compiler


def _pinned(cpus: frozenset[int] | None, realtime: bool) -> Any:
    """A preexec function: the process starts where (and at the priority) it belongs."""

    def setup() -> None:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)
        if realtime:
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(NICD_RT_PRIORITY))

    return setup


def _one_size(binary: str, run_dir: str, size: int, iters: int,
              placement: Sequence[Placement]) -> list[float]:  # fmt: skip
    """The one-way samples (us) of ``iters`` round trips of ``size`` bytes."""
    paths = [os.path.join(run_dir, f"crelay{i}-{size}.sock") for i in range(2)]
    relays = [
        subprocess.Popen(
            [binary, "relay", paths[i]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=_pinned(placement[i].nicd_cpus, realtime=True),
        )
        for i in range(2)
    ]
    hosts: list[subprocess.Popen[str]] = []
    try:
        ports = [int(r.stdout.readline()) for r in relays if r.stdout is not None]
        for relay, peer in zip(relays, reversed(ports), strict=True):
            assert relay.stdin is not None
            assert relay.stdout is not None
            relay.stdin.write(f"{peer}\n")
            relay.stdin.flush()
            if relay.stdout.readline().strip() != "ready":
                raise RuntimeError("the C relay did not start")
        for i, mode in ((1, "echo"), (0, "ping")):
            argv = [binary, "host", paths[i], str(iters), str(size), mode]
            setup = _pinned(placement[i].host_cpus, realtime=False)
            hosts.append(
                subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, preexec_fn=setup)
            )
        out, _ = hosts[1].communicate(timeout=_TIMEOUT_S)
        hosts[0].wait(_TIMEOUT_S)
        return [float(line) for line in out.split()]
    finally:
        for proc in (*hosts, *relays):
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait(_TIMEOUT_S)


def measure(sizes: Sequence[int], iters: int, placement: Sequence[Placement],
            run_dir: str) -> dict[str, Any]:  # fmt: skip
    """Per size, the C relay's one-way median and mean (us) and its samples; ``skipped`` with
    the reason when it cannot be built."""
    binary, compiler = build(run_dir)
    if binary is None:
        return {"skipped": compiler}
    out: dict[str, Any] = {"compiler": compiler, "latency_us": {}, "mean_us": {}, "samples_us": {}}
    for size in sizes:
        n = iters if size <= 4096 else max(50, iters // 10)
        samples = _one_size(binary, run_dir, size, n, placement)
        out["samples_us"][str(size)] = samples
        out["latency_us"][str(size)] = statistics.median(samples)
        out["mean_us"][str(size)] = statistics.fmean(samples)
    return out
