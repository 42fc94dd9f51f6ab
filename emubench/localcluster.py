"""Start N real nicd processes on loopback and exchange their routes, without the launcher.

For the nicd port benchmark (`emubench.nicd_port`) and integration tests; emurun does the same
for whole jobs. Fault injection is given as a :class:`~nicd.config.FaultConfig` and each nicd
gets its own seed, derived as emurun derives it (:func:`launcher.plan.fault_seed_for`), so the
nodes do not lose the same packets.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from launcher.plan import fault_seed_for
from nicd.core.ready import Ready, decode_ready_untrusted
from nicd.shell import manage

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from nicd.config import FaultConfig

__all__ = ["NicCluster", "run_hosts"]

READY_TIMEOUT_S = 30.0


class NicCluster:
    """N nicds with routes exchanged, as emurun's rendezvous does. ``args`` go to every nicd;
    ``faults`` too, with node ``i``'s seed ``fault_seed_for(faults.seed, i)`` (as emurun)."""

    def __init__(
        self,
        n: int,
        run_dir: Path,
        args: Sequence[str] = (),
        *,
        faults: FaultConfig | None = None,
    ) -> None:
        if "--fault-seed" in args:
            raise ValueError("give faults=FaultConfig(...): NicCluster derives per-node seeds")
        self.n = n
        self.run_dir = run_dir
        self.args = list(args)
        self.faults = faults
        self.procs: list[subprocess.Popen[bytes]] = []
        self.udp: dict[int, tuple[str, int]] = {}
        self.sockets: dict[int, str] = {}

    def __enter__(self) -> NicCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, extra_routes: dict[int, tuple[str, int]] | None = None) -> None:
        for node in range(self.n):
            cmd = [sys.executable, "-m", "nicd", "--node-id", str(node)]
            cmd += ["--run-dir", str(self.run_dir), "--stats", str(self.stats_path(node))]
            cmd += self.node_fault_flags(node)
            self.procs.append(
                subprocess.Popen(cmd + self.args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
            )
        for node, proc in enumerate(self.procs):
            ready = _read_ready(proc)
            if ready.node != node:
                raise RuntimeError(f"nicd started as node {node} announced node {ready.node}")
            self.udp[node] = ready.udp
            self.sockets[node] = ready.socket
        routes = {**self.udp, **(extra_routes or {})}
        for path in self.sockets.values():
            manage.set_routes(path, routes, timeout=10)

    def node_fault_flags(self, node: int) -> list[str]:
        """The fault flags of node ``node``'s nicd (none without ``faults``)."""
        if self.faults is None:
            return []
        return replace(self.faults, seed=fault_seed_for(self.faults.seed, node)).flags()

    def stats_path(self, node: int) -> Path:
        return self.run_dir / f"stats{node}.json"

    def stats(self, node: int) -> dict[str, Any]:
        return manage.read_stats(self.sockets[node], timeout=10)

    def kill(self, node: int) -> None:
        self.procs[node].send_signal(signal.SIGKILL)
        self.procs[node].wait(timeout=10)

    def stop(self) -> list[int]:
        codes = []
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout=10))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(proc.wait(timeout=10))
            if proc.stdout:
                proc.stdout.close()
        return codes


def _read_ready(proc: subprocess.Popen[bytes]) -> Ready:
    assert proc.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    line = b""
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("nicd did not say NICD_READY in time")
        ready, _, _ = select.select([proc.stdout], [], [], remaining)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(f"nicd exited before it was ready (code {proc.wait()})")
            line += chunk
    return decode_ready_untrusted(line)


def run_hosts(  # a test helper: each host program prints a JSON line
    script: Path, sockets: dict[int, str], args: Sequence[str], timeout: float
) -> list[dict[str, Any]]:
    """Run one host process per node; return each one's JSON result (its last stdout line)."""
    n = len(sockets)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(node), str(n), sockets[node], *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        for node in range(n)
    ]
    results = []
    deadline = time.monotonic() + timeout
    try:
        for node, proc in enumerate(procs):
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            assert proc.returncode == 0, f"host {node} exited {proc.returncode}:\n{err.decode()}"
            results.append(json.loads(out.decode().strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results
