"""``emubench soak``: a bounded chaos run that checks every message of all-pairs traffic.

N real nicds on loopback (started as emurun starts them, `emubench.localcluster`), each
dropping, duplicating, reordering and corrupting its datagrams by its seeded fault plan, and
one host per node (`emubench.soak_host`) sending to every other node at once. While they run,
the soak stops random hosts (SIGSTOP for up to a few seconds, then SIGCONT) and, part way in,
kills one nicd with SIGKILL. Then every host drains: each says what its NIC completed (SENT or
ERROR), each receiver is told what the live senders got SENT for and checks that it has exactly
that, each message once, in order, intact, nothing left outstanding and nothing extra.

The verdict, per (sender, receiver) pair:

* both nodes alive: every message delivered exactly once, in order; an ERROR is a violation
  (no node but the killed one may be declared dead);
* to or from the killed node: each send ended (SENT or ERROR, nothing outstanding), and what
  did arrive arrived once, in order, intact (a SENT message may die with the receiving NIC);
* a SENT message that never arrived at a live receiver is a **silent loss**.

Prints one JSON document (messages, faults injected, stops, the kill, violations) and exits 1
on any violation. emurun is not used: it ends a job when one of its nicds dies, and the soak
must watch the survivors go on. `tests/integration/test_soak.py` runs a short version in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from emubench.localcluster import NicCluster
from nicd.config import FaultConfig

__all__ = ["SoakHostProc", "main", "run_soak", "verdict"]

LINE_WAIT_S = 240.0  # the longest the soak waits for one line of a host (drains included)


@dataclass
class SoakHostProc:
    """One host process and the JSON lines it printed, read by a thread."""

    node: int
    proc: subprocess.Popen[bytes]
    lines: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)

    def start_reader(self) -> None:
        def read(out: IO[bytes]) -> None:
            for raw in out:
                if raw.startswith(b"{"):
                    self.lines.put(json.loads(raw))

        assert self.proc.stdout is not None
        threading.Thread(target=read, args=(self.proc.stdout,), daemon=True).start()

    def next_line(self, timeout: float = LINE_WAIT_S) -> dict[str, Any]:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"host {self.node} said nothing for {timeout} s") from None

    def tell(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()


def _hosts(cluster: NicCluster, seconds: float) -> list[SoakHostProc]:
    env = {**os.environ, "EMU_WAIT": "block"}
    hosts = []
    for node in range(cluster.n):
        cmd = [
            sys.executable,
            "-m",
            "emubench.soak_host",
            str(node),
            str(cluster.n),
            cluster.sockets[node],
            str(seconds),
        ]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        host = SoakHostProc(node, proc)
        host.start_reader()
        hosts.append(host)
    return hosts


def _chaos(
    cluster: NicCluster,
    hosts: list[SoakHostProc],
    seconds: float,
    victim: int | None,
    rng: random.Random,
) -> dict[str, Any]:
    """Stop and resume random hosts until ``seconds`` pass; kill ``victim``'s nicd at 40 %."""
    start = time.monotonic()
    kill_at = start + 0.4 * seconds if victim is not None else None
    stops: list[dict[str, Any]] = []
    killed: dict[str, Any] | None = None
    while time.monotonic() < start + seconds - 1.0:
        if kill_at is not None and killed is None and time.monotonic() >= kill_at:
            cluster.kill(victim)  # type: ignore[arg-type]
            killed = {"node": victim, "at_s": round(time.monotonic() - start, 2)}
        live = [h for h in hosts if h.node != victim]
        host = rng.choice(live)
        hold = rng.uniform(0.2, 3.0)
        time.sleep(rng.uniform(0.5, 2.0))
        host.proc.send_signal(signal.SIGSTOP)
        time.sleep(min(hold, max(0.0, start + seconds - time.monotonic())))
        host.proc.send_signal(signal.SIGCONT)
        stops.append({"node": host.node, "held_s": round(hold, 2)})
    if kill_at is not None and killed is None:  # a run too short for its own schedule
        cluster.kill(victim)  # type: ignore[arg-type]
        killed = {"node": victim, "at_s": round(time.monotonic() - start, 2)}
    return {"stops": stops, "killed": killed}


