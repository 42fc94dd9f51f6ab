"""Every collective of ``Intercomm`` on an in-process job (tests/unit/mpisim.py): 2 to 5 ranks
split into two groups of different sizes (the low group the smaller or the larger), roots
other than 0 in either group, blocking, nonblocking and persistent forms, lowercase and
uppercase, under the round-robin schedule and seeded random ones (one with a small eager
limit, so blocks travel by rendezvous), with exact values: the result always comes from the
other group."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.unit.mpisim import MPI, run

GROUPS = [(2, 1), (3, 1), (3, 2), (4, 3), (5, 2)]
"""(ranks, size of the low group): 1|1, 1|2, 2|1, 3|1, 2|3."""
SCHEDULES = [{}, {"seed": 5}, {"seed": 23, "eager_limit": 64}]
CASES = [(n, low, sched) for n, low in GROUPS for sched in range(len(SCHEDULES))]

I64 = np.int64


def _members(n: int, low: int, color: int) -> list[int]:
    """World ranks of group ``color`` (0: the low ranks)."""
    return list(range(low)) if color == 0 else list(range(low, n))


def _split(comm: Any, low: int) -> tuple[Any, Any, int]:
    """(the group's intracommunicator, the intercommunicator, color)."""
    color = 0 if comm.rank < low else 1
    half = comm.Split(color, key=comm.rank)
    inter = half.Create_intercomm(0, comm, low if color == 0 else 0, tag=5)
    return half, inter, color


def _root(inter: Any, color: int, root_color: int) -> int:
    """The root argument when the last process of group ``root_color`` is the root."""
    if color == root_color:
        return MPI.ROOT if inter.rank == inter.size - 1 else MPI.PROC_NULL
    return inter.remote_size - 1


def _issue(inter: Any, name: str, *args: Any, **kwargs: Any) -> None:
    """Run collective ``name`` to completion: blocking, nonblocking (waited for) or
    persistent (``*_init``: started and completed twice, then freed)."""
    result = getattr(inter, name)(*args, **kwargs)
    if name.endswith("_init"):
        for _ in range(2):
            result.Start()
            result.Wait()
        result.Free()
    elif result is not None:
        result.Wait()


def _run(n: int, low: int, sched: int, body: Any) -> list[Any]:
    """``body(comm, inter, color, theirs)`` on every rank (``theirs``: the other group's
    world ranks); the intercommunicator and the halves are freed after."""

    def program(comm: Any) -> Any:
        half, inter, color = _split(comm, low)
        theirs = _members(n, low, 1 - color)
        result = body(comm, inter, color, theirs)
        inter.Free()
        half.Free()
        return color, result

    return run(n, program, **SCHEDULES[sched])


@pytest.mark.parametrize(("n", "low", "sched"), CASES)
def test_barrier(n: int, low: int, sched: int) -> None:
    def body(comm: Any, inter: Any, color: int, theirs: list[int]) -> Any:
        inter.barrier()
        for form in ("Barrier", "Ibarrier", "Barrier_init"):
            _issue(inter, form)
        return True

    assert all(ok for _, ok in _run(n, low, sched, body))


@pytest.mark.parametrize(("n", "low", "sched"), CASES)
def test_bcast(n: int, low: int, sched: int) -> None:
    def body(comm: Any, inter: Any, color: int, theirs: list[int]) -> Any:
        got = []
        for root_color in (0, 1):
            root = _root(inter, color, root_color)
            obj = {"from": comm.rank, "data": list(range(5))} if root == MPI.ROOT else None
            got.append(inter.bcast(obj, root=root))
            for form in ("Bcast", "Ibcast", "Bcast_init"):
                buf = (np.arange(9, dtype=I64) + 100 * comm.rank if root == MPI.ROOT
                       else np.full(9, -1, dtype=I64))  # fmt: skip
                _issue(inter, form, buf, root=root)
                got.append(buf.tolist() if root >= 0 else None)
        return got

    for color, got in _run(n, low, sched, body):
        theirs = _members(n, low, 1 - color)
        # as a receiver, the root is the last process of the other group
        if color == 0:
            first = [None] * 4
            second = [{"from": theirs[-1], "data": list(range(5))}] + [
                (np.arange(9) + 100 * theirs[-1]).tolist()] * 3  # fmt: skip
        else:
            first = [{"from": theirs[-1], "data": list(range(5))}] + [
                (np.arange(9) + 100 * theirs[-1]).tolist()] * 3  # fmt: skip
            second = [None] * 4
        assert got == first + second


@pytest.mark.parametrize(("n", "low", "sched"), CASES)
def test_gather(n: int, low: int, sched: int) -> None:
    def body(comm: Any, inter: Any, color: int, theirs: list[int]) -> Any:
        rs = inter.remote_size
        got: list[Any] = []
        for root_color in (0, 1):
            root = _root(inter, color, root_color)
            got.append(inter.gather(("g", comm.rank), root=root))
            for form in ("Gather", "Igather", "Gather_init", "Gatherv", "Igatherv",
                         "Gatherv_init"):  # fmt: skip
                mine = np.array([comm.rank, comm.rank * 10], dtype=I64)
                recv = np.full((rs, 2), -1, dtype=I64) if root == MPI.ROOT else None
                if "v" in form:
                    # the other group's blocks land in reverse order, one slot apart
                    recv = None if recv is None else [
                        np.full(3 * rs, -1, dtype=I64), [2] * rs,
                        [3 * (rs - 1 - i) for i in range(rs)], MPI.INT64_T]  # fmt: skip
                _issue(inter, form, None if root == MPI.ROOT else mine, recv, root=root)
                if isinstance(recv, list):
                    recv = recv[0]
                got.append(None if recv is None else recv.tolist())
        return got

    for rank, (color, got) in enumerate(_run(n, low, sched, body)):
        theirs = _members(n, low, 1 - color)
        mine = _members(n, low, color)
        is_root = rank == mine[-1]
        plain = [[r, 10 * r] for r in theirs]
        rev: list[int] = []
        for r in reversed(theirs):
            rev += [r, 10 * r, -1]
        expect_root = [[("g", r) for r in theirs], plain, plain, plain, rev, rev, rev]
        as_root = expect_root if is_root else [None] * 7
        as_sender = [None] * 7
        want = as_root + as_sender if color == 0 else as_sender + as_root
        assert got == want, rank


@pytest.mark.parametrize(("n", "low", "sched"), CASES)
def test_scatter(n: int, low: int, sched: int) -> None:
    def body(comm: Any, inter: Any, color: int, theirs: list[int]) -> Any:
        rs = inter.remote_size
        got: list[Any] = []
        for root_color in (0, 1):
            root = _root(inter, color, root_color)
            items = [("s", comm.rank, j) for j in range(rs)] if root == MPI.ROOT else None
            got.append(inter.scatter(items, root=root))
            assert inter.scatter(None, root=root) is None  # None: a None for each
            send = np.array([[comm.rank, j] for j in range(rs)], dtype=I64)
            for form in ("Scatter", "Iscatter", "Scatter_init", "Scatterv", "Iscatterv",
                         "Scatterv_init"):  # fmt: skip
                recv = np.full(2, -1, dtype=I64) if root >= 0 else None
                sbuf = send if root == MPI.ROOT else None
                if "v" in form and root == MPI.ROOT:  # block j from row rs-1-j
                    sbuf = [send, [2] * rs, [2 * (rs - 1 - j) for j in range(rs)], MPI.INT64_T]
                _issue(inter, form, sbuf, recv, root=root)
                got.append(None if recv is None else recv.tolist())
        return got

    for rank, (color, got) in enumerate(_run(n, low, sched, body)):
        theirs = _members(n, low, 1 - color)
        mine = _members(n, low, color)
        j = mine.index(rank)
        root = theirs[-1]
        size = len(mine)
        received = [("s", root, j)] + [[root, j]] * 3 + [[root, size - 1 - j]] * 3
        nothing = [None] * 7
        want = nothing + received if color == 0 else received + nothing
        assert got == want, rank


@pytest.mark.parametrize(("n", "low", "sched"), CASES)
def test_allgather(n: int, low: int, sched: int) -> None:
    def body(comm: Any, inter: Any, color: int, theirs: list[int]) -> Any:
        rs = inter.remote_size
        got: list[Any] = [inter.allgather(("a", comm.rank))]
        # the low group sends 1 element each, the high group 3: counts differ by direction
        mine_count = 1 if color == 0 else 3
        their_count = 3 if color == 0 else 1
        mine = np.full(mine_count, comm.rank, dtype=I64)

        for form in ("Allgather", "Iallgather", "Allgather_init"):
            recv = np.full((rs, their_count), -1, dtype=I64)
            _issue(inter, form, mine, recv)
            got.append(recv.ravel().tolist())
        # v: block i at displacement (rs - 1 - i) * (their_count + 1)
        for form in ("Allgatherv", "Iallgatherv", "Allgatherv_init"):
            stride = their_count + 1
            buf = np.full(rs * stride, -1, dtype=I64)
            displs = [(rs - 1 - i) * stride for i in range(rs)]
            _issue(inter, form, mine, [buf, [their_count] * rs, displs, MPI.INT64_T])
            got.append(buf.tolist())
        return got

    for color, got in _run(n, low, sched, body):
        theirs = _members(n, low, 1 - color)
        count = 3 if color == 0 else 1
        flat = [r for r in theirs for _ in range(count)]
        v: list[int] = []
        for r in reversed(theirs):
            v += [r] * count + [-1]
        assert got == [[("a", r) for r in theirs], flat, flat, flat, v, v, v]


@pytest.mark.parametrize(("n", "low", "sched"), CASES)
def test_alltoall(n: int, low: int, sched: int) -> None:
    def body(comm: Any, inter: Any, color: int, theirs: list[int]) -> Any:
        rs = inter.remote_size
        got: list[Any] = [inter.alltoall([("t", comm.rank, j) for j in range(rs)])]
        assert inter.alltoall(None) == [None] * rs  # None stands for rs Nones, as in mpi4py
        send = np.array([[comm.rank, j] for j in range(rs)], dtype=I64)
        for form in ("Alltoall", "Ialltoall", "Alltoall_init"):
            recv = np.full((rs, 2), -1, dtype=I64)
            _issue(inter, form, send, recv)
            got.append(recv.tolist())
        # v and w: receive block i into row rs - 1 - i
        for form in ("Alltoallv", "Ialltoallv", "Alltoallv_init", "Alltoallw", "Ialltoallw",
                     "Alltoallw_init"):  # fmt: skip
            recv = np.full((rs, 2), -1, dtype=I64)
            if "v" in form:
                rspec = [recv, [2] * rs, [2 * (rs - 1 - i) for i in range(rs)], MPI.INT64_T]
                sspec = [send, [2] * rs, [2 * i for i in range(rs)], MPI.INT64_T]
            else:
                rspec = [recv, ([2] * rs, [16 * (rs - 1 - i) for i in range(rs)]),
                         [MPI.INT64_T] * rs]  # fmt: skip
                sspec = [send, ([2] * rs, [16 * i for i in range(rs)]), [MPI.INT64_T] * rs]
            _issue(inter, form, sspec, rspec)
            got.append(recv.tolist())
        return got

    for rank, (color, got) in enumerate(_run(n, low, sched, body)):
        theirs = _members(n, low, 1 - color)
        j = _members(n, low, color).index(rank)
        plain = [[r, j] for r in theirs]
        assert got == [[("t", r, j) for r in theirs], plain, plain, plain] + [plain[::-1]] * 6


@pytest.mark.parametrize(("n", "low", "sched"), CASES)
def test_reduce(n: int, low: int, sched: int) -> None:
    def body(comm: Any, inter: Any, color: int, theirs: list[int]) -> Any:
        got: list[Any] = []
        for root_color in (0, 1):
            root = _root(inter, color, root_color)
            # lists under SUM concatenate: the order shows the reduction runs in rank order
            got.append(inter.reduce([comm.rank], op=MPI.SUM, root=root))
            got.append(inter.reduce(comm.rank, op=MPI.MAX, root=root))
            send = np.array([comm.rank + 1, 2, comm.rank], dtype=I64)
            for form in ("Reduce", "Ireduce", "Reduce_init"):
                recv = np.full(3, -1, dtype=I64) if root == MPI.ROOT else None
                sbuf = None if root < 0 else send
                _issue(inter, form, sbuf, recv, op=MPI.PROD, root=root)
                got.append(None if recv is None else recv.tolist())
        return got

    for rank, (color, got) in enumerate(_run(n, low, sched, body)):
        theirs = _members(n, low, 1 - color)
        is_root = rank == _members(n, low, color)[-1]
        prod = [int(np.prod([r + 1 for r in theirs])), 2 ** len(theirs),
                int(np.prod(theirs))]  # fmt: skip
        as_root = [theirs, max(theirs), prod, prod, prod] if is_root else [None] * 5
        as_sender = [None] * 5
        assert got == (as_root + as_sender if color == 0 else as_sender + as_root), rank


@pytest.mark.parametrize(("n", "low", "sched"), CASES)
def test_allreduce(n: int, low: int, sched: int) -> None:
    def body(comm: Any, inter: Any, color: int, theirs: list[int]) -> Any:
        got: list[Any] = [inter.allreduce([comm.rank], op=MPI.SUM),
                          inter.allreduce(comm.rank, op=MPI.MIN)]  # fmt: skip
        send = np.array([comm.rank, 1, -comm.rank], dtype=I64)
        for form in ("Allreduce", "Iallreduce", "Allreduce_init"):
            recv = np.full(3, -1, dtype=I64)
            _issue(inter, form, send, recv, op=MPI.SUM)
            got.append(recv.tolist())
        return got

    for color, got in _run(n, low, sched, body):
        theirs = _members(n, low, 1 - color)
        total = [sum(theirs), len(theirs), -sum(theirs)]
        assert got == [theirs, min(theirs), total, total, total]


@pytest.mark.parametrize(("n", "low", "sched"), CASES)
def test_reduce_scatter(n: int, low: int, sched: int) -> None:
    """Both groups reduce vectors of the same length (the product of the two sizes): each
    group's reduction is cut by the *other* group's counts."""

    def body(comm: Any, inter: Any, color: int, theirs: list[int]) -> Any:
        size, rs = inter.size, inter.remote_size
        total = size * rs
        send = np.arange(total, dtype=I64) * (comm.rank + 1)
        got: list[Any] = []
        # block: every process of this group keeps rs elements (size * rs = total)
        for form in ("Reduce_scatter_block", "Ireduce_scatter_block",
                     "Reduce_scatter_block_init"):  # fmt: skip
            recv = np.full(rs, -1, dtype=I64)
            _issue(inter, form, send, recv, MPI.SUM)
            got.append(recv.tolist())
        # uneven counts: process i of this group keeps counts[i] elements, they sum to total
        counts = [rs] * size
        counts[0] += 1
        counts[-1] -= 1
        for form in ("Reduce_scatter", "Ireduce_scatter", "Reduce_scatter_init"):
            recv = np.full(counts[inter.rank], -1, dtype=I64)
            _issue(inter, form, send, recv, counts, MPI.SUM)
            got.append(recv.tolist())
        # recvcounts agreed within the group when not given
        recv = np.full(counts[inter.rank], -1, dtype=I64)
        inter.Reduce_scatter(send, recv, None, MPI.SUM)
        got.append(recv.tolist())
        return got

    for rank, (color, got) in enumerate(_run(n, low, sched, body)):
        theirs = _members(n, low, 1 - color)
        mine = _members(n, low, color)
        i, size, rs = mine.index(rank), len(mine), len(theirs)
        reduced = np.arange(size * rs) * sum(r + 1 for r in theirs)
        block = reduced[i * rs : (i + 1) * rs].tolist()
        counts = [rs] * size
        counts[0] += 1
        counts[-1] -= 1
        start = sum(counts[:i])
        piece = reduced[start : start + counts[i]].tolist()
        assert got == [block] * 3 + [piece] * 4, rank


@pytest.mark.parametrize("sched", range(len(SCHEDULES)))
def test_outstanding_nonblocking_calls_keep_apart(sched: int) -> None:
    """Several nonblocking collectives outstanding at once, completed in another order than
    started, with point-to-point traffic on the same intercommunicator between them."""
    n, low = 5, 2

    def body(comm: Any, inter: Any, color: int, theirs: list[int]) -> Any:
        rs = inter.remote_size
        a = np.full(2, -1, dtype=I64)
        reqs = [inter.Iallreduce(np.array([comm.rank, 1], dtype=I64), a, op=MPI.SUM)]
        g = np.full((rs, 1), -1, dtype=I64)
        reqs.append(inter.Iallgather(np.array([comm.rank], dtype=I64), g))
        reqs.append(inter.Ibarrier())
        sends = [inter.isend(comm.rank, dest=r, tag=0) for r in range(rs)]
        t = np.full((rs, 1), -1, dtype=I64)
        reqs.append(inter.Ialltoall(np.full((rs, 1), comm.rank, dtype=I64), t))
        got_p2p = [inter.recv(source=r, tag=0) for r in range(rs)]
        MPI.Request.Waitall(sends)
        for req in reversed(reqs):
            req.Wait()
        return a.tolist(), g.ravel().tolist(), t.ravel().tolist(), got_p2p

    for color, (a, g, t, p2p) in _run(n, low, sched, body):
        theirs = _members(n, low, 1 - color)
        assert p2p == theirs
        assert a == [sum(theirs), len(theirs)]
        assert g == theirs
        assert t == theirs


def test_bad_roots_and_in_place_are_refused() -> None:
    def body(comm: Any, inter: Any, color: int, theirs: list[int]) -> Any:
        rs = inter.remote_size
        classes = []
        for bad in (rs, -2, -7):
            for call in (lambda r: inter.reduce(None, op=MPI.NO_OP, root=r),
                         lambda r: inter.Bcast(np.zeros(1), root=r),
                         lambda r: inter.Gather(np.zeros(1), None, root=r),
                         lambda r: inter.Iscatter(None, np.zeros(1), root=r)):  # fmt: skip
                with pytest.raises(MPI.Exception) as err:
                    call(bad)
                classes.append(err.value.Get_error_class())
        with pytest.raises(MPI.Exception) as err:
            inter.Allreduce(MPI.IN_PLACE, np.zeros(1), op=MPI.SUM)
        classes.append(err.value.Get_error_class())
        inter.Barrier()  # nothing above numbered a call: the groups still agree
        return classes

    for _, classes in _run(3, 1, 0, body):
        assert classes == [MPI.ERR_ROOT] * 12 + [MPI.ERR_ARG]


@pytest.mark.parametrize("sched", range(len(SCHEDULES)))
def test_free_while_a_nonblocking_call_runs_gives_every_context_back_after(sched: int) -> None:
    """An intercommunicator freed with an Iallgather and an Ibcast still running (world
    rank 0's waits for a root that starts only after rank 0 freed): both complete; the local
    group's context pair never goes back before the intercommunicator's, and at the end
    every pair is free again."""
    n, low = 5, 2

    def program(comm: Any) -> Any:
        before = comm._state().runtime.free_context_mask()
        half, inter, color = _split(comm, low)
        rs = inter.remote_size
        got = np.full((rs, 1), -1, dtype=I64)
        reqs = [inter.Iallgather(np.array([comm.rank], dtype=I64), got)]
        buf = np.full(3, comm.rank, dtype=I64)
        if comm.rank == n - 1:  # the root starts its Ibcast once world rank 0 has freed
            comm.recv(source=0, tag=99)
        reqs.append(inter.Ibcast(buf, root=_root(inter, color, 1)))
        pairs = inter._state().context // 2, inter._state().local.context // 2
        inter.Free()
        half.Free()
        mask = comm._state().runtime.free_context_mask()
        inter_free, local_free = (bool(mask >> pair & 1) for pair in pairs)
        order_kept = not local_free if comm.rank == 0 else inter_free or not local_free
        if comm.rank == 0:  # its Ibcast is still waiting for the root: nothing went back
            comm.send(None, dest=n - 1, tag=99)
        MPI.Request.Waitall(reqs)
        comm.Barrier()
        restored = before == comm._state().runtime.free_context_mask()
        return color, got.ravel().tolist(), buf.tolist(), restored and order_kept

    for rank, (color, got, buf, restored) in enumerate(run(n, program, **SCHEDULES[sched])):
        theirs = _members(n, low, 1 - color)
        assert got == theirs
        assert buf == ([theirs[-1]] * 3 if color == 0 else [rank] * 3)
        assert restored
