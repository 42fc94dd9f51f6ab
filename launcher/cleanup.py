"""The last resort after a job: kill what is left of it, unlink its segments, remove its run
directory.

Every process of a job (nicd, host, and whatever a host started) carries ``EMU_JOB_ID`` in
its environment; shared-memory segments are named ``emu_<job_id>_*`` in /dev/shm; socket
files live in the run directory. The sweep finds all three by those marks, so it also
cleans up after a host's own children, which the supervisor never saw.
"""

from __future__ import annotations

import contextlib
import ctypes
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
    "SHM_DIR",
    "SweepReport",
    "adopt_orphans",
    "job_processes",
    "job_segments",
    "reap_orphans",
    "sweep",
]

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


def job_processes(job_id: str, agent: str | None = None) -> list[psutil.Process]:
    """Live processes (not zombies) whose environment says they belong to ``job_id`` (and,
    if given, to ``agent``)."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            environ = proc.environ()
            if environ.get(ENV_JOB_ID) == job_id and (
                agent is None or environ.get(ENV_AGENT) == agent
            ):
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
    agent: str | None = None,
    nodes: Iterable[int] | None = None,
) -> SweepReport:
    """SIGKILL every process of the job, unlink its segments, remove ``run_dir``; an agent
    passes its marker and its nodes, so it touches nothing of another agent on its kernel."""
    report = SweepReport()
    procs = job_processes(job_id, agent)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            report.killed.append(f"{proc.name()}[{proc.pid}]")
            proc.kill()
    _, alive = psutil.wait_procs(procs, timeout=_KILL_WAIT_S)
    report.survivors = [p.pid for p in alive]
    for segment in job_segments(job_id, shm_dir, nodes):
        with contextlib.suppress(FileNotFoundError):
            segment.unlink()
            report.segments.append(segment.name)
    if run_dir is not None:
        shutil.rmtree(run_dir, ignore_errors=True)
    return report


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
