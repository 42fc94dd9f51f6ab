"""``emubench``: the papers' benchmarks, one subcommand each, ``all`` and ``report``.

``emubench <name> ARGS`` hands ARGS to that benchmark's own command line (``emubench grim
--help``); ``emubench all [--quick] [--out-dir DIR]`` regenerates every figure and writes
``REPORT.md``; ``emubench report [--dir DIR]`` rebuilds ``REPORT.md`` from the JSON there.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from pathlib import Path

from emubench.report import write_report
from emubench.suite import run_all

__all__ = ["BENCHMARKS", "main"]

BENCHMARKS: dict[str, tuple[str, str]] = {
    "reduce-skew": ("emubench.reduce_skew", "application-bypass reduce (thesis Figs 3.6-3.10)"),
    "mcast": ("emubench.mcast", "NIC multicast (seed 001 Figs 4-8)"),
    "mcast-plot": ("emubench.mcast_plot", "redraw the multicast figures from their JSON"),
    "nicvm": ("emubench.nicvm", "NICVM (thesis Figs 4.9-4.18)"),
    "nicvm-vm": ("emubench.nicvm_vm", "the NICVM virtual machine alone (thesis 4.2.1)"),
    "containers": ("emubench.containers", "N containers (docker-compose) vs N local nodes"),
    "grim": ("emubench.grim", "GRIM interfaces (seed 002 Figs 4.6, 4.10)"),
    "mpi-compare": ("emubench.mpi_compare", "emucluster MPI against mpi4py on MPICH"),
    "mpi-datatypes": ("emubench.mpi_dtype", "Alltoallv and vector-datatype sends vs MPICH"),
    "mpi-micro": ("emubench.mpi_micro", "the MPI micro-benchmark ranks of mpi-compare"),
    "unexpected-queue": ("emubench.unexpected_queue", "unexpected-queue search (seed 004 Fig 4)"),
    "nicd": ("emubench.nicd_port", "nicd port-to-port latency and bandwidth"),
    "overhead": ("emubench.overhead", "CPU per MPI message in each process vs the relay"),
    "core": ("emubench.core_cost", "the NIC core's Python cost per message, warm (regression)"),
    "multihost": ("emubench.multihost", "3 namespaces x 2 slots vs 6 local nodes (root)"),
    "rma": ("emubench.rma", "one-sided Put/Get latency, passive target while computing"),
    "trace": ("emubench.trace_figure", "traced Bcast timelines; the cost of tracing"),
    "soak": ("emubench.soak", "a bounded chaos run checking every message (not a figure)"),
}
"""Subcommand -> (module whose ``main(argv)`` it runs, what it measures)."""
DEFAULT_DIR = Path("docs/figures")


def _forward(name: str, argv: list[str]) -> int:
    module = importlib.import_module(BENCHMARKS[name][0])
    code = module.main(argv)
    return int(code or 0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="emubench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, what) in BENCHMARKS.items():
        sub.add_parser(name, help=what, add_help=False)
    run_all = sub.add_parser("all", help="regenerate every figure and REPORT.md")
    run_all.add_argument(
        "--quick",
        action="store_true",
        help="few iterations and small node counts (a few minutes); written to a fresh "
        "temporary directory unless --out-dir is given, never over the committed figures",
    )
    run_all.add_argument("--out-dir", type=Path, help=f"default: {DEFAULT_DIR} (not --quick)")
    run_all.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks")
    report = sub.add_parser("report", help="rebuild REPORT.md from the JSON in a directory")
    report.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``emubench`` console script."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in BENCHMARKS:
        return _forward(argv[0], argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "report":
        print(f"wrote {write_report(args.dir)}")
        return 0
    if args.command == "all":
        out_dir = args.out_dir
        if out_dir is None:
            out_dir = Path(tempfile.mkdtemp(prefix="emubench-")) if args.quick else DEFAULT_DIR
        started = time.monotonic()
        record = run_all(out_dir, quick=args.quick, only=args.only or ())
        path = write_report(out_dir)
        ran = [name for name in record["jobs"] if not args.only or name in args.only]
        failed = [name for name in ran if record["jobs"][name]["status"] == "failed"]
        print(f"emubench all: {time.monotonic() - started:.0f} s; report {path}")
        if failed:
            print(f"emubench all: failed: {', '.join(failed)}", file=sys.stderr)
        return 1 if failed else 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
