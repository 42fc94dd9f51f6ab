"""Topologies and neighbour collectives through emurun on 1-4 and 6 nodes
(mpi_programs/topo_neighbors)."""

from __future__ import annotations

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("nodes", [1, 2, 3, 4, 6])
def test_topo_neighbors(nodes: int) -> None:
    result = mpirun(nodes, PROGRAMS / "topo_neighbors.py")
    assert result.code == 0, result.err
    assert result.lines("topo ok") == sorted(f"topo ok {r}" for r in range(nodes))
