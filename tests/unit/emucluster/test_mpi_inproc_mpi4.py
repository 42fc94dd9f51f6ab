"""The MPI 4.0 requests on an in-process job (tests/unit/mpisim.py): persistent collectives
started again and again with new data, and partitioned point-to-point, with exact values;
and generalized requests (the program completes them), alone and beside library requests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.unit.mpisim import MPI, run

I64 = np.int64


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_persistent_collectives_run_once_per_start_with_the_data_of_that_start(n: int) -> None:
    root = n - 1

    def body(comm: Any) -> Any:
        r = comm.rank
        bbuf = np.zeros(3, I64)
        sbuf = np.zeros(2, I64)
        rbuf = np.zeros(2, I64)
        gathered = np.zeros(2 * n, I64)
        counts = [k + 1 for k in range(n)]
        vsend = np.zeros(r + 1, I64)
        vrecv = np.zeros(sum(counts), I64)
        reqs = [
            comm.Bcast_init(bbuf, root=root),
            comm.Allreduce_init(sbuf, rbuf, MPI.SUM),
            comm.Allgather_init(sbuf, gathered),
            comm.Gatherv_init(vsend, [vrecv, counts] if r == root else None, root=root),
            comm.Barrier_init(),
        ]
        seen = []
        for round_ in range(3):
            if r == root:
                bbuf[:] = [round_, round_ + 1, round_ + 2]
            sbuf[:] = [r + round_, 10 * r]
            vsend[:] = 100 * round_ + r
            MPI.Prequest.Startall(reqs)
            MPI.Request.Waitall(reqs)
            seen.append((bbuf.tolist(), rbuf.tolist(), gathered.tolist(), vrecv.tolist()))
        alive = all(req != MPI.REQUEST_NULL for req in reqs)
        for req in reqs:
            req.Free()
        return seen, alive, all(req == MPI.REQUEST_NULL for req in reqs)

    results = run(n, body)
    ranks = range(n)
    for r, (seen, alive, freed) in enumerate(results):
        assert alive
        assert freed
        for round_, (bcast, allreduce, allgather, gatherv) in enumerate(seen):
            assert bcast == [round_, round_ + 1, round_ + 2]
            assert allreduce == [sum(k + round_ for k in ranks), sum(10 * k for k in ranks)]
            assert allgather == [v for k in ranks for v in (k + round_, 10 * k)]
            if r == root:
                assert gatherv == [100 * round_ + k for k in ranks for _ in range(k + 1)]


def test_a_persistent_collective_cannot_start_twice_before_it_completes() -> None:
    def body(comm: Any) -> Any:
        req = comm.Barrier_init()
        req.Start()
        with pytest.raises(MPI.Exception) as raised:
            req.Start()
        req.Wait()
        req.Free()
        return raised.value.Get_error_class()

    assert run(2, body) == [MPI.ERR_REQUEST] * 2


@pytest.mark.parametrize("partitions", [1, 3])
def test_partitioned_ring_arrives_once_every_part_is_ready(partitions: int) -> None:
    def body(comm: Any) -> Any:
        r, size = comm.rank, comm.size
        sbuf = np.zeros(2 * partitions, I64)
        rbuf = np.full(2 * partitions, -1, I64)
        sreq = comm.Psend_init(sbuf, partitions, (r + 1) % size, tag=5)
        rreq = comm.Precv_init(rbuf, partitions, (r - 1) % size, tag=5)
        rounds = []
        for round_ in range(2):
            sbuf[:] = 10 * round_ + r
            rreq.Start()
            early = [rreq.Parrived(i) for i in range(partitions)]
            comm.Barrier()
            sreq.Start()
            sreq.Pready_list(list(reversed(range(1, partitions))))
            comm.Barrier()
            before_last = [rreq.Parrived(i) for i in range(partitions)]
            comm.Barrier()
            sreq.Pready(0)
            while not all(rreq.Parrived(i) for i in range(partitions)):
                pass
            rreq.Wait()
            sreq.Wait()
            rounds.append((early, before_last, rbuf.tolist()))
            comm.Barrier()
        with pytest.raises(MPI.Exception):
            rreq.Pready(0)  # not a started send
        rreq.Free()
        sreq.Free()
        return rounds

    size = 3
    for r, rounds in enumerate(run(size, body)):
        for round_, (early, before_last, received) in enumerate(rounds):
            assert early == [False] * partitions
            assert before_last == [False] * partitions  # the message leaves with the last part
            assert received == [10 * round_ + (r - 1) % size] * (2 * partitions)


class _Calls:
    def __init__(self) -> None:
        self.log: list[Any] = []

    def query(self, status: Any, extra: int) -> None:
        self.log.append(("query", extra))
        status.Set_source(3)
        status.Set_tag(7)

    def free(self, extra: int) -> None:
        self.log.append(("free", extra))

    def cancel(self, completed: bool, extra: int) -> None:
        self.log.append(("cancel", completed))


def test_a_generalized_request_completes_when_the_program_says_so() -> None:
    from emucluster.mpi.request.grequest import Grequest

    calls = _Calls()
    greq = Grequest.Start(calls.query, calls.free, calls.cancel, args=(9,))
    assert not greq.Test()
    with pytest.raises(MPI.Exception) as raised:
        greq.Wait()  # nothing else could complete it: an error at once, not a hang
    assert raised.value.Get_error_class() == MPI.ERR_REQUEST
    greq.Cancel()
    greq.complete("done")
    greq.Cancel()
    status = MPI.Status()
    assert greq.test(status) == (True, "done")
    assert (status.Get_source(), status.Get_tag(), status.Get_error()) == (3, 7, MPI.SUCCESS)
    assert calls.log == [("cancel", False), ("cancel", True), ("query", 9), ("free", 9)]
    assert greq == MPI.REQUEST_NULL
    assert MPI.Request(Grequest.Start()) != MPI.REQUEST_NULL
    with pytest.raises(TypeError):
        MPI.Prequest(Grequest.Start())


def test_a_failing_callback_is_an_mpi_exception_and_the_request_still_frees() -> None:
    from emucluster.mpi.request.grequest import Grequest

    def query(status: Any) -> None:
        raise ValueError(42)

    freed = []
    greq = Grequest.Start(query, lambda: freed.append(True))
    greq.Complete()
    with pytest.raises(MPI.Exception) as raised:
        greq.Wait()
    assert raised.value.Get_error_class() == MPI.ERR_OTHER
    assert freed == [True]
    assert greq == MPI.REQUEST_NULL


def test_waitall_over_a_generalized_request_and_a_receive() -> None:
    from emucluster.mpi.request.grequest import Grequest

    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.send("hello", dest=1, tag=4)
            return None
        greq = Grequest.Start()
        greq.complete(5)
        return MPI.Request.waitall([comm.irecv(source=0, tag=4), greq])

    assert run(2, body)[1] == ["hello", 5]
