"""Run an MPI program under emurun for the integration tests (own job id and TMPDIR)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).parent / "mpi_programs"
EXAMPLES = ROOT / "examples"
EMURUN = [sys.executable, "-m", "launcher.cli"]
WAIT_S = 150.0


@dataclass
class Result:
    code: int
    out: str
    err: str

    def lines(self, prefix: str) -> list[str]:
        """Output lines starting with ``prefix``."""
        return sorted(line for line in self.out.splitlines() if line.startswith(prefix))


def mpirun(
    np_: int,
    program: Path | str,
    *args: str,
    emurun_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    timeout: float = WAIT_S,
) -> Result:
    """``emurun -np N [emurun_args] python PROGRAM ARGS``; returns code, stdout, stderr."""
    tmpdir = tempfile.mkdtemp(prefix="emumpi-", dir="/tmp")  # short: socket paths
    job = uuid.uuid4().hex[:12]
    argv = [*EMURUN, "-np", str(np_), "-q", "--job-id", job, "--timeout", str(int(timeout - 20)),
            *emurun_args, sys.executable, str(program), *args]  # fmt: skip
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            timeout=timeout,
            env={**os.environ, "TMPDIR": tmpdir, **(env or {})},
            cwd=ROOT,
            check=False,
        )
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
