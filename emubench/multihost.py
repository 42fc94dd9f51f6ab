"""Several emulated hosts against one process tree: ``emubench multihost [--quick]``.

Runs ``emubench.mpi_micro`` (8-byte ping-pong between ranks 0 and 1, 8-byte Bcast on every
rank) twice in one run: 6 local nodes under plain ``emurun -np 6``, and 3 network namespaces
x 2 slots (:mod:`emubench.netns`, agents started through ``--launcher exec``, ``--map-by
node`` so that ranks 0 and 1 sit on different hosts and the ping-pong crosses the bridge),
and prints the two side by side (JSON with ``--out``).

On one machine this measures what the agent, veth and bridge path costs, not what separate
cores buy: every namespace shares the same CPUs. With one machine (or container with its own
CPUs) per emulated host, a user should expect the cross-host ping-pong to add the real
network's latency, and CPU-bound figures (busy hosts, collectives with skew) to improve,
because each node's host and nicd then get cores of their own. Needs root (network
namespaces); says why and exits 2 otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from emubench.common import (
    command_line,
    emurun_command,
    environment,
    load_average,
    pyplot,
    read_json,
    write_json,
)
from emubench.common import print_table as rich_table
from emubench.netns import Fabric, unavailable

__all__ = ["main"]

NODES = 6
HOSTS = 3
NOTE = (
    "One machine: every namespace shares the same CPUs, so this is the cost of the agent, veth "
    "and bridge path, not what separate cores buy. With a machine (or a container with its own "
    "CPUs) per emulated host, expect the cross-host ping-pong to add the real network's "
    "latency per hop, and CPU-bound figures (busy hosts, collectives under skew) to improve."
)


def _micro(out: Path, args: argparse.Namespace) -> list[str]:
    return [sys.executable, "-m", "emubench.mpi_micro", "--out", str(out), "--sizes", "8",
            "--iters", str(args.iters), "--coll-iters", str(args.coll_iters)]  # fmt: skip


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env},
                          timeout=timeout, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited {proc.returncode}:\n{proc.stderr}")


def _figures(doc: dict[str, Any], started: float) -> dict[str, Any]:
    pingpong, bcast = doc.get("pingpong", {}), doc["collectives"]["bcast"]
    return {
        "pingpong_8B_one_way_us": pingpong.get("uppercase_us", [float("nan")])[0],
        "pingpong_8B_lowercase_one_way_us": pingpong.get("lowercase_us", [float("nan")])[0],
        "bcast_8B_mean_us": bcast["mean_us"],
        "bcast_8B_slowest_rank_us": bcast["max_us"],
        "wall_s": time.monotonic() - started,
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Both configurations, one after the other; the whole record."""
    load_before = load_average()
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="emumh-bench-", dir="/tmp") as tmp:
        out = Path(tmp) / "local.json"
        started = time.monotonic()
        _run(emurun_command(NODES, _micro(out, args)), {}, args.timeout)
        runs["local 6 nodes"] = _figures(read_json(out), started)
        fabric = Fabric(HOSTS)
        try:
            out = Path(tmp) / "netns.json"
            hosts = ",".join(f"{h}:{NODES // HOSTS}" for h in fabric.hosts)
            emurun = [sys.executable, "-m", "launcher.cli", "-np", str(NODES), "-q",
                      "--host", hosts, "--map-by", "node", "--launcher", "exec",
                      "--launcher-exec", fabric.launcher_exec(),
                      "--agent-cmd", f"{sys.executable} -m launcher.agent",
                      "--listen", f"{fabric.head_addr}:0",
                      "--timeout", f"{args.timeout:g}"]  # fmt: skip
            started = time.monotonic()
            _run(fabric.in_head([*emurun, *_micro(out, args)]), fabric.env(), args.timeout)
            runs[f"{HOSTS} namespaces x {NODES // HOSTS}"] = _figures(read_json(out), started)
        finally:
            fabric.close()
    return {
        "benchmark": "emubench.multihost",
        "parameters": {k: v for k, v in vars(args).items() if k != "argv"},
        "command": command_line("multihost", args.argv),
        "environment": environment(load_before),
        "note": NOTE,
        "runs": runs,
    }


def print_table(record: dict[str, Any]) -> None:
    """The two configurations side by side."""
    rows = [
        (name, f"{r['pingpong_8B_one_way_us']:.1f}", f"{r['bcast_8B_mean_us']:.1f}",
         f"{r['bcast_8B_slowest_rank_us']:.1f}")
        for name, r in record["runs"].items()
    ]  # fmt: skip
    columns = ("configuration", "ping-pong 8 B one-way us", "bcast 8 B mean us", "slowest us")
    rich_table("6 nodes: namespaces vs one process tree", columns, rows)


def plot(record: dict[str, Any], path: str) -> None:
    """Two bar groups, 8-byte ping-pong one-way and 8-byte Bcast: each configuration's bar."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    figures = {"pingpong_8B_one_way_us": "ping-pong 8 B, one way (ranks 0-1 on two hosts)",
               "bcast_8B_mean_us": "Bcast 8 B, mean over ranks"}  # fmt: skip
    width = 0.38
    for j, (name, run) in enumerate(record["runs"].items()):
        xs = [i + (j - 0.5) * width for i in range(len(figures))]
        bars = ax.bar(xs, [run[key] for key in figures], width, color=f"C{j}", label=name)
        ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ax.set_xticks(range(len(figures)), list(figures.values()), fontsize=8)
    ax.set_ylabel("latency (us)")
    env = record["environment"]
    ax.set_title(f"{NODES} nodes: {HOSTS} network namespaces vs one process tree "
                 f"({env['cpus']} CPUs)", fontsize=10)  # fmt: skip
    ax.legend(fontsize=8)
    fig.text(0.01, 0.01, NOTE, fontsize=6, wrap=True, va="bottom")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """``emubench multihost [--quick] [--out FILE] [--png FILE]``."""
    p = argparse.ArgumentParser(prog="emubench multihost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--quick", action="store_true", help="few iterations (checks it works)")
    p.add_argument("--iters", type=int, default=500, help="ping-pong round trips per block")
    p.add_argument("--coll-iters", type=int, default=300, help="bcast iterations")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per configuration")
    p.add_argument("--out", "--json", type=Path, help="also write the record as JSON here")
    p.add_argument("--png", help="draw the figure here (needs matplotlib)")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.quick:
        args.iters, args.coll_iters = 50, 30
    why = unavailable()
    if why is not None:
        print(f"emubench multihost: cannot emulate hosts here: {why}", file=sys.stderr)
        return 2
    record = measure(args)
    print_table(record)
    if args.out is not None:
        record["parameters"]["out"] = str(args.out)
        write_json(args.out, record, indent=1)
    if args.png:
        plot(record, args.png)
    return 0
