"""``emubench containers``: N nodes as N containers (docker-compose.yml) vs N local nodes.

One run, side by side: the MPI micro-benchmark ranks (`emubench.mpi_micro`: 8-byte ping-pong
one-way between ranks 0 and 1, 8-byte ``Bcast`` mean over ranks) under ``emurun -np N`` on this
machine, then under ``docker compose up --scale node=N`` (one agent, nicd and host per
container, on the compose network's bridge). Run it from the project's directory (the one with
``docker-compose.yml``), as root, with a Docker engine up (``docker/dockerd-up.sh``); it builds
the image first (``docker/build-image.sh``) unless ``--no-build``.

On one machine the containers share its cores: the figure is what the container and bridge path
costs (veth + bridge + netfilter per datagram, cgroup accounting), not what real cores buy. With
one machine per node, each nicd and host would get CPUs of their own: expect the local column's
latency or better, plus the real network's one-way latency per hop.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emubench.common import (
    command_line,
    environment,
    job_result,
    load_average,
    print_table,
    pyplot,
    run_emurun,
    write_json,
)

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["compose_command", "main"]

MICRO = "emubench.mpi_micro"
SIDES = ("local", "containers")


def compose_command() -> list[str]:
    """``docker compose`` (the v2 plugin) if it answers, else ``docker-compose`` (v1)."""
    if shutil.which("docker"):
        probe = subprocess.run(
            ["docker", "compose", "version"], capture_output=True, timeout=60, check=False
        )
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise SystemExit("no `docker compose` nor `docker-compose` (apt-get install docker-compose)")


def _micro_args(args: argparse.Namespace, out: Path) -> list[str]:
    return ["--out", str(out), "--sizes", "8", "--iters", str(args.iters),
            "--blocks", str(args.blocks), "--coll-iters", str(args.coll_iters)]  # fmt: skip


def _local(args: argparse.Namespace, out: Path) -> subprocess.CompletedProcess[str]:
    return run_emurun(args.nodes, MICRO, _micro_args(args, out), capture=True, check=False,
                      emurun_args=["--nic-priority", args.nic_priority, "--bind-to", args.bind_to],
                      timeout_s=args.timeout, wall_timeout=args.timeout + 60)  # fmt: skip


def _containers(args: argparse.Namespace, out: Path) -> subprocess.CompletedProcess[str]:
    project = f"emubench{os.getpid()}"
    base = [*compose_command(), "-f", str(args.project_dir / "docker-compose.yml"), "-p", project]
    micro = " ".join(_micro_args(args, out))
    env = {
        **os.environ,
        "PWD": str(args.project_dir),
        "NODES": str(args.nodes),
        "NP": str(args.nodes),
        "APP": f"-m {MICRO} {micro}",
        "EMURUN_ARGS": f"-q --timeout {args.timeout:g} --nic-priority {args.nic_priority}",
        "EMU_BIND_TO": args.bind_to,
        "EMU_SUBNET": args.subnet,
    }
    up = [*base, "up", "--scale", f"node={args.nodes}", "--exit-code-from", "head", "--no-color"]
    try:
        return subprocess.run(up, env=env, cwd=args.project_dir, capture_output=True, text=True,
                              timeout=args.timeout + 120, check=False)  # fmt: skip
    finally:
        down = [*base, "down", "-v", "--remove-orphans", "-t", "5"]
        subprocess.run(down, env=env, cwd=args.project_dir, capture_output=True, timeout=300,
                       check=False)  # fmt: skip


def summarise(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Ping-pong one-way and Bcast mean of 8 bytes, each side, and containers / local."""
    summary: dict[str, Any] = {}
    figures: dict[str, Callable[[dict[str, Any]], float]] = {
        "pingpong_8B_one_way_us": lambda r: r["pingpong"]["uppercase_us"][0],
        "bcast_8B_mean_us": lambda r: r["collectives"]["bcast"]["mean_us"],
    }
    for name, pick in figures.items():
        local, boxed = pick(runs["local"]), pick(runs["containers"])
        summary[name] = {"local": local, "containers": boxed, "ratio": boxed / local}
    return summary


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Build the image, then both sides one after the other; returns the whole record."""
    load_before = load_average()
    if args.build:
        subprocess.run([str(args.project_dir / "docker" / "build-image.sh")], check=True)
    runs: dict[str, dict[str, Any]] = {}
    parameters = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    del parameters["argv"]
    # the output must be visible inside the containers: the project dir is mounted as itself
    with tempfile.TemporaryDirectory(prefix=".emubench-containers-", dir=args.project_dir) as tmp:
        for side in SIDES:
            out = Path(tmp) / f"{side}.json"
            print(f"{side}: {args.nodes} nodes ...", file=sys.stderr, flush=True)
            started = time.monotonic()
            proc = _local(args, out) if side == "local" else _containers(args, out)
            runs[side] = job_result(proc, out, started)
    return {
        "benchmark": "emubench.containers",
        "parameters": {
            k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "argv"
        },
        "command": command_line("containers", args.argv),
        "environment": environment(
            load_before, nicd_priority=args.nic_priority, bind_to=args.bind_to
        ),
        "note": "one machine: containers share its cores; this is the container and bridge "
        "path's cost, not what a machine per node buys",
        "runs": runs,
        "summary": summarise(runs),
    }


def print_tables(record: dict[str, Any]) -> None:
    rows = [(name, f"{row['local']:.0f}", f"{row['containers']:.0f}", f"{row['ratio']:.2f}")
            for name, row in record["summary"].items()]  # fmt: skip
    nodes = record["parameters"]["nodes"]
    print_table(f"{nodes} local nodes vs {nodes} containers (us)",
                ("figure", "local", "containers", "containers/local"), rows)  # fmt: skip


def plot(record: dict[str, Any], path: str) -> None:
    """Two bar pairs: 8-byte ping-pong one-way and 8-byte Bcast, local vs containers."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    labels = {"pingpong_8B_one_way_us": "ping-pong 8 B, one way",
              "bcast_8B_mean_us": "Bcast 8 B, mean over ranks"}  # fmt: skip
    nodes = record["parameters"]["nodes"]
    width = 0.38
    for i, row in enumerate(record["summary"].values()):
        for j, side in enumerate(SIDES):
            bar = ax.bar(i + (j - 0.5) * width, row[side], width, color=f"C{j}",
                         label=f"{nodes} {'local nodes' if side == 'local' else side}"
                         if i == 0 else None)  # fmt: skip
            ax.bar_label(bar, fmt="%.0f", fontsize=8)
    ax.set_xticks(range(len(labels)), [labels[name] for name in record["summary"]])
    ax.set_ylabel("latency (us)")
    env = record["environment"]
    ax.set_title(f"{nodes} containers vs {nodes} local nodes, one machine ({env['cpus']} CPUs)",
                 fontsize=10)  # fmt: skip
    ax.legend(fontsize=8)
    fig.text(0.01, 0.01, f"{record.get('note', '')}.", fontsize=6, wrap=True, va="bottom")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="emubench containers", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--nodes", type=int, default=8, help="nodes = containers (default 8)")
    p.add_argument("--iters", type=int, default=500, help="round trips per ping-pong block")
    p.add_argument("--blocks", type=int, default=5, help="ping-pong blocks (median taken)")
    p.add_argument("--coll-iters", type=int, default=200, help="Bcast iterations")
    p.add_argument("--quick", action="store_true", help="few iterations: a smoke run")
    p.add_argument("--nic-priority", choices=("rt", "nice", "none"), default="nice",
                   help="both sides (default nice: containers get no real-time budget unless "
                   "EMU_RT_RUNTIME is set, and then throttled; docs/guide/hosts.md)")  # fmt: skip
    p.add_argument("--bind-to", choices=("none", "core"), default="none",
                   help="both sides (default none: with core, every container's single node "
                   "is bound to CPU 0)")  # fmt: skip
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per job")
    p.add_argument("--project-dir", type=Path, default=Path.cwd(),
                   help="where docker-compose.yml is (default: the current directory)")  # fmt: skip
    p.add_argument("--subnet", default="198.18.250.0/24", help="the compose network (198.18/15)")
    p.add_argument("--no-build", dest="build", action="store_false", help="use the image as is")
    p.add_argument("--json", metavar="FILE", help="write the whole record here")
    p.add_argument("--png", metavar="FILE", help="draw the figure here (needs matplotlib)")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    args.project_dir = args.project_dir.resolve()
    if not (args.project_dir / "docker-compose.yml").exists():
        p.error(f"no docker-compose.yml in {args.project_dir} (see --project-dir)")
    if args.quick:
        args.iters, args.blocks, args.coll_iters = 50, 2, 20
    record = measure(args)
    print_tables(record)
    if args.json:
        write_json(args.json, record, indent=1)
    if args.png:
        plot(record, args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
