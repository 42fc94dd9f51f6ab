"""Slurm as emurun's launcher (``--launcher slurm``, the default inside an allocation).

Inside an allocation (``SLURM_JOB_ID`` and ``SLURM_JOB_NODELIST`` set, as in ``salloc`` and
``sbatch``) emurun reads the hosts from ``SLURM_JOB_NODELIST`` (``n[01-04,07]``, expanded by
python-hostlist), their slots from ``SLURM_TASKS_PER_NODE`` (``2(x3),1``) and ``-np`` from
``SLURM_NTASKS``, and starts every agent with one job step, as MPICH's Hydra and PRRTE start
their proxies::

    srun --nodes=K --ntasks=K --ntasks-per-node=1 --nodelist=h1,...,hK --kill-on-bad-exit=1
         --input=all --mpi=none --cpu-bind=none --job-name=emuproxy AGENT --slurm ...

``--input=all`` gives each agent srun's stdin, which carries the token (one line, then end of
file), so the token travels as it does for ssh: never on a command line, no shared file.
Each agent takes its name from ``SLURMD_NODENAME`` (``emuproxy --slurm``); emurun admits it by
that name. ``--kill-on-bad-exit`` ends the step when one agent fails; ``scancel`` ends the
agents, their nodes with them.

After a failure emurun asks Slurm for the job's state (:func:`job_state`): a cancelled or
ending job (``scancel``) ends with 143 and says so, one out of time with 124, one that lost a
node with 123, whatever failure the job saw first (every process of the step gets the signal
at once, so the first failure seen is any of them).

Invariants: pure (environment mappings and argv lists only), except :func:`node_address` and
:func:`job_state`, which ask ``scontrol`` (the address Slurm reaches a node at; a job's
state).
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import hostlist

from launcher.errors import EXIT_LOST_HOST, EXIT_TIMEOUT, UsageError
from launcher.multihost.hostfile import HostSpec

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "SLURM_NAME_ENV",
    "agent_step",
    "allocation_hosts",
    "allocation_job_id",
    "allocation_ntasks",
    "ended_by",
    "in_allocation",
    "job_state",
    "node_address",
]

SLURM_NAME_ENV = "SLURMD_NODENAME"
"""Set by slurmd in every task: the node's Slurm name (``emuproxy --slurm`` takes it)."""
_SRUN = ("srun",)


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def allocation_job_id(env: Mapping[str, str]) -> str | None:
    """The allocation's job id (``SLURM_JOB_ID``), None outside one."""
    return _first(env, "SLURM_JOB_ID", "SLURM_JOBID")


def in_allocation(env: Mapping[str, str]) -> bool:
    """Whether ``env`` is inside a Slurm allocation (a job id and its node list are set)."""
    return bool(
        _first(env, "SLURM_JOB_ID", "SLURM_JOBID")
        and _first(env, "SLURM_JOB_NODELIST", "SLURM_NODELIST")
    )


def allocation_hosts(env: Mapping[str, str]) -> list[HostSpec]:
    """The allocation's nodes with their task counts as slots; UsageError if unreadable."""
    nodelist = _first(env, "SLURM_JOB_NODELIST", "SLURM_NODELIST")
    if nodelist is None:
        raise UsageError("--launcher slurm needs a Slurm allocation (SLURM_JOB_NODELIST unset)")
    try:
        names = hostlist.expand_hostlist(nodelist)
    except hostlist.BadHostlist as exc:
        raise UsageError(f"SLURM_JOB_NODELIST={nodelist!r}: {exc}") from None
    per_node = _first(env, "SLURM_TASKS_PER_NODE")
    if per_node is None:
        return [HostSpec(name) for name in names]
    try:
        slots = hostlist.parse_slurm_tasks_per_node(per_node)
    except (ValueError, hostlist.BadHostlist) as exc:
        raise UsageError(f"SLURM_TASKS_PER_NODE={per_node!r}: {exc}") from None
    if len(slots) != len(names) or min(slots, default=1) < 1:
        raise UsageError(
            f"SLURM_TASKS_PER_NODE={per_node!r} does not give one count >= 1 to each of "
            f"the {len(names)} nodes of SLURM_JOB_NODELIST={nodelist!r}"
        )
    return [HostSpec(name, int(n)) for name, n in zip(names, slots, strict=True)]


def allocation_ntasks(env: Mapping[str, str]) -> int | None:
    """``SLURM_NTASKS`` (``-n`` of salloc/sbatch), None if unset; UsageError if not a number."""
    text = _first(env, "SLURM_NTASKS", "SLURM_NPROCS")
    if text is None:
        return None
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"SLURM_NTASKS={text!r} is not a positive number")
    return int(text)


def agent_step(
    hosts: Sequence[str], agent_cmd: Sequence[str], connect: str, quiet: bool
) -> list[str]:
    """The one ``srun`` that starts an agent on each of ``hosts`` (the token on its stdin)."""
    n = len(hosts)
    words = [*agent_cmd, "--connect", connect, "--token-file", "-", "--slurm"]
    return [
        *_SRUN,
        f"--nodes={n}",
        f"--ntasks={n}",
        "--ntasks-per-node=1",
        f"--nodelist={','.join(hosts)}",
        "--kill-on-bad-exit=1",
        "--input=all",
        "--mpi=none",
        "--cpu-bind=none",
        "--job-name=emuproxy",
        *words,
        *(["-q"] if quiet else []),
    ]


_ENDED = {
    "CANCELLED": (128 + 15, "was cancelled (scancel)"),
    "TIMEOUT": (EXIT_TIMEOUT, "reached its time limit"),
    "DEADLINE": (EXIT_TIMEOUT, "reached its deadline"),
    "PREEMPTED": (128 + 15, "was preempted"),
    "NODE_FAIL": (EXIT_LOST_HOST, "lost a node (NODE_FAIL)"),
    "BOOT_FAIL": (EXIT_LOST_HOST, "lost a node (BOOT_FAIL)"),
    "OUT_OF_MEMORY": (EXIT_LOST_HOST, "ran out of memory"),
    # the allocation is ending while emurun, its command, still runs: ended from outside
    # (scontrol shows no more while the step that runs the agents lives)
    "COMPLETING": (128 + 15, "is ending (scancel, its time limit or a lost node)"),
}
"""Slurm job states that end a job from outside: emurun's status and what to say."""


def ended_by(job_id: str, state: str | None) -> tuple[int, str] | None:
    """What a Slurm job state says about a job's end: (emurun's status, message), or None
    while the allocation runs on (the failure was the job's own)."""
    if state is None or state not in _ENDED:
        return None
    code, text = _ENDED[state]
    return code, f"the Slurm job {job_id} {text}"


def job_state(job_id: str, timeout: float = 10.0) -> str | None:
    """The Slurm job's state (``RUNNING``, ``CANCELLED``...), None if ``scontrol`` cannot
    tell."""
    return _scontrol_field(["job", job_id], "JobState", timeout)


def _scontrol_field(what: list[str], key: str, timeout: float) -> str | None:
    try:
        out = subprocess.run(
            ["scontrol", "show", *what, "--oneliner"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for word in out.split():
        k, sep, value = word.partition("=")
        if sep and k == key and value:
            return value
    return None


def node_address(name: str, timeout: float = 10.0) -> str:
    """The address Slurm reaches node ``name`` at (its ``NodeAddr``); ``name`` itself if
    ``scontrol`` cannot tell."""
    return _scontrol_field(["node", name], "NodeAddr", timeout) or name
