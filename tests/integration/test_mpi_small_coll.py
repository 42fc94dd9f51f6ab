"""Every 8-byte Bcast, Reduce and Barrier algorithm through emurun on 1, 2, 3, 5 and 16 nodes
(mpi_programs/small_coll.py): the algorithms issue 17 compares, with correct results."""

from __future__ import annotations

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

pytestmark = pytest.mark.slow

FAULTS = ("--loss", "0.05", "--dup", "0.02", "--reorder", "0.02", "--fault-seed", "17")


@pytest.mark.parametrize("nodes", [1, 2, 3, 5, 16])
def test_every_small_message_algorithm(nodes: int) -> None:
    result = mpirun(nodes, PROGRAMS / "small_coll.py", timeout=600)
    assert result.code == 0, result.err
    assert result.lines("small ok") == sorted(f"small ok {r}" for r in range(nodes))


@pytest.mark.parametrize("faults", [False, True])
def test_nic_mcast_bcast_after_context_reuse(faults: bool) -> None:
    """Issue 17: on 4 nodes, after a Free, rank 3 got the bcast of the other pair's root and
    rank 2's NIC refused its multicast (the shell kept the freed communicator's groups and
    plan under the context id Split reused). With loss, old resends meet the new groups."""
    args = FAULTS if faults else ()
    result = mpirun(4, PROGRAMS / "mcast_reuse.py", emurun_args=args, timeout=120)
    assert result.code == 0, result.err
    assert result.lines("reuse ok") == sorted(f"reuse ok {r}" for r in range(4))
