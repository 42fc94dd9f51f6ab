"""Ranks started by a real PMI-1 launcher, not emurun: MPICH's Hydra ``mpiexec`` (from the
``mpich`` wheel of the test extra, or Debian's ``mpich``) runs ``python app.py`` and each rank
brings its own node up through the launcher's key-value space (``emucluster.pmi``).

Held-out kinds of program (collectives, a ring, ANY_SOURCE matching, an unmodified mpi4py
program), both ways Hydra offers PMI (the inherited descriptor and ``-pmi-port``), a failing
rank's exit code through mpiexec, the EMU_* variables (statistics, faults) from ``-genv``, and
after every job no nicd left. ``srun --mpi=pmi2`` runs the same way when a test Slurm is up
(``EMUCLUSTER_SLURM_TESTS=1``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emucluster.mpi4py_shim import SHIM_PATH
from tests.integration import slurm_cluster

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).parent / "mpi_programs"
WAIT_S = 150.0


def _hydra() -> str | None:
    beside = Path(sys.executable).parent / "mpiexec.hydra"
    if beside.exists():
        return str(beside)
    return shutil.which("mpiexec.hydra")


MPIEXEC = _hydra()
needs_hydra = pytest.mark.skipif(
    MPIEXEC is None,
    reason="no mpiexec.hydra: install the test extra (the mpich wheel) or Debian's mpich",
)


@pytest.fixture
def tmpdir_() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="emupmi-", dir="/tmp")  # short: socket paths
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(
    launcher: list[str],
    program: Path | str,
    *args: str,
    tmp: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*launcher, sys.executable, str(program), *args],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env={**os.environ, "TMPDIR": tmp, **(env or {})},
        cwd=ROOT,
        check=False,
    )


def nicds_of(tmp: str) -> list[str]:
    """Command lines of the nicds whose run directory is under ``tmp`` (this test's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = " ".join(a.decode(errors="replace") for a in argv)
        if "nicd" in text and f"--run-dir {tmp}/" in text:
            found.append(f"{entry.name}: {text}")
    return found


def assert_nothing_left(tmp: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while (left := nicds_of(tmp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, left


def ok_lines(out: str, prefix: str) -> list[str]:
    """Every ``PREFIX <rank>`` in ``out``, sorted: Hydra forwards the ranks' writes as they
    come, so two ranks' lines may share one line of its output (emurun keeps lines whole)."""
    return sorted(f"{prefix} {rank}" for rank in re.findall(rf"{re.escape(prefix)} (\d+)", out))


@needs_hydra
def test_collectives_and_any_source_under_hydra(tmpdir_: str) -> None:
    assert MPIEXEC is not None
    result = run([MPIEXEC, "-n", "4"], PROGRAMS / "coll_suite.py", tmp=tmpdir_)
    assert result.returncode == 0, result.stderr[-3000:]
    assert ok_lines(result.stdout, "coll ok") == [f"coll ok {r}" for r in range(4)]
    assert_nothing_left(tmpdir_)
    assert not list(Path(tmpdir_).glob("emu-*")), "a run directory was left"


@needs_hydra
def test_point_to_point_under_hydra(tmpdir_: str) -> None:
    assert MPIEXEC is not None
    result = run([MPIEXEC, "-n", "3"], PROGRAMS / "p2p_suite.py", tmp=tmpdir_)
    assert result.returncode == 0, result.stderr[-3000:]
    assert ok_lines(result.stdout, "p2p ok") == [f"p2p ok {r}" for r in range(3)]
    assert_nothing_left(tmpdir_)


@needs_hydra
def test_a_ring_over_the_pmi_port(tmpdir_: str) -> None:
    assert MPIEXEC is not None
    result = run([MPIEXEC, "-pmi-port", "-n", "3"], ROOT / "examples" / "ring.py", tmp=tmpdir_)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "count 30 (expected 30)" in result.stdout
    assert_nothing_left(tmpdir_)


@needs_hydra
def test_an_unmodified_mpi4py_program(tmpdir_: str) -> None:
    assert MPIEXEC is not None
    launcher = [MPIEXEC, "-n", "2", "-genv", "PYTHONPATH", SHIM_PATH]
    result = run(launcher, PROGRAMS / "mpi4py_program.py", tmp=tmpdir_)
    assert result.returncode == 0, result.stderr[-3000:]
    assert ok_lines(result.stdout, "mpi4py ok") == ["mpi4py ok 0", "mpi4py ok 1"]
    assert_nothing_left(tmpdir_)


@needs_hydra
def test_emu_variables_reach_ranks_and_nicds(tmpdir_: str) -> None:
    """-genv EMU_STATS_DIR and EMU_LOSS: statistics of every rank and nicd are written, and
    each nicd injected loss (its own seed) that the transport recovered."""
    assert MPIEXEC is not None
    stats = Path(tmpdir_) / "stats"
    launcher = [MPIEXEC, "-n", "2", "-genv", "EMU_STATS_DIR", str(stats)]
    launcher += ["-genv", "EMU_LOSS", "0.05", "-genv", "EMU_FAULT_SEED", "3"]
    result = run(launcher, PROGRAMS / "p2p_suite.py", tmp=tmpdir_)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in stats.iterdir()) == [
        "nic0.json", "nic1.json", "rank0.json", "rank1.json"
    ]  # fmt: skip
    dropped = [
        json.loads((stats / f"nic{n}.json").read_text())["faults"]["dropped"] for n in (0, 1)
    ]
    assert all(d > 0 for d in dropped), dropped
    assert_nothing_left(tmpdir_)


@needs_hydra
def test_abort_ends_the_job_with_its_code(tmpdir_: str) -> None:
    assert MPIEXEC is not None
    result = run([MPIEXEC, "-n", "4"], PROGRAMS / "failing.py", "abort", tmp=tmpdir_)
    assert result.returncode == 7, result.stderr[-3000:]
    assert "MPI_Abort(errorcode=7) called by rank 3" in result.stderr
    assert_nothing_left(tmpdir_)


@needs_hydra
def test_an_uncaught_exception_fails_the_job(tmpdir_: str) -> None:
    """Hydra reports the failure with the failing rank's status or that of the ranks it then
    killed (not 0, either way)."""
    assert MPIEXEC is not None
    result = run([MPIEXEC, "-n", "4"], PROGRAMS / "failing.py", "raise", tmp=tmpdir_)
    assert result.returncode != 0
    assert "boom from rank 1" in result.stderr
    assert "rank 1 ended by an uncaught RuntimeError" in result.stderr
    assert_nothing_left(tmpdir_)
    # the failing rank cleaned up after itself; those Hydra killed could not
    assert not list(Path(tmpdir_).glob("emu-*-1-*")), "rank 1 left its run directory"


def test_srun_mpi_pmi2_runs_a_job(tmpdir_: str) -> None:
    """``srun --mpi=pmi2 -n 4 python app.py`` on the test Slurm (`slurm_cluster`: the one CI
    started, or one started here; skipped where Slurm cannot run): Slurm's pmi2 plugin also
    speaks PMI-1."""
    cluster, started = slurm_cluster.start_or_find()
    try:
        env = {"SLURM_CONF": cluster.conf}
        srun = ["srun", "--mpi=pmi2", "--cpu-bind=none"]
        result = run([*srun, "-n", "4"], PROGRAMS / "coll_suite.py", tmp=tmpdir_, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        assert ok_lines(result.stdout, "coll ok") == [f"coll ok {r}" for r in range(4)]
        failed = run([*srun, "-n", "3"], PROGRAMS / "failing.py", "abort", tmp=tmpdir_, env=env)
        assert failed.returncode != 0
        assert "MPI_Abort(errorcode=7)" in failed.stderr
        assert_nothing_left(tmpdir_)
    finally:
        if started is not None:
            slurm_cluster.stop(started)
