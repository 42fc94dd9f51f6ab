"""``emubench mpi-datatypes``: Alltoallv latency and vector-datatype sends, beside MPICH.

One run starts `emubench.mpi_dtype_rank` under ``emurun -np N`` and under ``mpiexec -n N``
of mpi4py on MPICH (the reference; ``--mpi-python`` names a Python that has ``mpi4py`` and
``mpich`` installed, with ``mpiexec`` beside it; without one the MPICH column is left out
and the figure says so). It prints both, and with ``--json``/``--png`` writes the record and
a two-panel figure:

* OSU-style ``Alltoallv`` latency against the bytes sent to each peer (``--nodes`` ranks);
* one-way ping-pong latency of a message sent from a contiguous array and of the same bytes
  sent as a vector datatype (every other double), ranks 0 and 1; their ratio is what the
  datatype costs (the type map is walked once and the bytes gathered once before sending).

No paper measured these: the MPICH lines are the reference a user would otherwise pick.
"""

from __future__ import annotations

import argparse
import os
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

__all__ = ["main"]

RANK = "emubench.mpi_dtype_rank"


def _rank_args(args: argparse.Namespace, out: Path) -> list[str]:
    words = ["-m", RANK, "--out", str(out), "--iters", str(args.iters)]
    return [*words, "--blocks", str(args.blocks), "--coll-iters", str(args.coll_iters)]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    load_before = load_average()
    runs: dict[str, dict[str, Any]] = {}
    with_mpich = bool(args.mpi_python) and Path(args.mpi_python).with_name("mpiexec").exists()
    with tempfile.TemporaryDirectory(prefix="mpidtype-", dir="/tmp") as tmp:
        for impl in ("emucluster", "mpich") if with_mpich else ("emucluster",):
            out = Path(tmp) / f"{impl}.json"
            runs[impl] = compare_run(
                impl,
                args.nodes,
                _rank_args(args, out),
                out,
                timeout=args.timeout,
                emurun_args=["--nic-priority", args.nic_priority],
                python=args.mpi_python if impl == "mpich" else sys.executable,
            )
    return {
        "benchmark": "emubench.mpi_dtype",
        "parameters": {k: v for k, v in vars(args).items() if k != "argv"},
        "command": command_line("mpi-datatypes", args.argv),
        "environment": environment(
            load_before,
            nicd_priority=args.nic_priority,
            EMU_WAIT=os.environ.get("EMU_WAIT", "hybrid"),
        ),
        "runs": runs,
        "summary": summarise(runs),
    }


