"""What a job is: the LaunchPlan, and the pure rules that turn it into command lines,
environments and CPU placements for every nicd and host process.

Invariants: nothing here touches the operating system; filesystem lookups arrive as callables
(``which``, ``is_file``, ``is_executable``) and the parent environment as a mapping, so every
rule is tested without processes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from emucluster.config import (  # the variables a host learns its place from
    ENV_FT,
    ENV_JOB_ID,
    ENV_NIC_SOCKET,
    ENV_RANK,
    ENV_RUN_DIR,
    ENV_SIZE,
    ENV_STATS_DIR,
    ENV_UNIVERSE_SIZE,
    ENV_WAIT,
)
from launcher.errors import EXIT_NOT_EXECUTABLE, ProgramNotFound, UsageError
from nicd.config import FAULT_ENV, FaultConfig, Recovery, node_fault_seed

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from launcher.multihost.hostfile import HostSpec, MapBy
    from launcher.multihost.starters import LauncherKind

__all__ = [
    "HostsPlan",
    "LaunchPlan",
    "Placement",
    "Program",
    "fault_seed_for",
    "host_env",
    "nicd_argv",
    "nicd_env",
    "place",
    "placements",
    "resolve_program",
    "shm_prefix",
    "validate_job_id",
]

BindTo = Literal["core", "none", "role"]
NicPriority = Literal["rt", "nice", "none"]
Profile = Literal["faithful", "throughput"]
PROFILE_WAIT: dict[str, str] = {"faithful": "block", "throughput": "hybrid"}
"""The wait policy (``EMU_WAIT``) each ``--profile`` gives hosts unless the user chose one.
``faithful``: a waiting host yields its core to the others, as if each host had a processor
of its own, and `emucluster.hosttime` charges the wait as polling; ``throughput``: a short spin
first (lower latency when cores are free), the library's historical default."""

_JOB_ID = re.compile(r"[A-Za-z0-9]{1,32}")


@dataclass(frozen=True, slots=True)
class Program:
    """The host command line, resolved."""

    argv: tuple[str, ...]
    """What is executed, interpreter first for Python scripts and modules."""
    display: str
    """How messages name it (``app.py``, ``-m pkg``, ``./a.out``)."""


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """Everything emurun decided before starting a process."""

    np: int
    """Nodes: one nicd and one host process each."""
    program: Program
    """What every host runs."""
    job_id: str
    """Names the job's shared-memory segments (``emu_<job_id>_*``) and marks its processes."""
    python: str
    """Interpreter for nicd (``python -m nicd``), Python scripts and ``-m`` modules."""
    timeout: float | None = None
    """Seconds the whole job may take; then it is stopped with EXIT_TIMEOUT."""
    fault_tolerant: bool = False
    """``--with-ft ulfm``: a failing rank (or nicd) is recorded, not a reason to stop the
    others; emurun still exits with the first failure's status once every rank has ended."""
    tag_output: bool = False
    """Prefix every forwarded output line with ``[rank]``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra host environment from ``-x VAR[=VAL]``."""
    faults: FaultConfig = field(default_factory=FaultConfig)
    """Fault injection for every nicd; node ``n`` uses :func:`fault_seed_for` (seed, n)."""
    stats_dir: str | None = None
    """Directory for each nicd's counters (``nic<N>.json``) and ``job.json``."""
    trace_dir: str | None = None
    """``--trace DIR``: where the merged trace goes (multi-host: where shipped files land)."""
    trace_window: tuple[float, float] = (0.0, 5.0)
    """``--trace-window A:B``: the span of ``timeline.png``, ms (`emutrace.merge.merge_dir`)."""
    cpu_report: bool = False
    """Print each process's CPU seconds, wall time and run delay at exit."""
    gauge_out: str | None = None
    """``EMU_GAUGE_OUT``: a file emurun appends the job's gauge to (`launcher.cpugauge`)."""
    bind_to: BindTo = "core"
    """``core``: node i's host and nicd share CPU i mod ncpu; ``none``: the kernel decides."""
    nic_priority: NicPriority = "rt"
    """``rt``: nicd at SCHED_FIFO, falling back to ``nice`` (hosts at nice 19) if refused."""
    nicd_args: tuple[str, ...] = ()
    """Extra nicd flags (``--nicd-args``), after the ones emurun sets."""
    recovery: Recovery | None = None
    """nicd ``--recovery`` (None: nicd's default, go-back-N)."""
    listen_host: str = "127.0.0.1"
    """Address every nicd binds its UDP link to."""
    ready_timeout: float = 60.0
    """Seconds every nicd gets to print NICD_READY."""
    stop_grace: float = 3.0
    """Seconds between SIGTERM and SIGKILL when stopping a process."""
    quiet: bool = False
    """Say nothing on stderr except failures."""
    profile: Profile = "faithful"
    """``--profile``: how hosts wait (`PROFILE_WAIT`); stated on emurun's first line."""
    forkserver: bool = True
    """Fork nicds and Python hosts from a zygote that imported them once
    (`launcher.forkserver`); False: spawn every process (``--no-forkserver``,
    ``EMU_FORKSERVER=0``)."""
    hosts: HostsPlan | None = None
    """Several hosts, each run by an agent (launcher.multihost); None: this machine alone."""
    universe_size: int | None = None
    """``MPI.UNIVERSE_SIZE`` (``EMU_UNIVERSE_SIZE`` unless ``-x`` sets it): the slots,
    `launcher.dynamic.core.universe_size`; None: ``np``."""

    def __post_init__(self) -> None:
        if not 1 <= self.np <= 0xFFFF:
            raise UsageError(f"-np {self.np} is not in 1..65535")
        if self.timeout is not None and not self.timeout > 0:
            raise UsageError(f"--timeout {self.timeout!r} must be positive")
        if not self.stop_grace >= 0:
            raise UsageError(f"--stop-grace {self.stop_grace!r} must not be negative")
        validate_job_id(self.job_id)


