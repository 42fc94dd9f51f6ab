"""The last resort after a job: kill what is left of it, unlink its segments, remove its run
directory.

Every process of a job (nicd, host, and whatever a host started) carries ``EMU_JOB_ID`` in
its environment; shared-memory segments are named ``emu_<job_id>_*`` in /dev/shm; socket
files live in the run directory. The sweep finds all three by those marks, so it also
cleans up after a host's own children, which the supervisor never saw.

A launcher that was killed (``kill -9 emurun``) cannot sweep. Its run directory names its
owner (``owner.json``: the launcher's pid, start time and pid namespace) and every process it
started carries ``EMU_JOB_OWNER`` = that pid, so the next launcher's `sweep_stale` finds jobs
whose owner is gone and sweeps exactly those: processes with both marks, the job's segments
(unless a live launcher runs a job of the same id), the directory. A job whose owner lives,
or whose owner cannot be told (no owner file, another pid namespace), is never touched.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil  # type: ignore[import-untyped,unused-ignore]

from emucluster.config import ENV_JOB_ID
from launcher.plan import shm_prefix

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "ENV_AGENT",
    "ENV_JOB_OWNER",
    "OWNER_FILE",
    "RUN_DIR_PREFIX",
    "SHM_DIR",
    "SweepReport",
    "adopt_orphans",
    "claim_run_dir",
    "job_processes",
    "job_segments",
    "reap_orphans",
    "sweep",
    "sweep_stale",
]

ENV_JOB_OWNER = "EMU_JOB_OWNER"  # the pid of the launcher that started the process
OWNER_FILE = "owner.json"  # in the run directory: {"pid", "started", "job", "pidns"}
RUN_DIR_PREFIX = "emurun-"  # run directories are <tmp>/emurun-<job>-<random>

SHM_DIR = Path("/dev/shm")
ENV_AGENT = "EMU_AGENT"
"""Marks the processes an agent (emuproxy) started, so its sweep spares other agents' ones."""
_KILL_WAIT_S = 5.0
_PR_SET_CHILD_SUBREAPER = 36


@dataclass(slots=True)
class SweepReport:
    """What the sweep found left over (empty after a clean job)."""

    killed: list[str] = field(default_factory=list)
    """``name[pid]`` of each process killed."""
    segments: list[str] = field(default_factory=list)
    """Shared-memory segments unlinked."""
    survivors: list[int] = field(default_factory=list)
    """Pids that would not die (should stay empty)."""

    def __bool__(self) -> bool:
        return bool(self.killed or self.segments or self.survivors)


