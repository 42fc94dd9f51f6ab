"""Every point-to-point call through emurun on 1, 2, 3, 4 and 8 nodes (mpi_programs/p2p_suite)."""

from __future__ import annotations

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("nodes", [1, 2, 3, 4, 8])
def test_p2p_suite(nodes: int) -> None:
    result = mpirun(nodes, PROGRAMS / "p2p_suite.py")
    assert result.code == 0, result.err
    assert result.lines("p2p ok") == sorted(f"p2p ok {r}" for r in range(nodes))


def test_p2p_suite_with_data_as_port_messages() -> None:
    """Rendezvous data as GM_DATA messages instead of RM writes, and the grouped LHS store."""
    env = {"EMU_RNDV_RM": "0", "EMU_MATCH_STORE": "lhs-grouped", "EMU_WAIT": "block"}
    result = mpirun(3, PROGRAMS / "p2p_suite.py", env=env)
    assert result.code == 0, result.err
    assert len(result.lines("p2p ok")) == 3