@dataclass(frozen=True, slots=True)
class HostsPlan:
    """A job over agents (``--hostfile``/``--host``/``--launcher none``)."""

    launcher: LauncherKind
    hosts: tuple[HostSpec, ...] = ()
    """Hosts to start agents on (empty with ``--launcher none``)."""
    map_by: MapBy = "slot"
    exec_cmd: tuple[str, ...] = ()
    """``--launcher-exec`` words."""
    agents: int = 0
    """``--launcher none``: how many running agents to wait for."""
    listen: str | None = None
    """``ADDR:PORT`` emurun listens on for its agents (None: the address reaching the first
    host, a free port)."""
    token_file: str | None = None
    """The job's token (required with ``none``; otherwise a fresh one is made)."""
    agent_cmd: tuple[str, ...] = ("emuproxy",)
    agent_timeout: float = 120.0
    """Seconds every agent gets to dial in and prove the token."""
    program_words: tuple[str, ...] = ()
    """PROGRAM [ARGS] as typed: each agent resolves it on its own host."""
    module: str | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """The CPUs one node's processes may run on (None: wherever the kernel likes)."""

    node: int
    host_cpus: frozenset[int] | None
    nicd_cpus: frozenset[int] | None


def validate_job_id(job_id: str) -> str:
    """Job ids are 1-32 ASCII letters and digits, so ``emu_<id>_`` prefixes never nest."""
    if not _JOB_ID.fullmatch(job_id):
        raise UsageError(f"job id {job_id!r}: use 1-32 ASCII letters and digits")
    return job_id


def shm_prefix(job_id: str) -> str:
    """Prefix of the job's shared-memory segment names in /dev/shm."""
    return f"emu_{job_id}_"


def fault_seed_for(seed: int, node: int) -> int:
    """Node ``node``'s fault seed: distinct per node, so nodes do not lose the same packets."""
    return node_fault_seed(seed, node)


def resolve_program(
    argv: Sequence[str],
    module: str | None,
    *,
    python: str,
    which: Callable[[str], str | None],
    is_file: Callable[[str], bool],
    is_executable: Callable[[str], bool],
) -> Program:
    """Turn ``PROGRAM [ARGS]`` or ``-m MODULE [ARGS]`` into an argv, as mpirun would.

    A ``*.py`` file runs under ``python``; anything else must be an executable file or a
    command on PATH. Raises ProgramNotFound (exit 127, or 126 when not executable).
    """
    if module is not None:
        if not module:
            raise UsageError("-m needs a module name")
        return Program((python, "-m", module, *argv), f"-m {module}")
    if not argv or not argv[0]:
        raise UsageError("no PROGRAM given: emurun -np N PROGRAM [ARGS...] or -m MODULE")
    name, args = argv[0], tuple(argv[1:])
    if name.endswith(".py"):
        if not is_file(name):
            raise ProgramNotFound(f"{name}: no such file")
        return Program((python, name, *args), name)
    if "/" in name:
        if not is_file(name):
            raise ProgramNotFound(f"{name}: no such file")
        if not is_executable(name):
            raise ProgramNotFound(
                f"{name}: not executable (run a Python script as {name}.py or 'python {name}')",
                EXIT_NOT_EXECUTABLE,
            )
        return Program((name, *args), name)
    found = which(name)
    if found is None:
        raise ProgramNotFound(f"{name}: command not found")
    return Program((found, *args), name)