def job_processes(
    job_id: str, owner: int | None = None, agent: str | None = None
) -> list[psutil.Process]:
    """Live processes (not zombies) whose environment says they belong to ``job_id`` (and,
    if ``owner`` is given, to the launcher with that pid; if ``agent`` is given, to that
    agent)."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            environ = proc.environ()
            if environ.get(ENV_JOB_ID) != job_id:
                continue
            if agent is not None and environ.get(ENV_AGENT) != agent:
                continue
            if owner is None or environ.get(ENV_JOB_OWNER) == str(owner):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def job_segments(
    job_id: str, shm_dir: Path = SHM_DIR, nodes: Iterable[int] | None = None
) -> list[Path]:
    """Shared-memory segments of ``job_id`` (only those of ``nodes``, if given)."""
    prefixes = (
        [shm_prefix(job_id)]
        if nodes is None
        else [f"{shm_prefix(job_id)}{node}_" for node in nodes]
    )
    try:
        return sorted({p for prefix in prefixes for p in shm_dir.glob(prefix + "*")})
    except OSError:
        return []


def sweep(
    job_id: str,
    run_dir: str | None,
    shm_dir: Path = SHM_DIR,
    *,
    owner: int | None = None,
    segments: bool = True,
    agent: str | None = None,
    nodes: Iterable[int] | None = None,
) -> SweepReport:
    """SIGKILL every process of the job (of ``owner``'s job when given), unlink its segments
    (if ``segments``), remove ``run_dir``; an agent passes its marker and its nodes, so it
    touches nothing of another agent on its kernel."""
    report = SweepReport()
    procs = job_processes(job_id, owner, agent)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            report.killed.append(f"{proc.name()}[{proc.pid}]")
            proc.kill()
    _, alive = psutil.wait_procs(procs, timeout=_KILL_WAIT_S)
    report.survivors = [p.pid for p in alive]
    for segment in job_segments(job_id, shm_dir, nodes) if segments else []:
        with contextlib.suppress(FileNotFoundError):
            segment.unlink()
            report.segments.append(segment.name)
    if run_dir is not None:
        shutil.rmtree(run_dir, ignore_errors=True)
    return report


def claim_run_dir(run_dir: str, job_id: str) -> None:
    """Write ``run_dir``'s owner file: this process, its start time, the job."""
    me = psutil.Process()
    doc = {"pid": me.pid, "started": me.create_time(), "job": job_id, "pidns": _pid_namespace()}
    with open(os.path.join(run_dir, OWNER_FILE), "w", encoding="utf-8") as f:
        json.dump(doc, f)


def _pid_namespace() -> str:
    """Our pid namespace (``pid:[4026531836]``): an owner pid means something only in it."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class _Owner:
    pid: int
    started: float
    job: str


def _read_owner(run_dir: Path) -> _Owner | None:
    try:
        doc = json.loads((run_dir / OWNER_FILE).read_text(encoding="utf-8"))
        owner = _Owner(int(doc["pid"]), float(doc["started"]), str(doc["job"]))
        namespace = str(doc.get("pidns", ""))
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    if namespace != _pid_namespace():
        return None  # another container's job, sharing this TMPDIR: we cannot tell its owner
    if not run_dir.name.startswith(f"{RUN_DIR_PREFIX}{owner.job}-"):
        return None
    return owner


def _alive(owner: _Owner) -> bool:
    """Whether ``owner``'s launcher still runs (the same process, not a reused pid)."""
    try:
        return abs(psutil.Process(owner.pid).create_time() - owner.started) < 1.0
    except psutil.NoSuchProcess:
        return False
    except (psutil.Error, OSError):
        return True  # cannot tell: leave it alone


def sweep_stale(tmp_dir: Path, shm_dir: Path = SHM_DIR) -> list[tuple[str, SweepReport]]:
    """Sweep every job under ``tmp_dir`` whose launcher is gone: its processes (those that
    name it as their owner), its segments (unless a live launcher runs the same job id), its
    run directory. Return (job id, what its sweep found) per job swept."""
    owners: dict[Path, _Owner] = {}
    with contextlib.suppress(OSError):
        for run_dir in tmp_dir.glob(f"{RUN_DIR_PREFIX}*"):
            owner = _read_owner(run_dir)
            if owner is not None and run_dir.is_dir():
                owners[run_dir] = owner
    alive = {run_dir: _alive(owner) for run_dir, owner in owners.items()}
    live_jobs = {owner.job for run_dir, owner in owners.items() if alive[run_dir]}
    found: list[tuple[str, SweepReport]] = []
    for run_dir, owner in owners.items():
        if alive[run_dir]:
            continue
        shared_id = owner.job in live_jobs  # a live launcher runs a job of the same id
        if shared_id and psutil.pid_exists(owner.pid):
            shutil.rmtree(run_dir, ignore_errors=True)  # its pid may be that launcher's now
            found.append((owner.job, SweepReport()))
            continue
        report = sweep(owner.job, str(run_dir), shm_dir, owner=owner.pid, segments=not shared_id)
        found.append((owner.job, report))
    return found


def adopt_orphans() -> None:
    """Make this process the reaper of its descendants' orphans (Linux child subreaper).

    A host's children outlive it; without this they would be re-parented to PID 1, which in
    a container may never reap them. With it they stay ours: the sweep finds them by their
    job id and :func:`reap_orphans` collects their exit status.
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_orphans() -> None:
    """Collect every exited child not waited for yet. Call only when no other code waits
    for children (after the supervisor reaped its own)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
