"""``emurun --mpi4py``: unmodified mpi4py programs get emucluster.MPI (issue 15)."""

from __future__ import annotations

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("nodes", [2, 3])
def test_mpi4py_program_runs_unmodified(nodes: int) -> None:
    result = mpirun(nodes, PROGRAMS / "mpi4py_program.py", emurun_args=("--mpi4py",))
    assert result.code == 0, result.err
    assert result.lines("mpi4py ok") == sorted(f"mpi4py ok {r}" for r in range(nodes))


def test_without_the_flag_mpi4py_is_not_emucluster() -> None:
    """Without --mpi4py the shim is not on the path: the import fails (no mpi4py installed)
    or finds the real mpi4py, whose vendor is not emucluster; either way the program fails."""
    result = mpirun(2, PROGRAMS / "mpi4py_program.py")
    assert result.code != 0
    assert "mpi4py ok" not in result.out
