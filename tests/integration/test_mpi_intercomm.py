"""Collectives on an intercommunicator through emurun, as separate processes over nicd
(mpi_programs/intercomm_coll): groups of 1 and 2 at 3 nodes, 1 and 1 at 2."""

from __future__ import annotations

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("nodes", [2, 3])
def test_intercomm_collectives(nodes: int) -> None:
    result = mpirun(nodes, PROGRAMS / "intercomm_coll.py")
    assert result.code == 0, result.err
    assert result.lines("inter ok") == sorted(f"inter ok {r}" for r in range(nodes))
