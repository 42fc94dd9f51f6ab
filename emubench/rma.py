"""``emubench rma``: one-sided communication executed by the NIC (issue 31 item 1).

Runs `emubench.rma_rank` on 2 ranks three ways: under ``emurun`` with the target's NIC
executing one-sided operations ("emucluster nic", the default), under ``emurun`` with
host-driven passive target (``EMU_RMA_PROGRESS=host``: the target's host applies them when
it enters MPI, as over a network without RDMA; "emucluster host"), and with ``--mpich`` under
``mpiexec`` with the real mpi4py ("mpich": MPICH's RMA on the same machine, over shared
memory, the reference a user would compare with). Reports Put and Get latency (operation +
Flush in a Lock_all epoch) from 8 B to 64 KiB, and a passive-target run: the target's
pure-Python loop alone and while the origin runs Lock/Put/Unlock epochs at it (wall and CPU
seconds of the target's host), the epochs' median and longest time while the target computes
and while it waits in MPI, and how many epochs ended before the target's loop did. With the
NIC executing the operations the epochs take the same time whether the target computes or not;
with host-driven progress they stall until the target enters the library. JSON (with the
run's environment) with ``--json``, a figure with ``--png``. The machine's load shows in
every number: measure on a quiet one. The figure in docs/figures:

    python -m emubench rma --mpich --mpich-python VENV/bin/python \\
        --json docs/figures/rma.json --png docs/figures/rma.png

(``VENV``: a venv with ``pip install mpi4py mpich numpy``; without ``--mpich-python`` this
python's own venv must have them.)
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
from emucluster.mpi.rma.hostdriven import MODE_ENV

__all__ = ["main"]

RANK = "emubench.rma_rank"
IMPLS = {"emucluster nic": {MODE_ENV: "nic"}, "emucluster host": {MODE_ENV: "host"}}
"""The emulator's two ways, by the environment their ranks get."""


def _rank_args(args: argparse.Namespace, out: Path) -> list[str]:
    words = ["-m", RANK, "--out", str(out), "--iters", str(args.iters)]
    words += ["--work", str(args.work), "--epochs", str(args.epochs), "--sizes"]
    return words + [str(s) for s in args.sizes]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Both implementations (MPICH with ``--mpich``); the whole record."""
    load_before = load_average()
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="rmabench-", dir="/tmp") as tmp:
        for name, env in IMPLS.items():
            out = Path(tmp) / f"{env[MODE_ENV]}.json"
            rank_args = _rank_args(args, out)
            runs[name] = compare_run("emucluster", 2, rank_args, out, timeout=args.timeout,
                                     env=env)  # fmt: skip
        if args.mpich:
            out = Path(tmp) / "mpich.json"
            runs["mpich"] = compare_run("mpich", 2, _rank_args(args, out), out,
                                        timeout=args.timeout, python=args.mpich_python)  # fmt: skip
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
        "epoch_max_us_target_computing",
        "epoch_us_target_in_mpi",
        "epoch_max_us_target_in_mpi",
        "epochs",
        "epochs_done_while_target_computed",
    ]
    rows = [
        [key, *(f"{runs[i].get('overlap', {}).get(key, float('nan')):.4g}" for i in runs)]
        for key in keys
    ]
    print_table("passive target while the target computes", ["", *runs], rows)


def plot(record: dict[str, Any], path: str) -> None:
    """Left: latency against size, one line per implementation and operation. Right: the
    passive-target epochs' median and longest time while the target computes and while it
    is in MPI, per implementation."""
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11.5, 4.4))
    runs: dict[str, Any] = record["runs"]
    for impl, run in runs.items():
        lat = run.get("latency", {})
        for op in ("put_us", "get_us"):
            points = sorted((int(k), v) for k, v in lat.get(op, {}).items())
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=f"{impl} {op[:3]}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes")
    ax.set_ylabel("operation + Flush (us)")
    ax.set_title("Put/Get latency, 2 ranks")
    ax.legend(fontsize="small")
    bars = [
        ("epoch_us_target_computing", "median, target computing"),
        ("epoch_max_us_target_computing", "longest, target computing"),
        ("epoch_us_target_in_mpi", "median, target in MPI"),
    ]
    width = 0.8 / len(bars)
    for i, (key, label) in enumerate(bars):
        values = [runs[impl].get("overlap", {}).get(key, float("nan")) for impl in runs]
        bx.bar([x + i * width for x in range(len(runs))], values, width, label=label)
    for x, impl in enumerate(runs):
        o = runs[impl].get("overlap", {})
        note = f"{o.get('epochs_done_while_target_computed', '?')}/{o.get('epochs', '?')} done"
        cpu = o.get("target_with_epochs_cpu_s", float("nan"))
        bx.annotate(f"{note}\ntarget CPU {cpu:.2f} s", (x + width, 1), fontsize="x-small",
                    ha="center", xycoords=("data", "axes fraction"), va="top")  # fmt: skip
    bx.set_xticks([x + width for x in range(len(runs))], list(runs))
    bx.set_yscale("log")
    bx.set_ylabel("Lock + Put 8 B + Unlock (us)")
    bx.set_title("passive target while the target computes")
    bx.legend(fontsize="small", loc="lower right")
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="emubench rma", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    p.add_argument("--iters", type=int, default=100, help="operations per batch")
    p.add_argument("--work", type=int, default=3_000_000, help="target's loop iterations")
    p.add_argument("--epochs", type=int, default=200, help="origin's epochs during the loop")
    p.add_argument("--mpich", action="store_true",
                   help="also run MPICH (mpi4py on MPICH under mpiexec)")  # fmt: skip
    p.add_argument("--mpich-python", default=sys.executable, metavar="PYTHON",
                   help="the python of a venv with mpi4py and mpich (its mpiexec beside it; "
                        "default: this one)")  # fmt: skip
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