def nicd_argv(plan: LaunchPlan, node: int, run_dir: str) -> list[str]:
    """The command line of node ``node``'s nicd: ``-P``, so the NIC's firmware is the installed
    ``nicd`` (what ``emurun --version`` reports), never one in the working directory."""
    argv = [plan.python, "-P", "-m", "nicd", "--node-id", str(node), "--run-dir", run_dir]
    argv += ["--listen", f"{plan.listen_host}:0"]
    if plan.stats_dir is not None:
        argv += ["--stats", f"{plan.stats_dir}/nic{node}.json"]
    # every fault flag explicit: an EMU_LOSS left in the environment must not leak in
    argv += replace(plan.faults, seed=fault_seed_for(plan.faults.seed, node)).flags()
    if plan.recovery is not None:
        argv += ["--recovery", plan.recovery]
    argv += plan.nicd_args
    return argv


def nicd_env(plan: LaunchPlan, parent: Mapping[str, str]) -> dict[str, str]:
    """nicd's environment: emurun's, marked with the job id (the cleanup sweep looks for it)."""
    env = {k: v for k, v in parent.items() if k not in FAULT_ENV.values()}
    env[ENV_JOB_ID] = plan.job_id
    return env


def describe_profile(plan: LaunchPlan) -> str:
    """The ``--profile`` and the wait policy the hosts got, for emurun's first line."""
    wait = plan.env.get(ENV_WAIT)
    how = f"EMU_WAIT={wait}" if wait is not None else "EMU_WAIT from the environment"
    return f"profile {plan.profile} ({how})"


def host_env(
    plan: LaunchPlan, rank: int, run_dir: str, socket: str, parent: Mapping[str, str]
) -> dict[str, str]:
    """Host ``rank``'s environment: emurun's, then ``-x`` additions, then its place.

    ``PYTHONUNBUFFERED=1`` unless set, so Python output is forwarded as it is printed;
    ``EMU_STATS_DIR`` with ``--stats``.
    """
    env = dict(parent)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(plan.env)
    env[ENV_RANK] = str(rank)
    env[ENV_SIZE] = str(plan.np)
    env[ENV_NIC_SOCKET] = socket
    env[ENV_RUN_DIR] = run_dir
    env[ENV_JOB_ID] = plan.job_id
    if ENV_UNIVERSE_SIZE not in plan.env:
        env[ENV_UNIVERSE_SIZE] = str(plan.universe_size or plan.np)
    if plan.fault_tolerant:
        env[ENV_FT] = "ulfm"  # its waits probe the peers they await (emucluster.config)
    if plan.stats_dir is not None:
        env[ENV_STATS_DIR] = plan.stats_dir  # the MPI library writes rank<N>.json there
    return env


def placements(plan: LaunchPlan, cpus: Sequence[int]) -> list[Placement]:
    """Where each node's processes run (`place` with the plan's ``bind_to`` and ``np``)."""
    return place(plan.bind_to, plan.np, cpus)


def place(bind_to: BindTo, nodes: int, cpus: Sequence[int]) -> list[Placement]:
    """Where each of ``nodes`` nodes' processes run on ``cpus``. ``core``: node i's host and
    nicd share the i-th allowed CPU, round-robin (a same-core wake-up costs ~5 us, a
    cross-core one ~30 us: DESIGN §10); ``role``: the nicds on the first half of the allowed
    CPUs and the hosts on the rest, each round-robin (the NIC processors and the host
    processors: a nicd never preempts a host and each CPU's caches hold one program; with one
    CPU it is ``core``); ``none``: no binding. Benchmarks place their relay floors with it."""
    if bind_to == "none" or not cpus:
        return [Placement(node, None, None) for node in range(nodes)]
    ordered = sorted(cpus)
    if bind_to == "role" and len(ordered) > 1:
        nics, hosts = ordered[: len(ordered) // 2], ordered[len(ordered) // 2 :]
        return [
            Placement(
                node, frozenset({hosts[node % len(hosts)]}), frozenset({nics[node % len(nics)]})
            )
            for node in range(nodes)
        ]
    out = []
    for node in range(nodes):
        core = frozenset({ordered[node % len(ordered)]})
        out.append(Placement(node, core, core))
    return out
