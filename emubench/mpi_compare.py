"""``emubench mpi-compare``: emucluster's MPI against mpi4py on MPICH, one run.

For each node count (2, 4, 8, 16 by default) it starts `emubench.mpi_micro` under ``emurun -np
N`` and under ``mpiexec -n N`` (the reference a user would otherwise pick: ``pip install mpi4py
mpich``, shared memory, oversubscribing the cores as we do), ping-pong at 2 nodes only; between
the two, the floor of the emulated path for the same collectives (`emubench.relay_tree`: a
plain-Python relay of the same three hops per message, the same trees, ``2 N`` processes; for
the bcast from 3 nodes, where emucluster's default forwards on the NICs, the floor forwards on
the relays too). It prints the three columns and their ratios, checks the targets, and with
``--json``/``--png`` writes the raw results and a figure. ``--candidates`` also times every
small-message algorithm of emucluster interleaved in one job (``mpi_micro --candidates``: wall,
CPU and run delay per rank).

Targets: issue 17, 16-node 8-byte Bcast and Reduce within 10x of MPICH's 16-process figures
of the same run (the relay floor beside them says what the emulated path could reach);
issue 4, 8-byte uppercase ping-pong within 1.5x of the raw GM-port ping-pong of the same run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from emubench import relay_tree
from emubench.common import (
    command_line,
    compare_run,
    environment,
    load_average,
    print_table,
    pyplot,
    save_figure,
    write_json,
)
from emucluster.offload.nic_mcast.auto import NIC_MCAST_MIN_RANKS

__all__ = ["main"]

PORT_RATIO_TARGET = 1.5
MPICH_RATIO_TARGET = 10.0  # issue 17 (issue 4 asked for 5x)
MICRO = "emubench.mpi_micro"


def _micro_args(args: argparse.Namespace, nodes: int, out: Path) -> list[str]:
    words = ["-m", MICRO, "--out", str(out), "--iters", str(args.iters)]
    words += ["--coll-iters", str(args.coll_iters)]
    words += ["--candidates"] if args.candidates else []
    return words + ([] if nodes == 2 else ["--no-pingpong"])


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every node count under both implementations; returns the whole record."""
    load_before = load_average()
    runs: dict[str, dict[str, Any]] = {"emucluster": {}, "relay_floor": {}, "mpich": {}}
    env_note = {"EMU_WAIT": os.environ.get("EMU_WAIT", "hybrid")}
    with tempfile.TemporaryDirectory(prefix="mpibench-", dir="/tmp") as tmp:
        for nodes in args.nodes:
            for impl in ("emucluster", "relay_floor", "mpich"):
                if impl == "relay_floor":
                    print(f"relay floor on {nodes} nodes ...", file=sys.stderr, flush=True)
                    runs[impl][str(nodes)] = relay_tree.measure(
                        nodes, args.coll_iters, args.nic_priority, args.timeout
                    )
                    continue
                out = Path(tmp) / f"{impl}-{nodes}.json"
                runs[impl][str(nodes)] = compare_run(
                    impl,
                    nodes,
                    _micro_args(args, nodes, out),
                    out,
                    timeout=args.timeout,
                    emurun_args=["--nic-priority", args.nic_priority],
                )
    return {
        "benchmark": "emubench.mpi_compare",
        "parameters": {k: v for k, v in vars(args).items() if k != "argv"}
        | {"png": None, "json": None},
        "command": command_line("mpi-compare", args.argv),
        "environment": environment(
            load_before,
            nicd_priority=args.nic_priority,
            nic_priority=args.nic_priority,
            bind_to="core",
            **env_note,
        ),
        "runs": runs,
        "summary": summarise(runs),
    }


def _floor(runs: dict[str, dict[str, Any]], nodes: str, op: str) -> float:
    """The relay floor of the path emucluster's default ``op`` takes on ``nodes`` nodes (the
    NIC-forwarded bcast from `NIC_MCAST_MIN_RANKS`, the host trees otherwise)."""
    floors = runs["relay_floor"][nodes]["collectives"]
    if op == "bcast" and int(nodes) >= NIC_MCAST_MIN_RANKS:
        op = "bcast_nic"
    return float(floors[op]["mean_us"])