def summarise(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Vector/contiguous ratios per size, and emucluster/MPICH Alltoallv ratios."""
    ours = runs["emucluster"]
    pair = ours.get("vector_pingpong", {})
    vector, contiguous = pair.get("vector_us", []), pair.get("contiguous_us", [])
    summary: dict[str, Any] = {
        "vector_over_contiguous": [round(v / c, 3) for v, c in zip(vector, contiguous, strict=True)]
    }
    if "mpich" in runs:
        theirs = runs["mpich"]["alltoallv"]["mean_us"]
        summary["alltoallv_over_mpich"] = [
            round(a / b, 1) for a, b in zip(ours["alltoallv"]["mean_us"], theirs, strict=True)
        ]
    return summary


def print_tables(record: dict[str, Any]) -> None:
    runs = record["runs"]
    ours, theirs = runs["emucluster"], runs.get("mpich")
    rows: list[tuple[object, ...]] = []
    for i, size in enumerate(ours["alltoallv"]["sizes"]):
        mpich = f"{theirs['alltoallv']['mean_us'][i]:.1f}" if theirs else "-"
        rows.append((size, f"{ours['alltoallv']['mean_us'][i]:.1f}",
                     f"{ours['alltoallv']['max_us'][i]:.1f}", mpich))  # fmt: skip
    print_table(f"Alltoallv latency, {ours['nodes']} nodes (us, mean over ranks)",
                ("bytes per peer", "emucluster", "slowest rank", "MPICH"), rows)  # fmt: skip
    pair = ours.get("vector_pingpong")
    if pair:
        rows = []
        ref = theirs.get("vector_pingpong") if theirs else None
        for i, size in enumerate(pair["sizes"]):
            c, v = pair["contiguous_us"][i], pair["vector_us"][i]
            mpich = (f"{ref['contiguous_us'][i]:.1f} / {ref['vector_us'][i]:.1f}"
                     if ref else "-")  # fmt: skip
            rows.append((size, f"{c:.1f}", f"{v:.1f}", f"{v / c:.2f}", mpich))
        print_table("one-way ping-pong, contiguous vs vector datatype (us)",
                    ("bytes", "contiguous", "vector", "ratio", "MPICH c / v"), rows)  # fmt: skip


def plot(record: dict[str, Any], path: str) -> None:
    """Alltoallv latency vs size; contiguous vs vector ping-pong vs size."""
    plt = pyplot()
    runs = record["runs"]
    ours, theirs = runs["emucluster"], runs.get("mpich")
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    a2a = ours["alltoallv"]
    left.plot(a2a["sizes"], a2a["mean_us"], "o-", label="emucluster, mean over ranks")
    left.plot(a2a["sizes"], a2a["max_us"], "o:", color="C0", alpha=0.6, label="slowest rank")
    if theirs:
        ref = theirs["alltoallv"]
        left.plot(ref["sizes"], ref["mean_us"], "^-", color="C2", label="mpi4py + MPICH")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("bytes to each peer")
    left.set_ylabel("latency (us)")
    left.set_title(f"OSU-style Alltoallv, {ours['nodes']} nodes")
    left.legend(fontsize=8)
    pair = ours.get("vector_pingpong")
    if pair:
        right.plot(pair["sizes"], pair["contiguous_us"], "o-", label="emucluster contiguous")
        right.plot(pair["sizes"], pair["vector_us"], "s--", color="C0",
                   label="emucluster vector (every other double)")  # fmt: skip
        ref = theirs.get("vector_pingpong") if theirs else None
        if ref:
            right.plot(ref["sizes"], ref["contiguous_us"], "^-", color="C2",
                       label="MPICH contiguous")  # fmt: skip
            right.plot(ref["sizes"], ref["vector_us"], "v--", color="C2", label="MPICH vector")
        right.set_xscale("log", base=2)
        right.set_yscale("log")
        right.set_xlabel("message bytes")
        right.set_ylabel("one-way latency (us)")
        right.set_title("Send of a vector datatype vs contiguous, 2 ranks")
        right.legend(fontsize=8)
    env = record["environment"]
    reference = "" if theirs else " (no MPICH in this run)"
    fig.suptitle(
        f"emucluster derived datatypes and v-collectives on {env['cpus']} CPUs{reference}; "
        f"EMU_WAIT={env['EMU_WAIT']}, nicd priority {env['nicd_priority']}"
    )
    save_figure(fig, path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="emubench mpi-datatypes", description=__doc__)
    p.add_argument("--nodes", type=int, default=4, help="ranks of the Alltoallv (default 4)")
    p.add_argument("--iters", type=int, default=300, help="round trips per ping-pong block")
    p.add_argument("--blocks", type=int, default=5, help="ping-pong blocks (median taken)")
    p.add_argument("--coll-iters", type=int, default=100, help="Alltoallv calls per size")
    p.add_argument("--quick", action="store_true", help="few iterations: a smoke run")
    p.add_argument("--nic-priority", choices=("rt", "nice", "none"), default="rt")
    reference = "a Python with mpi4py + mpich (mpiexec beside it): the reference"
    p.add_argument("--mpi-python", metavar="PYTHON", help=reference)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    p.add_argument("--json", metavar="FILE", help="write the whole record here")
    p.add_argument("--png", metavar="FILE", help="draw the figure here (needs matplotlib)")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.quick:
        args.iters, args.blocks, args.coll_iters = 20, 2, 8
    record = measure(args)
    print_tables(record)
    if args.json:
        write_json(args.json, record, indent=1)
    if args.png:
        plot(record, args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
