"""``emurun``: command line -> LaunchPlan -> job.run_job() (one machine or several hosts).

Inside a Slurm allocation (`launcher.multihost.slurm`) the default launcher is ``slurm`` and
``-np`` defaults to the allocation's task count; ``--launcher local`` keeps a job on this
machine.

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
from typing import TYPE_CHECKING, cast

from emucluster import coll, mpi4py_shim
from emucluster.config import ENV_WAIT
from emutrace.merge import DEFAULT_WINDOW_MS, parse_window
from launcher import build, tuning
from launcher.cpugauge import ENV_GAUGE_OUT, WARN_SHARE
from launcher.dynamic.core import universe_size
from launcher.errors import EXIT_USAGE, LaunchError, UsageError
from launcher.forkserver.client import enabled as forkserver_enabled
from launcher.multihost import slurm
from launcher.multihost.hostfile import HostSpec, map_ranks, parse_host_list, parse_hostfile
from launcher.plan import (
    PROFILE_WAIT,
    HostsPlan,
    LaunchPlan,
    Program,
    resolve_program,
    validate_job_id,
)
from launcher.tracing import traced_job
from nicd import errors as nicd_errors
from nicd.config import FAULT_ENV, RECOVERY_MODES, FaultConfig

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from launcher.multihost.starters import LauncherKind

__all__ = ["build_parser", "main", "plan_from_argv", "split_argv"]

_EPILOG = f"""\
PROGRAM is a Python script (app.py), -m MODULE, or any executable with its arguments.
Every host process gets EMU_RANK, EMU_SIZE, EMU_NIC_SOCKET, EMU_RUN_DIR and EMU_JOB_ID.
Exit status: the first failing rank's code (128+N if killed by signal N); 124 on --timeout;
125 when the emulated cluster fails (a nicd died or never became ready); 123 when a host
of a multi-host job is lost (its agent died, fell silent or never connected); 126/127 when
PROGRAM cannot be run or found; 130/143 after SIGINT/SIGTERM; 2 for a bad command line.
At exit emurun warns in one line when the ranks waited for a CPU more than {WARN_SHARE:.0%} of
their time: the machine was oversubscribed, what the job measured includes that contention.
"""


class _Version(argparse.Action):
    """``--version``: print the version and the build (`launcher.build`), then exit; the build
    is looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)  # type: ignore[arg-type]

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(build.version_text())
        parser.exit()


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
    p.option(
        "-np",
        "-n",
        "--np",
        dest="np",
        type=int,
        help="number of nodes (required, except in a Slurm allocation: SLURM_NTASKS)",
    )
    p.option(
        "--version",
        action=_Version,
        help="print the version and the build (the modules compiled with mypyc, or pure Python)",
    )
    p.option("-m", dest="module", metavar="MODULE", help="run a Python module (like python -m)")
    p.option("--timeout", type=float, metavar="S", help="stop the job after S seconds (exit 124)")
    p.option(
        "--with-ft",
        choices=("ulfm",),
        help="ulfm: a rank that dies does not stop the others (they see ERR_PROC_FAILED and may "
        "recover with Revoke/Shrink/Agree); the exit status still names the first failure",
    )
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
    p.option("--trace", dest="trace_dir", metavar="DIR", help="record events; write DIR/trace.json")
    p.option("--trace-window", default="0:5", metavar="A:B", help="timeline.png window, ms")
    p.option(
        "--cpu-report",
        action="store_true",
        help="print per process at exit its CPU seconds, wall time, run delay (time it waited "
        "for a CPU) and its share, and each nicd's share of its node's CPU",
    )
    p.option(
        "--bind-to",
        choices=("core", "role", "none"),
        default="core",
        help="core: node i's host and nicd share CPU i mod ncpu; role: the nicds on the first "
        "half of the CPUs, the hosts on the rest; none: no binding (%(default)s)",
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
    p.option(
        "--profile",
        choices=("faithful", "throughput"),
        default="faithful",
        help="faithful: a waiting host yields its core and is charged as if it had polled "
        "(emucluster.hosttime), as on a node with its own processor; throughput: hosts spin "
        "briefly before sleeping (EMU_WAIT=hybrid). An EMU_WAIT of yours wins (%(default)s)",
    )
    p.option("--nicd-args", default="", metavar="ARGS", help="extra nicd flags, one string")
    p.option("--recovery", choices=RECOVERY_MODES, help="nicd loss recovery (nicd's default: gbn)")
    p.option("--job-id", metavar="ID", help="job id (letters and digits; default random)")
    p.option(
        "--no-forkserver",
        action="store_true",
        help="spawn every nicd and host process afresh instead of forking them from a zygote "
        "that imported nicd and emucluster once (also EMU_FORKSERVER=0)",
    )
    p.option(
        "-q",
        "--quiet",
        action="store_true",
        help="report nothing but failures (nor the oversubscription warning, unless --cpu-report)",
    )
    p.option(
        "--mpi4py",
        action="store_true",
        help="run unmodified mpi4py programs: `from mpi4py import MPI` gets emucluster.MPI "
        f"(also when {mpi4py_shim.ENV_SWITCH}=1 is set for emurun)",
    )
    _hosts_options(p)
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


def _hosts_options(p: _Parser) -> None:
    """The multi-host options (each host runs an agent, ``emuproxy``)."""
    h = p.add_argument_group(
        "several hosts (a slot is one node, i.e. one nicd and one host process, not a CPU)"
    )
    for names, kwargs in (
        (("--hostfile",), {"metavar": "FILE", "help": "hosts, one a line: NAME [slots=N]"}),
        (("--host",), {"metavar": "H[:N],...", "help": "hosts inline: a:2,b"}),
        (("--map-by",), {"choices": ("slot", "node"), "default": "slot",
                         "help": "slot: fill each host first; node: round-robin (%(default)s)"}),
        (("--launcher",), {"choices": ("ssh", "exec", "none", "slurm", "local"), "default": None,
                           "help": "how agents start: ssh (default with hosts), exec "
                           "(--launcher-exec CMD HOST AGENT...), none (K running agents dial "
                           "in), slurm (one srun step; default in an allocation), local (this "
                           "machine only)"}),
        (("--launcher-exec",), {"metavar": "CMD", "help": "ssh-like command for --launcher exec"}),
        (("--agents",), {"type": int, "metavar": "K", "help": "agents to wait for (none)"}),
        (("--listen",), {"metavar": "ADDR:PORT", "help": "where emurun listens for its agents"}),
        (("--token-file",), {"metavar": "PATH", "help": "the job's token (required with none)"}),
        (("--agent-cmd",), {"default": "emuproxy", "metavar": "CMD",
                            "help": "the agent's command on each host (%(default)s)"}),
        (("--agent-timeout",), {"type": float, "default": 120.0, "metavar": "S",
                                "help": "seconds agents get to dial in (%(default)s)"}),
    ):  # fmt: skip
        action = h.add_argument(*names, **kwargs)
        if action.nargs != 0:
            p.valued.update(action.option_strings)


def _hosts_plan(
    args: argparse.Namespace, program: Sequence[str], env: Mapping[str, str]
) -> HostsPlan | None:
    """The HostsPlan of the multi-host options, or None for one machine (sets ``args.np``
    from the allocation under Slurm when it was not given)."""
    kind = args.launcher
    given = args.hostfile is not None or args.host is not None
    if kind == "local":
        if given:
            raise UsageError("--launcher local takes no hosts")
        return None
    if kind is None and not given and slurm.in_allocation(env):
        kind = "slurm"
    if not given and kind is None:
        return None
    if args.hostfile is not None and args.host is not None:
        raise UsageError("--hostfile and --host exclude each other")
    kind = cast("LauncherKind", kind or "ssh")
    hosts: list[HostSpec] = []
    if kind == "slurm":
        if given:
            raise UsageError("--launcher slurm takes its hosts from the allocation, not "
                             "--hostfile/--host")  # fmt: skip
        hosts = slurm.allocation_hosts(env)
        if args.np is None:
            args.np = slurm.allocation_ntasks(env) or sum(h.slots for h in hosts)
        map_ranks(hosts, args.np, args.map_by)
    elif kind == "none":
        if args.hostfile or args.host:
            raise UsageError("--launcher none takes no hosts: agents dial in (--agents K)")
        if not args.agents or args.agents < 1:
            raise UsageError("--launcher none needs --agents K (K >= 1)")
        if args.listen is None or args.token_file is None:
            raise UsageError("--launcher none needs --listen ADDR:PORT and --token-file PATH")
    else:
        if args.hostfile is not None:
            try:
                with open(args.hostfile, encoding="utf-8") as f:
                    hosts = parse_hostfile(f.read(), args.hostfile)
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"--hostfile: {exc}") from None
        elif args.host is not None:
            hosts = parse_host_list(args.host)
        else:
            raise UsageError(f"--launcher {kind} needs --hostfile FILE or --host LIST")
        map_ranks(hosts, args.np, args.map_by)  # checks -np against the slots
        if kind == "exec" and not args.launcher_exec:
            raise UsageError("--launcher exec needs --launcher-exec CMD")
    if args.listen is not None:
        host, sep, port = args.listen.rpartition(":")
        if not sep or not host or not port.isdigit() or int(port) > 0xFFFF:
            raise UsageError(f"--listen {args.listen!r} is not ADDR:PORT")
    try:
        exec_cmd = tuple(shlex.split(args.launcher_exec or ""))
        agent_cmd = tuple(shlex.split(args.agent_cmd))
    except ValueError as exc:
        raise UsageError(f"--launcher-exec/--agent-cmd: {exc}") from None
    if not program and not args.module:
        raise UsageError("no PROGRAM given: emurun -np N PROGRAM [ARGS...] or -m MODULE")
    return HostsPlan(
        launcher=kind,
        hosts=tuple(hosts),
        map_by=args.map_by,
        exec_cmd=exec_cmd,
        agents=args.agents or 0,
        listen=args.listen,
        token_file=os.path.abspath(args.token_file) if args.token_file else None,
        agent_cmd=agent_cmd or ("emuproxy",),
        agent_timeout=args.agent_timeout,
        program_words=tuple(program),
        module=args.module,
    )


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
    try:
        trace_window = parse_window(args.trace_window)
    except ValueError as exc:
        if args.trace_dir:  # the window matters only with --trace
            raise UsageError(f"--trace-window: {exc}") from None
        trace_window = DEFAULT_WINDOW_MS
    host_extras = {**_exports(args.export, env), **_collective_env(args)}
    if ENV_WAIT not in host_extras and ENV_WAIT not in env:
        host_extras[ENV_WAIT] = PROFILE_WAIT[args.profile]
    if args.mpi4py or env.get(mpi4py_shim.ENV_SWITCH) == "1":
        host_extras[mpi4py_shim.ENV_SWITCH] = "1"
        host_extras["PYTHONPATH"] = mpi4py_shim.pythonpath(
            host_extras.get("PYTHONPATH", env.get("PYTHONPATH"))
        )
    python = sys.executable
    hosts = _hosts_plan(args, program, env)
    if args.np is None:
        raise UsageError("-np N is required (outside a Slurm allocation)")
    if hosts is not None:  # each agent resolves the program on its own host
        display = f"-m {args.module}" if args.module else program[0]
        resolved = Program(tuple(program), display)
    else:
        resolved = resolve_program(
            program,
            args.module,
            python=python,
            which=shutil.which,
            is_file=os.path.isfile,
            is_executable=lambda path: os.access(path, os.X_OK),
        )
    return LaunchPlan(
        np=args.np,
        program=resolved,
        job_id=validate_job_id(args.job_id) if args.job_id else secrets.token_hex(4),
        python=python,
        timeout=args.timeout,
        fault_tolerant=args.with_ft == "ulfm",
        tag_output=args.tag_output,
        env=host_extras,
        faults=faults,
        stats_dir=os.path.abspath(args.stats_dir) if args.stats_dir else None,
        cpu_report=args.cpu_report,
        gauge_out=env.get(ENV_GAUGE_OUT) or None,
        bind_to=args.bind_to,
        nic_priority=args.nic_priority,
        nicd_args=nicd_args,
        recovery=args.recovery,
        stop_grace=args.stop_grace,
        quiet=args.quiet,
        profile=args.profile,
        forkserver=not args.no_forkserver and forkserver_enabled(env),
        hosts=hosts,
        trace_dir=os.path.abspath(args.trace_dir) if args.trace_dir else None,
        trace_window=trace_window,
        universe_size=universe_size(
            args.np, hosts.hosts if hosts else None, len(tuning.allowed_cpus())
        ),
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
    # late: launcher.job loads psutil, nicd and the node runner (~0.1 s); --help and usage
    # errors never need it
    from launcher.job import run_job

    return traced_job(plan, lambda: run_job(plan))


if __name__ == "__main__":
    sys.exit(main())