def summarise(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The target figures: port ratio at 8 B, and MPICH ratios of the largest node count."""
    summary: dict[str, Any] = {}
    pair = runs["emucluster"].get("2", {}).get("pingpong")
    if pair and "raw_port_8B_us" in pair:
        ratio = pair["uppercase_8B_interleaved_us"] / pair["raw_port_8B_us"]
        summary["pingpong_8B"] = {
            "uppercase_us": pair["uppercase_8B_interleaved_us"],
            "raw_port_us": pair["raw_port_8B_us"],
            "ratio": ratio,
            "target": PORT_RATIO_TARGET,
            "reached": ratio <= PORT_RATIO_TARGET,
        }
    largest = max(runs["emucluster"], key=int)
    for op in ("bcast", "reduce", "barrier"):
        ours = runs["emucluster"][largest]["collectives"][op]["mean_us"]
        theirs = runs["mpich"][largest]["collectives"][op]["mean_us"]
        floor = _floor(runs, largest, op)
        summary[f"{op}_{largest}"] = {
            "emucluster_us": ours,
            "relay_floor_us": floor,
            "mpich_us": theirs,
            "ratio": ours / theirs,
            "floor_ratio": ours / floor,
            "floor_vs_mpich": floor / theirs,
            "target": MPICH_RATIO_TARGET if op != "barrier" else None,
            "reached": ours / theirs <= MPICH_RATIO_TARGET if op != "barrier" else None,
        }
    return summary


def print_tables(record: dict[str, Any]) -> None:
    runs = record["runs"]
    pair = runs["emucluster"].get("2", {}).get("pingpong")
    ref = runs["mpich"].get("2", {}).get("pingpong")
    rows: list[tuple[object, ...]] = []
    if pair and ref:
        for i, size in enumerate(pair["sizes"]):
            up, mpich_up = pair["uppercase_us"][i], ref["uppercase_us"][i]
            rows.append((size, f"{pair['lowercase_us'][i]:.1f}", f"{up:.1f}",
                         f"{ref['lowercase_us'][i]:.1f}", f"{mpich_up:.1f}",
                         f"{up / mpich_up:.0f}"))  # fmt: skip
        print_table("ping-pong one-way latency, 2 nodes (us)",
                    ("bytes", "emu lower", "emu upper", "MPICH lower", "MPICH upper", "emu/MPICH"),
                    rows)  # fmt: skip
    rows = []
    for nodes in sorted(runs["emucluster"], key=int):
        for op in ("bcast", "reduce", "barrier"):
            ours = runs["emucluster"][nodes]["collectives"][op]["mean_us"]
            theirs = runs["mpich"][nodes]["collectives"][op]["mean_us"]
            floor = _floor(runs, nodes, op)
            rows.append((nodes, op, f"{ours:.0f}", f"{floor:.0f}", f"{theirs:.0f}",
                         f"{ours / theirs:.1f}", f"{ours / floor:.1f}",
                         f"{floor / theirs:.1f}"))  # fmt: skip
    print_table("collectives of 8 bytes, mean over ranks (us)",
                ("nodes", "op", "emucluster", "relay floor", "MPICH", "emu/MPICH", "emu/floor",
                 "floor/MPICH"), rows)  # fmt: skip
    rows = []
    for nodes in sorted(runs["emucluster"], key=int):
        for op, names in runs["emucluster"][nodes].get("candidates", {}).items():
            for name, row in names.items():
                rows.append((nodes, op, name, f"{row['mean_us']:.0f}", f"{row['max_us']:.0f}",
                             f"{row['cpu_us']:.0f}", f"{row['run_delay_us']:.0f}"))  # fmt: skip
    if rows:
        print_table("emucluster algorithms of 8 bytes, interleaved, mean over ranks (us)",
                    ("nodes", "op", "algorithm", "wall", "slowest rank", "process CPU",
                     "run delay"), rows)  # fmt: skip
    for name, row in record["summary"].items():
        if row.get("target") is not None:
            verdict = "reached" if row["reached"] else "NOT reached"
            beside = ""
            if "relay_floor_us" in row:
                beside = (f"; relay floor {row['relay_floor_us']:.0f} us = "
                         f"{row['floor_vs_mpich']:.1f}x MPICH, emucluster "
                         f"{row['floor_ratio']:.1f}x the floor")  # fmt: skip
            print(f"{name}: ratio {row['ratio']:.2f} (target <= {row['target']}) {verdict}{beside}")


def plot(record: dict[str, Any], path: str) -> None:
    """Two panels: ping-pong latency vs size; 8-byte collectives vs node count."""
    plt = pyplot()  # the bench extra, only for --png

    runs = record["runs"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    pair = runs["emucluster"].get("2", {}).get("pingpong")
    ref = runs["mpich"].get("2", {}).get("pingpong")
    if pair and ref:
        sizes = pair["sizes"]
        left.plot(sizes, pair["uppercase_us"], "o-", label="emucluster Send/Recv")
        left.plot(sizes, pair["lowercase_us"], "s--", label="emucluster send/recv (pickle)")
        left.plot(sizes, ref["uppercase_us"], "^-", label="mpi4py + MPICH (shared memory)")
        if "raw_port_8B_us" in pair:
            left.plot([8], [pair["raw_port_8B_us"]], "k*", ms=12, label="raw GM port, 8 B")
        left.set_xscale("log", base=2)
        left.set_yscale("log")
        left.set_xlabel("message size (bytes)")
        left.set_ylabel("one-way latency (us)")
        left.set_title("ping-pong, 2 nodes")
        left.legend(fontsize=8)
    nodes = sorted(runs["emucluster"], key=int)
    xs = [int(n) for n in nodes]
    for op, marker, colour in (("bcast", "o", "C0"), ("reduce", "s", "C1"), ("barrier", "^", "C2")):
        ours = [runs["emucluster"][n]["collectives"][op]["mean_us"] for n in nodes]
        theirs = [runs["mpich"][n]["collectives"][op]["mean_us"] for n in nodes]
        right.plot(xs, ours, marker + "-", color=colour, label=f"emucluster {op}")
        right.plot(xs, theirs, marker + ":", color=colour, label=f"MPICH {op}")
        if all(n in runs.get("relay_floor", {}) for n in nodes):
            floor = [_floor(runs, n, op) for n in nodes]
            right.plot(xs, floor, marker + "--", color=colour, alpha=0.5,
                       label=f"relay floor {op}")  # fmt: skip
    right.axhspan(
        400, 600, color="grey", alpha=0.15, label="MPICH 16-proc bcast/reduce (DESIGN §10)"
    )
    right.set_xscale("log", base=2)
    right.set_xticks(xs, [str(x) for x in xs])
    right.set_yscale("log")
    right.set_xlabel("nodes")
    right.set_ylabel("latency (us), mean over ranks")
    right.set_title("8-byte Bcast / Reduce / Barrier")
    right.legend(fontsize=7)
    env = record["environment"]
    fig.suptitle(
        f"emucluster MPI vs mpi4py+MPICH on {env['cpus']} CPUs; "
        f"EMU_WAIT={env['EMU_WAIT']}, nicd priority {env['nic_priority']}, bind-to core"
    )
    save_figure(fig, path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="emubench mpi-compare", description=__doc__)
    p.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8, 16])
    p.add_argument("--iters", type=int, default=500, help="round trips per ping-pong block")
    p.add_argument("--coll-iters", type=int, default=200, help="iterations per collective")
    p.add_argument("--nic-priority", choices=("rt", "nice", "none"), default="rt")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    p.add_argument(
        "--candidates",
        action="store_true",
        help="also time every small-message algorithm of emucluster, interleaved",
    )
    p.add_argument("--json", metavar="FILE", help="write the whole record here")
    p.add_argument("--png", metavar="FILE", help="draw the figure here (needs matplotlib)")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    record = measure(args)
    print_tables(record)
    if args.json:
        write_json(args.json, record, indent=1)
    if args.png:
        plot(record, args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
