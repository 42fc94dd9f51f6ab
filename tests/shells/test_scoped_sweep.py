"""An agent's sweep is scoped: it kills only processes carrying its EMU_AGENT marker (and the
job id) and unlinks only its own nodes' segments, so agents sharing a kernel never clean up
each other (real processes, a temporary shared-memory directory)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

from launcher import cleanup

if TYPE_CHECKING:
    from pathlib import Path

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


def _sleeper(job: str, agent: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "EMU_JOB_ID": job, cleanup.ENV_AGENT: agent}
    return subprocess.Popen(SLEEP, env=env)


def test_only_this_agents_processes_and_nodes_are_swept(tmp_path: Path) -> None:
    job = f"sweep{os.getpid()}"
    mine, theirs = _sleeper(job, f"{job}.1"), _sleeper(job, f"{job}.2")
    for name in (f"emu_{job}_2_0_0", f"emu_{job}_3_0_0", f"emu_{job}_12_0_0", f"emu_{job}_4_0_0"):
        (tmp_path / name).write_bytes(b"x")
    try:
        report = cleanup.sweep(job, None, tmp_path, agent=f"{job}.1", nodes=[2, 3])
        assert [k.endswith(f"[{mine.pid}]") for k in report.killed] == [True]
        assert theirs.poll() is None  # another agent's process on the same kernel: untouched
        assert sorted(report.segments) == [f"emu_{job}_2_0_0", f"emu_{job}_3_0_0"]
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            f"emu_{job}_12_0_0", f"emu_{job}_4_0_0",
        ]  # fmt: skip
    finally:
        for proc in (mine, theirs):
            proc.kill()
            proc.wait()
