"""One-sided communication executed by the NIC, through emurun on 2 and 3 nodes
(mpi_programs/rma_suite): a passive-target epoch completes while the target busy-loops in
pure Python, fetch-and-add is atomic, Fence/PSCW/request forms move the right bytes."""

from __future__ import annotations

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("nodes", [2, 3])
def test_rma_suite(nodes: int) -> None:
    result = mpirun(nodes, PROGRAMS / "rma_suite.py", timeout=240.0)
    assert result.code == 0, result.err
    assert result.lines("rma ok") == sorted(f"rma ok {r}" for r in range(nodes))
