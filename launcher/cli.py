"""``emurun``: command line -> LaunchPlan -> supervise.run_job().

The command line is split as mpirun splits it: emurun's own options come first; the first
word that is not an option (or ``-m MODULE``, or anything after ``--``) starts the program,
and everything after it belongs to the program, even words that look like emurun options.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import shutil
import sys
from typing import TYPE_CHECKING

from emucluster import coll, mpi4py_shim
from launcher.errors import EXIT_USAGE, LaunchError, UsageError
from launcher.plan import LaunchPlan, resolve_program, validate_job_id
from nicd import errors as nicd_errors
from nicd.config import FAULT_ENV, FaultConfig

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["build_parser", "main", "plan_from_argv", "split_argv"]

_EPILOG = """\
PROGRAM is a Python script (app.py), -m MODULE, or any executable with its arguments.
Every host process gets EMU_RANK, EMU_SIZE, EMU_NIC_SOCKET, EMU_RUN_DIR and EMU_JOB_ID.
Exit status: the first failing rank's code (128+N if killed by signal N); 124 on --timeout;
125 when the emulated cluster fails (a nicd died or never became ready); 126/127 when
PROGRAM cannot be run or found; 130/143 after SIGINT/SIGTERM; 2 for a bad command line.
"""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that remembers which option strings take a value."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.valued: set[str] = set()

    def option(self, *names: str, **kwargs: object) -> None:
        """add_argument for options, noting those that consume the next word."""
        action = self.add_argument(*names, **kwargs)  # type: ignore[arg-type]
        if action.nargs != 0:
            self.valued.update(names)


def build_parser() -> _Parser:
    """emurun's own options (the program and its arguments are split off first)."""
    p = _Parser(
        prog="emurun",
        usage="emurun -np N [options] (PROGRAM [ARGS...] | -m MODULE [ARGS...])",
        description=(
            "Start N emulated Myrinet nodes (one nicd NIC daemon and one host process each), "
            "exchange the NIC addresses, run PROGRAM on every host, forward its output, stop "
            "everything when a rank fails, and clean up."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.option("-np", "-n", "--np", dest="np", type=int, required=True, help="number of nodes")
    p.option("-m", dest="module", metavar="MODULE", help="run a Python module (like python -m)")
    p.option("--timeout", type=float, metavar="S", help="stop the job after S seconds (exit 124)")
    p.option("--tag-output", action="store_true", help="prefix each output line with [rank]")
    p.option(
        "-x",
        dest="export",
        action="append",
        default=[],
        metavar="VAR[=VAL]",
        help="set VAR for the hosts (VAR alone passes emurun's value); repeatable",
    )
    p.option("--stats", dest="stats_dir", metavar="DIR", help="write nic<N>.json and job.json")
    p.option("--cpu-report", action="store_true", help="print CPU seconds per process at exit")
    p.option(
        "--bind-to",
        choices=("core", "none"),
        default="core",
        help="core: node i's host and nicd share CPU i mod ncpu; none: no binding (%(default)s)",
    )
    p.option(
        "--nic-priority",
        choices=("rt", "nice", "none"),
        default="rt",
        help="rt: nicd at SCHED_FIFO, else niced hosts; nice: hosts at nice 19 (%(default)s)",
    )
    p.option(
        "--stop-grace",
        type=float,
        default=3.0,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL when stopping a process (%(default)s)",
    )
    p.option("--nicd-args", default="", metavar="ARGS", help="extra nicd flags, one string")
    p.option("--job-id", metavar="ID", help="job id (letters and digits; default random)")
    p.option("-q", "--quiet", action="store_true", help="report nothing but failures")
    p.option(
        "--mpi4py",
        action="store_true",
        help="run unmodified mpi4py programs: `from mpi4py import MPI` gets emucluster.MPI "
        f"(also when {mpi4py_shim.ENV_SWITCH}=1 is set for emurun)",
    )
    c = p.add_argument_group(
        "collective algorithms (set EMU_BCAST, EMU_REDUCE, ... for the hosts; "
        "a program's per-call algorithm= still wins)"
    )
    for operation in ("bcast", "reduce"):
        action = c.add_argument(
            f"--{operation}",
            metavar="NAME",
            help=f"{operation} algorithm: {', '.join(_algorithm_names(operation))}",
        )
        p.valued.update(action.option_strings)
    action = c.add_argument(
        "--coll",
        action="append",
        default=[],
        metavar="OP=NAME",
        help="any operation's algorithm, e.g. --coll allreduce=reduce-bcast; repeatable",
    )
    p.valued.update(action.option_strings)
    f = p.add_argument_group(
        f"fault injection (every nicd; defaults from {', '.join(FAULT_ENV.values())})"
    )
    for name, text in (
        ("--loss", "probability a datagram is lost"),
        ("--dup", "probability a datagram is duplicated"),
        ("--reorder", "probability a datagram is overtaken"),
        ("--corrupt", "probability a bit of a datagram is flipped"),
        ("--delay-ms", "extra one-way delay in milliseconds"),
        ("--fault-seed", "seed; node n uses seed * 65536 + n"),
    ):
        action = f.add_argument(name, metavar="X", help=text)
        p.valued.update(action.option_strings)
    return p


def split_argv(argv: Sequence[str], valued: set[str]) -> tuple[list[str], list[str]]:
    """Split into (emurun's words, the program's words); ``-m MODULE`` stays on emurun's side.

    The program starts at the first word that is neither an option nor an option's value.
    """
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return list(argv[:i]), list(argv[i + 1 :])
        if word == "-m":
            return list(argv[: i + 2]), list(argv[i + 2 :])
        if not word.startswith("-") or word == "-":
            return list(argv[:i]), list(argv[i:])
        i += 2 if word in valued else 1
    return list(argv), []


def _exports(words: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for word in words:
        name, sep, value = word.partition("=")
        if not name or not name.replace("_", "a").isalnum() or name[0].isdigit():
            raise UsageError(f"-x {word!r}: not VAR or VAR=VALUE")
        if sep:
            out[name] = value
        elif name in env:
            out[name] = env[name]
        else:
            raise UsageError(f"-x {name}: {name} is not set in emurun's environment")
    return out


def _algorithm_names(operation: str) -> tuple[str, ...]:
    """Registered algorithms of ``operation``, then the names reserved for offloads."""
    reserved = sorted(coll.RESERVED.get(operation, frozenset()))
    return (*coll.choices(operation), *reserved)


def _collective_env(args: argparse.Namespace) -> dict[str, str]:
    """``--bcast``, ``--reduce`` and ``--coll OP=NAME`` as EMU_<OP> variables, checked."""
    chosen = [f"bcast={args.bcast}"] if args.bcast else []
    chosen += [f"reduce={args.reduce}"] if args.reduce else []
    out: dict[str, str] = {}
    for word in [*args.coll, *chosen]:
        operation, sep, name = word.partition("=")
        operation, name = operation.strip().lower(), name.strip().lower()
        if not sep or operation not in coll.OPERATIONS:
            known = ", ".join(coll.OPERATIONS)
            raise UsageError(f"--coll {word!r}: expected OP=NAME with OP one of {known}")
        names = _algorithm_names(operation)
        if name not in names:
            raise UsageError(
                f"{operation} algorithm {name!r} unknown; choose from {', '.join(names)}"
            )
        out[coll.env_var(operation)] = name
    return out


def plan_from_argv(argv: Sequence[str], env: Mapping[str, str]) -> LaunchPlan:
    """Parse and check a command line; raise UsageError / ProgramNotFound."""
    parser = build_parser()
    ours, program = split_argv(argv, parser.valued)
    args = parser.parse_args(ours)
    try:
        faults = FaultConfig.from_values({name: getattr(args, name) for name in FAULT_ENV}, env)
    except nicd_errors.UsageError as exc:
        raise UsageError(str(exc)) from None
    try:
        nicd_args = tuple(shlex.split(args.nicd_args))
    except ValueError as exc:
        raise UsageError(f"--nicd-args: {exc}") from None
    host_extras = {**_exports(args.export, env), **_collective_env(args)}
    if args.mpi4py or env.get(mpi4py_shim.ENV_SWITCH) == "1":
        host_extras[mpi4py_shim.ENV_SWITCH] = "1"
        host_extras["PYTHONPATH"] = mpi4py_shim.pythonpath(
            host_extras.get("PYTHONPATH", env.get("PYTHONPATH"))
        )
    python = sys.executable
    return LaunchPlan(
        np=args.np,
        program=resolve_program(
            program,
            args.module,
            python=python,
            which=shutil.which,
            is_file=os.path.isfile,
            is_executable=lambda path: os.access(path, os.X_OK),
        ),
        job_id=validate_job_id(args.job_id) if args.job_id else secrets.token_hex(4),
        python=python,
        timeout=args.timeout,
        tag_output=args.tag_output,
        env=host_extras,
        faults=faults,
        stats_dir=os.path.abspath(args.stats_dir) if args.stats_dir else None,
        cpu_report=args.cpu_report,
        bind_to=args.bind_to,
        nic_priority=args.nic_priority,
        nicd_args=nicd_args,
        stop_grace=args.stop_grace,
        quiet=args.quiet,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``emurun`` console script; returns (and exits with) the status."""
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        plan = plan_from_argv(words, os.environ)
    except LaunchError as exc:
        print(f"emurun: {exc}", file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    from launcher.supervise import run_job  # late: keeps --help and errors fast

    return run_job(plan)


if __name__ == "__main__":
    sys.exit(main())
