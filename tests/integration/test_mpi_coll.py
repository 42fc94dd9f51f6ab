"""Every collective call through emurun on 1, 2, 3, 4 and 8 nodes (mpi_programs/coll_suite)."""

from __future__ import annotations

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("nodes", [1, 2, 3, 4, 8])
def test_coll_suite(nodes: int) -> None:
    result = mpirun(nodes, PROGRAMS / "coll_suite.py")
    assert result.code == 0, result.err
    assert result.lines("coll ok") == sorted(f"coll ok {r}" for r in range(nodes))


def test_coll_suite_with_other_algorithms() -> None:
    """The same results with non-default algorithms chosen by environment."""
    env = {
        "EMU_ALLREDUCE": "reduce-bcast",
        "EMU_ALLGATHER": "ring",
        "EMU_SCAN": "linear",
        "EMU_EXSCAN": "linear",
        "EMU_ALLTOALL": "scattered",
        "EMU_EAGER_LIMIT": "1024",
    }
    result = mpirun(3, PROGRAMS / "coll_suite.py", env=env)
    assert result.code == 0, result.err
    assert len(result.lines("coll ok")) == 3
