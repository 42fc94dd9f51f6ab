"""One-sided communication executed by the NIC, through emurun on 2 and 3 nodes
(mpi_programs/rma_suite): a passive-target epoch completes while the target busy-loops in
pure Python, fetch-and-add is atomic, Fence/PSCW/request forms move the right bytes;
``memoryview(win)`` is the memory the NIC reaches (mpi_programs/rma_buffer), on Python 3.12 and
on 3.11 where the PEP 688 backport (emucluster.pep688) is built."""

from __future__ import annotations

import pytest

from emucluster.pep688 import EXPORTS
from tests.integration.mpirun import PROGRAMS, mpirun

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("nodes", [2, 3, 5])  # 5: Fence meets the others in a barrier
def test_rma_suite(nodes: int) -> None:
    result = mpirun(nodes, PROGRAMS / "rma_suite.py", timeout=240.0)
    assert result.code == 0, result.err
    assert result.lines("rma ok") == sorted(f"rma ok {r}" for r in range(nodes))


@pytest.mark.parametrize("nodes", [3, 4])
def test_locks_queued_at_the_nic_exclude_and_nobody_starves(nodes: int) -> None:
    """mpi_programs/rma_locks: writers' read-modify-writes under exclusive locks lose no
    update and never overlap a shared reader, while rank 0 reads under shared locks back to
    back; every writer finishes its rounds."""
    result = mpirun(nodes, PROGRAMS / "rma_locks.py", timeout=240.0)
    assert result.code == 0, result.err
    lines = sorted(result.lines("locks ok"))
    assert [line.split()[2] for line in lines] == [str(r) for r in range(nodes)]
    assert all(line.split()[3] == "12" for line in lines[1:])  # every writer's rounds


@pytest.mark.parametrize("mode", ["nic", "host"])
def test_passive_target_progress_is_the_nics_or_waits_for_the_target_host(mode: str) -> None:
    """mpi_programs/rma_stall: the NIC completes an epoch while the target computes; the
    host-driven baseline (EMU_RMA_PROGRESS=host) completes it only after the target's loop."""
    result = mpirun(2, PROGRAMS / "rma_stall.py", env={"EMU_RMA_PROGRESS": mode}, timeout=240.0)
    assert result.code == 0, result.err
    assert result.lines("stall") == [f"stall {mode} {r} ok" for r in range(2)]


@pytest.mark.parametrize("nodes", [3])
def test_host_driven_locks_exclude_and_nobody_starves(nodes: int) -> None:
    """The lock contention program in the host-driven mode (the target host keeps the queue)."""
    result = mpirun(nodes, PROGRAMS / "rma_locks.py", env={"EMU_RMA_PROGRESS": "host"},
                    timeout=240.0)  # fmt: skip
    assert result.code == 0, result.err
    assert len(result.lines("locks ok")) == nodes


@pytest.mark.skipif(not EXPORTS, reason="Python 3.11 without the C extension exports no buffer")
@pytest.mark.parametrize("nodes", [2, 3])
def test_memoryview_of_a_window_is_the_memory_other_ranks_reach(nodes: int) -> None:
    """mpi_programs/rma_buffer: stores through ``memoryview(win)`` are what other ranks Get,
    their Put and Fetch_and_op show in it after Sync (Allocate and Create windows); a dynamic
    window exports no bytes and a freed one raises ERR_WIN."""
    result = mpirun(nodes, PROGRAMS / "rma_buffer.py", timeout=240.0)
    assert result.code == 0, result.err
    assert result.lines("view ok") == sorted(f"view ok {r}" for r in range(nodes))
