"""The test Slurm of the Slurm tests: the one ``SLURM_CONF`` names if its controller answers
(``.ci/run`` starts it with ``slurm/slurm-up.sh``), else a private one started here with the
same script and stopped at the end; skipped with the reason where neither can be had.
``EMUCLUSTER_SLURM_TESTS=1`` (CI) turns every such skip into a failure.

Also the tools to look for what a job left behind: every process of a test carries a marker
variable in its environment (salloc, sbatch and srun pass the environment down), so a scan
of ``/proc/*/environ`` finds any survivor, whoever its parent is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMANDED = os.environ.get("EMUCLUSTER_SLURM_TESTS") == "1"
MARK = "EMU_SLURM_TEST_MARK"


@dataclass(frozen=True)
class SlurmCluster:
    """A running test Slurm: its ``SLURM_CONF`` and node names."""

    conf: str
    nodes: tuple[str, ...]

    def env(self, **extra: str) -> dict[str, str]:
        """os.environ for a client command of this cluster (no allocation of pytest's own)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**env, "SLURM_CONF": self.conf, **extra}


def _unavailable(reason: str) -> None:
    if DEMANDED:
        pytest.fail(f"EMUCLUSTER_SLURM_TESTS=1 but {reason}")
    pytest.skip(reason)


def _answers(conf: str) -> tuple[str, ...] | None:
    env = {**os.environ, "SLURM_CONF": conf}
    try:
        argv = ["sinfo", "-h", "-N", "-t", "idle,mix,alloc", "-o", "%N"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env,
                              check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    names = tuple(sorted(set(done.stdout.split())))
    return names if done.returncode == 0 and names else None


def start_or_find() -> tuple[SlurmCluster, str | None]:
    """The running test Slurm, or one started now (its directory, to stop, as second item)."""
    conf = os.environ.get("SLURM_CONF")
    if conf and os.path.exists(conf) and (nodes := _answers(conf)):
        return SlurmCluster(conf, nodes), None
    missing = [t for t in ("slurmctld", "slurmd", "salloc", "sbatch") if not shutil.which(t)]
    if missing:
        _unavailable(f"no test Slurm: {', '.join(missing)} not installed "
                     "(apt-get install slurmctld slurmd slurm-client)")  # fmt: skip
    if os.geteuid() != 0:
        _unavailable("no test Slurm: slurmd must run as root")
    where = tempfile.mkdtemp(prefix="emuslurm-", dir="/tmp")
    env = {**os.environ, "SLURM_UP_DIR": where, "SLURM_NODES": "3"}
    done = subprocess.run([str(ROOT / "slurm" / "slurm-up.sh")], capture_output=True, text=True,
                          timeout=180, env=env, check=False)  # fmt: skip
    conf = os.path.join(where, "slurm.conf")
    if done.returncode != 0 or not (nodes := _answers(conf)):
        stop(where)
        _unavailable(f"slurm/slurm-up.sh failed: {done.stdout}{done.stderr}")
    return SlurmCluster(conf, nodes), where


def stop(where: str) -> None:
    """Stop the test Slurm started in ``where`` and remove it."""
    subprocess.run([str(ROOT / "slurm" / "slurm-down.sh"), where], capture_output=True,
                   timeout=60, check=False)  # fmt: skip
    shutil.rmtree(where, ignore_errors=True)


def marked(mark: str) -> dict[int, list[bytes]]:
    """The processes whose environment carries ``MARK=mark`` (pytest itself excluded), with
    their command lines."""
    needle = f"{MARK}={mark}".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        proc = Path("/proc", entry)
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                found[int(entry)] = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
    return found


def wait_none_left(mark: str, timeout: float = 30.0) -> dict[int, list[bytes]]:
    """Wait until no process carries the mark; those still there after ``timeout``."""
    deadline = time.monotonic() + timeout
    while (left := marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
