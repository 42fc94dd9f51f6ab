"""The in-process MPI harness itself (tests/unit/mpisim.py): results by rank, exceptions, stuck
jobs reported instead of hanging, deterministic schedules, process state kept per rank."""

from __future__ import annotations

import time
from typing import Any

import pytest

from emucluster.mpi import lifecycle
from emucluster.mpi.comm import group
from tests.unit.mpisim import MPI, SimJob, Stuck, run


def test_results_come_back_by_rank() -> None:
    assert run(4, lambda comm: (comm.Get_rank(), comm.Get_size())) == [(r, 4) for r in range(4)]


def test_a_rank_exception_is_re_raised_naming_the_rank() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 2:
            raise KeyError("boom")
        return comm.recv(source=2)  # never sent: the others wait and are unwound

    with pytest.raises(KeyError, match="boom") as info:
        run(3, body)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "raised on rank 2" in notes
    assert "rank 0: waits for input in Intracomm.recv" in notes


def test_a_deadlock_names_the_call_and_line_each_rank_waits_at() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 1:
            comm.recv(source=0, tag=77)
        return comm.rank

    with pytest.raises(Stuck, match=r"(?s)deadlock.*rank 0: finished.*rank 1: waits for input "
                                    r"in Intracomm\.recv \(called at test_mpi_inproc_harness\.py:"
                                    r"\d+ in body\)"):  # fmt: skip
        run(2, body)


def test_a_collective_one_rank_skips_is_a_deadlock() -> None:
    def body(comm: Any) -> Any:
        if comm.rank != 0:
            comm.Barrier()

    with pytest.raises(Stuck, match=r"rank 1: waits for input in Intracomm\.Barrier"):
        run(3, body)


def test_spinning_on_a_request_that_never_completes_is_a_livelock() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            req = comm.irecv(source=1, tag=3)
            while not req.Test():
                pass
        return None

    with pytest.raises(Stuck, match=r"livelock.*\n  rank 0: spins in poll in Request\.Test"):
        run(2, body)


def test_a_rank_that_keeps_the_baton_past_the_timeout_is_reported() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 1:
            time.sleep(0.3)  # no MPI call: the scheduler cannot take the baton back
        return None

    with pytest.raises(Stuck, match=r"rank 1 ran 0\.05 s without giving the baton back"):
        run(2, body, timeout=0.05)


def test_strict_jobs_fail_on_a_message_nobody_received() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.send("orphan", dest=1, tag=5)
        comm.Barrier()

    with pytest.raises(AssertionError, match="rank 1: 1 messages never received"):
        run(2, body)
    assert run(2, body, strict=False) == [None, None]


def test_the_same_seed_gives_the_same_schedule() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            return [comm.recv(source=MPI.ANY_SOURCE) for _ in range(comm.size - 1)]
        comm.send(comm.rank, dest=0)
        return None

    def arrival_order(seed: int | None) -> tuple[list[int], float]:
        job = SimJob(5, seed=seed)
        order = job.run(body)[0]
        assert isinstance(order, list)
        return order, job.net.now

    for seed in (None, 1, 2, 3):
        assert arrival_order(seed) == arrival_order(seed)
    orders = {tuple(arrival_order(seed)[0]) for seed in range(8)}
    assert len(orders) > 1  # seeds do explore other interleavings
    assert all(sorted(order) == [1, 2, 3, 4] for order in orders)


def test_process_state_is_per_rank_and_restored_after_the_run() -> None:
    before = lifecycle._runtime, group._local_node

    def body(comm: Any) -> Any:
        return lifecycle.current().node, comm.Get_group().Get_rank()

    assert run(3, body) == [(0, 0), (1, 1), (2, 2)]
    assert (lifecycle._runtime, group._local_node) == before