def verdict(books: dict[int, dict[str, Any]], victim: int | None) -> dict[str, Any]:
    """Judge the hosts' last books (see the module docstring); pure, for the unit test."""
    violations: list[str] = []
    silent: list[str] = []
    for node, b in books.items():
        violations += [f"host {node}: {v}" for v in b["violations"]]
        if b["outstanding"] and not (node == victim and b["phase"] == "lost_nic"):
            violations.append(f"host {node}: {b['outstanding']} sends never completed")
    for src, sb in books.items():
        for dst_s, sent in sb["sent"].items():
            dst = int(dst_s)
            failed = sb["failed"].get(dst_s, [])
            if victim in (src, dst):
                continue  # judged by the receiver's own order checks and `outstanding` above
            if failed:
                violations.append(
                    f"{src}->{dst}: {len(failed)} sends failed between live nodes ({failed[0][1]})"
                )
            got = books[dst]["received"][str(src)]
            if got < sent:
                silent.append(f"{src}->{dst}: {sent} SENT, {got} delivered")
            elif got > sent:
                violations.append(f"{src}->{dst}: {got} delivered, only {sent} SENT")
    if victim is not None:
        for src, sb in books.items():
            if src != victim and not sb["failed"].get(str(victim)):
                violations.append(f"{src}->{victim}: no send to the killed node failed")
    reasons: dict[str, int] = {}
    for b in books.values():
        for failures in b["failed"].values():
            for _, reason in failures:
                reasons[reason] = reasons.get(reason, 0) + 1
    sent_total = sum(sum(b["sent"].values()) for b in books.values())
    failed_total = sum(len(f) for b in books.values() for f in b["failed"].values())
    return {
        "messages_sent": sent_total,
        "messages_failed": failed_total,
        "failures_by_reason": reasons,
        "messages_delivered": sum(sum(b["received"].values()) for b in books.values()),
        "silent_losses": silent,
        "violations": violations + silent,
    }


def run_soak(
    nodes: int, seconds: float, faults: FaultConfig, kill: bool, seed: int, nicd_args: list[str]
) -> dict[str, Any]:
    """One soak; returns its report (``violations`` empty when it passed)."""
    rng = random.Random(seed)
    victim = nodes - 1 if kill else None
    with tempfile.TemporaryDirectory(prefix="soak-", dir="/tmp") as tmp:
        cluster = NicCluster(nodes, Path(tmp), nicd_args, faults=faults)
        hosts: list[SoakHostProc] = []
        try:
            cluster.start()
            hosts = _hosts(cluster, seconds)
            for h in hosts:
                h.next_line(60.0)  # ready
            chaos = _chaos(cluster, hosts, seconds, victim, rng)
            books: dict[int, dict[str, Any]] = {}
            for h in hosts:
                books[h.node] = h.next_line()
            live = [h for h in hosts if h.node != victim]
            for h in live:
                expect = {
                    str(s): books[s]["sent"][str(h.node)]
                    for s in books
                    if s not in (h.node, victim) and not books[s]["failed"].get(str(h.node))
                }
                h.tell({"expect": expect})
            for h in live:
                books[h.node] = h.next_line()
            codes = {h.node: h.proc.wait(timeout=60) for h in hosts}
            stats = [cluster.stats(n) for n in range(nodes) if n != victim]
        finally:
            for h in hosts:
                if h.proc.poll() is None:
                    h.proc.send_signal(signal.SIGCONT)
                    h.proc.kill()
                    h.proc.wait()
            nicd_codes = cluster.stop()
        left = sorted(
            p.name
            for p in Path(tmp).iterdir()
            if p.suffix != ".json" and p.name != f"nic{victim}.sock"
        )
    report = verdict(books, victim)
    for node, code in codes.items():
        want = 3 if node == victim else 0
        if code != want:
            report["violations"].append(f"host {node} exited {code}, not {want}")
    for node, code in enumerate(nicd_codes):
        if node != victim and code != 0:
            report["violations"].append(f"nicd {node} exited {code} at the end")
    if left:
        report["violations"].append(f"left in the run directory: {left}")
    injected: dict[str, int] = {}
    for s in stats:
        for k, v in s["faults"].items():
            injected[k] = injected.get(k, 0) + v
    report.update(
        nodes=nodes,
        seconds=seconds,
        seed=seed,
        faults=faults.flags(),
        injected=injected,
        host_stops=len(chaos["stops"]),
        stopped_s=round(sum(s["held_s"] for s in chaos["stops"]), 1),
        killed=chaos["killed"],
        crc_drops=sum(s["link"].get("drops", {}).get("crc", 0) for s in stats),
    )
    return report


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="emubench soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--nodes", type=int, default=5)
    p.add_argument("--seconds", type=float, default=120.0, help="traffic time (120)")
    p.add_argument("--loss", type=float, default=0.05)
    p.add_argument("--dup", type=float, default=0.02)
    p.add_argument("--reorder", type=float, default=0.02)
    p.add_argument("--corrupt", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1, help="faults and chaos schedule (1)")
    p.add_argument("--no-kill", action="store_true", help="kill no nicd")
    p.add_argument("--nicd-args", default="", help="extra nicd flags, one string")
    p.add_argument("--json", type=Path, help="also write the report here")
    return p


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)  # the cleanup in run_soak's finally still runs
    faults = FaultConfig(
        loss=args.loss, dup=args.dup, reorder=args.reorder, corrupt=args.corrupt, seed=args.seed
    )
    report = run_soak(
        args.nodes, args.seconds, faults, not args.no_kill, args.seed, args.nicd_args.split()
    )
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
