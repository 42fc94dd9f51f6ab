"""``emubench rma``: one-sided communication executed by the NIC (issue 31 item 1).

Runs `emubench.rma_rank` on 2 ranks under ``emurun`` and, with ``--mpich``, under
``mpiexec`` with the real mpi4py (MPICH's RMA on the same machine, the reference a user would
compare with). Reports Put and Get latency (operation + Flush in a Lock_all epoch) from 8 B
to 64 KiB, and a passive-target run: the target's pure-Python loop alone and while the origin
runs Lock/Put/Unlock epochs at it (wall and CPU seconds), and the epochs' median time while
the target computes and while it waits in MPI. With the NIC executing the operations the
epochs take the same time whether the target computes or not; an implementation whose target
must enter the library for progress stalls them while the target computes. JSON with
``--json``, a figure with ``--png``. The machine's load shows in every figure: measure on a
quiet one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

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
from emubench.rma_rank import SIZES

__all__ = ["main"]

RANK = "emubench.rma_rank"


def _rank_args(args: argparse.Namespace, out: Path) -> list[str]:
    words = ["-m", RANK, "--out", str(out), "--iters", str(args.iters)]
    words += ["--work", str(args.work), "--epochs", str(args.epochs), "--sizes"]
    return words + [str(s) for s in args.sizes]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Both implementations (MPICH with ``--mpich``); the whole record."""
    load_before = load_average()
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="rmabench-", dir="/tmp") as tmp:
        for impl in ("emucluster", "mpich") if args.mpich else ("emucluster",):
            out = Path(tmp) / f"{impl}.json"
            runs[impl] = compare_run(impl, 2, _rank_args(args, out), out, timeout=args.timeout)
    return {
        "benchmark": "emubench.rma",
        "parameters": {k: v for k, v in vars(args).items() if k != "argv"},
        "command": command_line("rma", args.argv),
        "environment": environment(load_before),
        "runs": runs,
    }


def print_tables(record: dict[str, Any]) -> None:
    """The latency table and the passive-target table."""
    runs: dict[str, Any] = record["runs"]
    sizes = [str(s) for s in record["parameters"]["sizes"]]
    rows: list[list[object]] = []
    for size in sizes:
        row: list[object] = [size]
        for impl in runs:
            lat = runs[impl].get("latency", {})
            row += [f"{lat.get('put_us', {}).get(size, float('nan')):.1f}",
                    f"{lat.get('get_us', {}).get(size, float('nan')):.1f}"]  # fmt: skip
        rows.append(row)
    columns = ["bytes"] + [f"{impl} {op} us" for impl in runs for op in ("put", "get")]
    print_table("Put/Get + Flush latency", columns, rows)
    keys = [
        "target_alone_wall_s",
        "target_with_epochs_wall_s",
        "target_alone_cpu_s",
        "target_with_epochs_cpu_s",
        "epoch_us_target_computing",
        "epoch_us_target_in_mpi",
    ]
    rows = [
        [key, *(f"{runs[i].get('overlap', {}).get(key, float('nan')):.4g}" for i in runs)]
        for key in keys
    ]
    print_table("passive target while the target computes", ["", *runs], rows)


def plot(record: dict[str, Any], path: str) -> None:
    """Latency against size, one line per implementation and operation."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for impl, run in record["runs"].items():
        lat = run.get("latency", {})
        for op in ("put_us", "get_us"):
            points = sorted((int(k), v) for k, v in lat.get(op, {}).items())
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=f"{impl} {op[:3]}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes")
    ax.set_ylabel("operation + Flush (us)")
    ax.set_title("one-sided latency, 2 ranks")
    ax.legend()
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="emubench rma", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    p.add_argument("--iters", type=int, default=100, help="operations per batch")
    p.add_argument("--work", type=int, default=3_000_000, help="target's loop iterations")
    p.add_argument("--epochs", type=int, default=200, help="origin's epochs during the loop")
    p.add_argument("--mpich", action="store_true", help="also run MPICH (mpiexec + mpi4py)")
    p.add_argument("--quick", action="store_true", help="a smoke run: few iterations")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per job")
    p.add_argument("--json", metavar="FILE", help="write the whole record here")
    p.add_argument("--png", metavar="FILE", help="draw the figure here (needs matplotlib)")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.quick:
        args.iters, args.work, args.epochs, args.sizes = 5, 200_000, 10, [8, 4096]
    record = measure(args)
    print_tables(record)
    if args.json:
        write_json(args.json, record, indent=1)
    if args.png:
        plot(record, args.png)
    return 0
