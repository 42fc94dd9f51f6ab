"""Every collective of ``Intracomm`` on an in-process job (tests/unit/mpisim.py), on 1 to 5
ranks with roots other than 0: lowercase (objects) and uppercase (numpy buffers), blocking and
nonblocking, with exact values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.unit.mpisim import MPI, run

SIZES = (1, 2, 3, 4, 5)
ROOTED = [(n, root) for n in SIZES for root in sorted({n - 1, n // 2})]
"""(size, root): the last rank and the middle one, so roots other than 0 are the rule."""

I64 = np.int64


def _arange(n: int, start: int = 0) -> np.ndarray:
    return np.arange(start, start + n, dtype=I64)


# -- lowercase: Python objects -----------------------------------------------------------------


@pytest.mark.parametrize(("n", "root"), ROOTED)
def test_bcast_object(n: int, root: int) -> None:
    def body(comm: Any) -> Any:
        obj = {"from": comm.rank, "data": list(range(7))} if comm.rank == root else None
        return comm.bcast(obj, root=root)

    assert run(n, body) == [{"from": root, "data": list(range(7))}] * n


@pytest.mark.parametrize(("n", "root"), ROOTED)
def test_reduce_object(n: int, root: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        return (
            comm.reduce(r + 1, op=MPI.SUM, root=root),
            comm.reduce((r * 7) % 5, op=MPI.MAX, root=root),
            comm.reduce(((r * 3) % n, r), op=MPI.MINLOC, root=root),
        )

    want_min = min(((r * 3) % n, r) for r in range(n))
    want = (n * (n + 1) // 2, max((r * 7) % 5 for r in range(n)), want_min)
    assert run(n, body) == [want if r == root else (None, None, None) for r in range(n)]


@pytest.mark.parametrize("n", SIZES)
def test_allreduce_object(n: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        return (
            comm.allreduce(r + 1),
            comm.allreduce(r + 1, op=MPI.PROD),
            comm.allreduce(r, op=MPI.MIN),
            comm.allreduce(r == 0, op=MPI.LOR),
            comm.allreduce(1 << r, op=MPI.BOR),
            comm.allreduce((-r, r), op=MPI.MAXLOC),
        )

    prod = 1
    for r in range(n):
        prod *= r + 1
    want = (n * (n + 1) // 2, prod, 0, True, (1 << n) - 1, (0, 0))
    assert run(n, body) == [want] * n


@pytest.mark.parametrize(("n", "root"), ROOTED)
def test_gather_and_scatter_objects(n: int, root: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        gathered = comm.gather(("g", r), root=root)
        items = [("s", i, "x" * i) for i in range(n)] if r == root else None
        return gathered, comm.scatter(items, root=root)

    gathered = [("g", r) for r in range(n)]
    assert run(n, body) == [(gathered if r == root else None, ("s", r, "x" * r)) for r in range(n)]


@pytest.mark.parametrize(("n", "root"), ROOTED)
def test_scatter_and_alltoall_of_none_give_none_to_every_rank(n: int, root: int) -> None:
    def body(comm: Any) -> Any:
        return comm.scatter(None, root=root), comm.alltoall(None)

    assert run(n, body) == [(None, [None] * n)] * n


@pytest.mark.parametrize("n", SIZES)
def test_allgather_and_alltoall_objects(n: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        return comm.allgather(r * r), comm.alltoall([(r, j) for j in range(n)])

    assert run(n, body) == [
        ([r * r for r in range(n)], [(i, j) for i in range(n)]) for j in range(n)
    ]


@pytest.mark.parametrize("n", SIZES)
def test_scan_and_exscan_objects(n: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        return comm.scan(r + 1), comm.exscan(r + 1), comm.scan(r, op=MPI.MAX)

    assert run(n, body) == [
        ((r + 1) * (r + 2) // 2, None if r == 0 else r * (r + 1) // 2, r) for r in range(n)
    ]


@pytest.mark.parametrize("n", SIZES)
def test_barrier_lets_no_rank_out_before_every_rank_is_in(n: int) -> None:
    log: list[tuple[str, int]] = []  # the ranks share this process: one log, in order

    def body(comm: Any) -> None:
        for round_ in range(2):
            log.append(("in", comm.rank))
            comm.barrier() if round_ == 0 else comm.Barrier()
            log.append(("out", comm.rank))
            comm.Barrier()

    for seed in (None, 7):
        log.clear()
        run(n, body, seed=seed)
        for half in range(2):
            events = [e for i, e in enumerate(log) if i // (2 * n) == half]
            last_in = max(i for i, (what, _) in enumerate(events) if what == "in")
            first_out = min(i for i, (what, _) in enumerate(events) if what == "out")
            assert last_in < first_out, events


def test_large_objects_go_through_every_collective() -> None:
    """Pickles past the eager limit: the collectives' rendezvous path."""

    def body(comm: Any) -> Any:
        r = comm.rank
        blob = bytes([r]) * 5000
        return (
            comm.bcast(blob if r == 2 else None, root=2) == bytes([2]) * 5000,
            [len(x) for x in comm.allgather(blob)],
            comm.gather(blob, root=1) is None or comm.rank == 1,
            len(comm.alltoall([blob] * comm.size)[0]),
        )

    assert run(4, body, eager_limit=1024) == [(True, [5000] * 4, True, 5000)] * 4


@pytest.mark.parametrize("n", SIZES)
def test_invalid_roots_raise_err_root_on_every_rank(n: int) -> None:
    def body(comm: Any) -> Any:
        classes = []
        for call in (
            lambda: comm.bcast(1, root=n),
            lambda: comm.Bcast(np.zeros(1), root=-1),
            lambda: comm.reduce(1, root=n + 4),
            lambda: comm.Gather(np.zeros(1), np.zeros(n), root=n),
        ):
            try:
                call()
                classes.append(None)
            except MPI.Exception as exc:
                classes.append(exc.Get_error_class())
        return classes

    assert run(n, body) == [[MPI.ERR_ROOT] * 4] * n


# -- uppercase: buffers --------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "root"), ROOTED)
def test_bcast_buffer(n: int, root: int) -> None:
    def body(comm: Any) -> Any:
        buf = _arange(9, 100) if comm.rank == root else np.zeros(9, dtype=I64)
        comm.Bcast(buf, root=root)
        big = np.full(3000, float(comm.rank == root))
        comm.Bcast([big, MPI.DOUBLE], root=root)
        return buf.tolist(), float(big.sum())

    assert run(n, body, eager_limit=1024) == [(list(range(100, 109)), 3000.0)] * n


@pytest.mark.parametrize(("n", "root"), ROOTED)
def test_reduce_buffer(n: int, root: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        send = _arange(4, r)
        out = np.full(4, -1, dtype=I64)
        comm.Reduce(send, out, op=MPI.SUM, root=root)
        inplace = _arange(4, r)
        if r == root:
            comm.Reduce(MPI.IN_PLACE, inplace, op=MPI.MAX, root=root)
        else:
            comm.Reduce(inplace, None, op=MPI.MAX, root=root)
        return out.tolist(), inplace.tolist()

    total = [sum(r + k for r in range(n)) for k in range(4)]
    top = [n - 1 + k for k in range(4)]
    assert run(n, body) == [
        (total, top) if r == root else ([-1] * 4, list(range(r, r + 4))) for r in range(n)
    ]


@pytest.mark.parametrize("n", SIZES)
def test_allreduce_buffer(n: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        out = np.zeros(5, dtype=np.float64)
        comm.Allreduce(np.full(5, r + 0.5), out, op=MPI.SUM)
        inplace = np.array([r, -r, 1 << r], dtype=I64)
        comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.BOR)
        pair_t = np.dtype([("v", np.float64), ("i", np.int32)], align=True)  # C's double_int
        minloc = np.zeros(1, dtype=pair_t)
        pair = np.array([((r - 2) ** 2, r)], dtype=pair_t)
        comm.Allreduce([pair, MPI.DOUBLE_INT], [minloc, MPI.DOUBLE_INT], op=MPI.MINLOC)
        return out.tolist(), inplace.tolist(), (float(minloc["v"][0]), int(minloc["i"][0]))

    bor = [0, 0, 0]
    for r in range(n):
        bor = [bor[0] | r, bor[1] | -r, bor[2] | (1 << r)]
    best = min(((r - 2) ** 2, r) for r in range(n))
    want = ([sum(r + 0.5 for r in range(n))] * 5, bor, (float(best[0]), best[1]))
    assert run(n, body) == [want] * n


@pytest.mark.parametrize(("n", "root"), ROOTED)
def test_gather_and_gatherv_buffers(n: int, root: int) -> None:
    counts = [r + 1 for r in range(n)]
    displs = [sum(counts[:r]) + r for r in range(n)]  # a gap of one element after each block
    total = displs[-1] + counts[-1] + 1

    def body(comm: Any) -> Any:
        r = comm.rank
        out = np.full(2 * n, -1, dtype=I64) if r == root else None
        comm.Gather(np.array([r, 10 * r], dtype=I64), out, root=root)
        outv = np.full(total, -1, dtype=I64) if r == root else None
        spec = [outv, counts, displs, MPI.INT64_T] if r == root else None
        comm.Gatherv(np.full(r + 1, r, dtype=I64), spec, root=root)
        return (out.tolist(), outv.tolist()) if r == root else None

    want_v = [-1] * total
    for r in range(n):
        want_v[displs[r] : displs[r] + counts[r]] = [r] * counts[r]
    want = ([x for r in range(n) for x in (r, 10 * r)], want_v)
    assert run(n, body) == [want if r == root else None for r in range(n)]


@pytest.mark.parametrize(("n", "root"), ROOTED)
def test_scatter_and_scatterv_buffers(n: int, root: int) -> None:
    counts = [n - r for r in range(n)]
    displs = [sum(counts[:r]) + 2 * r for r in range(n)]

    def body(comm: Any) -> Any:
        r = comm.rank
        send = _arange(3 * n) if r == root else None
        got = np.zeros(3, dtype=I64)
        comm.Scatter(send, got, root=root)
        sendv = _arange(displs[-1] + counts[-1], 1000) if r == root else None
        spec = [sendv, counts, displs, MPI.INT64_T] if r == root else None
        gotv = np.zeros(counts[r], dtype=I64)
        comm.Scatterv(spec, gotv, root=root)
        return got.tolist(), gotv.tolist()

    assert run(n, body) == [
        ([3 * r, 3 * r + 1, 3 * r + 2], list(range(1000 + displs[r], 1000 + displs[r] + counts[r])))
        for r in range(n)
    ]


@pytest.mark.parametrize("n", SIZES)
def test_allgather_and_allgatherv_buffers(n: int) -> None:
    counts = [(r % 3) + 1 for r in range(n)]
    displs = [sum(counts[:r]) for r in range(n)]

    def body(comm: Any) -> Any:
        r = comm.rank
        out = np.zeros(2 * n, dtype=I64)
        comm.Allgather(np.array([r, -r], dtype=I64), out)
        outv = np.zeros(sum(counts), dtype=I64)
        comm.Allgatherv(np.full(counts[r], 7 * r, dtype=I64), [outv, counts, displs, MPI.INT64_T])
        inplace = np.full(n, -1, dtype=I64)
        inplace[r] = r * r
        comm.Allgather(MPI.IN_PLACE, inplace)
        return out.tolist(), outv.tolist(), inplace.tolist()

    want = (
        [x for r in range(n) for x in (r, -r)],
        [7 * r for r in range(n) for _ in range(counts[r])],
        [r * r for r in range(n)],
    )
    assert run(n, body) == [want] * n


@pytest.mark.parametrize("n", SIZES)
def test_alltoall_buffer(n: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        out = np.zeros(2 * n, dtype=I64)
        comm.Alltoall(np.array([100 * r + j for j in range(n) for _ in range(2)], dtype=I64), out)
        return out.tolist()

    assert run(n, body) == [[100 * i + j for i in range(n) for _ in range(2)] for j in range(n)]


def _vcount(i: int, j: int) -> int:
    """Elements rank ``i`` sends rank ``j`` in the v/w tests (zero for some pairs)."""
    return (i + 2 * j) % 3


@pytest.mark.parametrize("n", SIZES)
def test_alltoallv_buffer(n: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        scounts = [_vcount(r, j) for j in range(n)]
        sdispls = [sum(scounts[:j]) + j for j in range(n)]
        send = np.full(sdispls[-1] + scounts[-1], -9, dtype=I64)
        for j in range(n):
            send[sdispls[j] : sdispls[j] + scounts[j]] = 1000 * r + j
        rcounts = [_vcount(i, r) for i in range(n)]
        rdispls = [sum(rcounts[:i]) for i in range(n)]
        out = np.full(sum(rcounts), -1, dtype=I64)
        comm.Alltoallv([send, scounts, sdispls, MPI.INT64_T], [out, rcounts, rdispls, MPI.INT64_T])
        return out.tolist()

    assert run(n, body) == [
        [1000 * i + j for i in range(n) for _ in range(_vcount(i, j))] for j in range(n)
    ]


@pytest.mark.parametrize("n", SIZES)
def test_alltoallw_buffer_with_a_type_per_peer(n: int) -> None:
    """Rank r sends int32 to even peers and float64 to odd ones; displacements in bytes."""

    def body(comm: Any) -> Any:
        r = comm.rank
        kinds = [MPI.INT32_T if j % 2 == 0 else MPI.DOUBLE for j in range(n)]
        scounts = [_vcount(r, j) for j in range(n)]
        send = bytearray(16 * n)
        sdispls = [16 * j for j in range(n)]
        for j in range(n):
            dtype = np.int32 if j % 2 == 0 else np.float64
            block = np.full(scounts[j], 100 * r + j, dtype=dtype).tobytes()
            send[sdispls[j] : sdispls[j] + len(block)] = block
        rcounts = [_vcount(i, r) for i in range(n)]
        rdispls = [16 * i for i in range(n)]
        out = bytearray(16 * n)
        rkinds = [kinds[r]] * n  # everyone sends this rank one kind
        comm.Alltoallw([send, scounts, sdispls, kinds], [out, rcounts, rdispls, rkinds])
        dtype = np.int32 if r % 2 == 0 else np.float64
        return [
            np.frombuffer(out, dtype=dtype, count=rcounts[i], offset=rdispls[i]).tolist()
            for i in range(n)
        ]

    assert run(n, body) == [[[100 * i + j] * _vcount(i, j) for i in range(n)] for j in range(n)]


@pytest.mark.parametrize("n", SIZES)
def test_scan_and_exscan_buffers(n: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        out = np.zeros(3, dtype=I64)
        comm.Scan(np.array([r, 1, r * r], dtype=I64), out, op=MPI.SUM)
        ex = np.full(3, -1, dtype=I64)
        comm.Exscan(np.array([r, 1, r * r], dtype=I64), ex, op=MPI.SUM)
        prod = np.array([r + 1], dtype=I64)
        comm.Scan(MPI.IN_PLACE, prod, op=MPI.PROD)
        return out.tolist(), ex.tolist() if r else None, int(prod[0])

    def fact(k: int) -> int:
        return 1 if k <= 1 else k * fact(k - 1)

    assert run(n, body) == [
        (
            [r * (r + 1) // 2, r + 1, sum(i * i for i in range(r + 1))],
            [r * (r - 1) // 2, r, sum(i * i for i in range(r))] if r else None,
            fact(r + 1),
        )
        for r in range(n)
    ]


@pytest.mark.parametrize("n", SIZES)
def test_reduce_scatter_and_reduce_scatter_block(n: int) -> None:
    counts = [(r % 2) + 1 for r in range(n)]

    def body(comm: Any) -> Any:
        r = comm.rank
        block = np.zeros(2, dtype=I64)
        comm.Reduce_scatter_block(_arange(2 * n, r), block, op=MPI.SUM)
        mine = np.zeros(counts[r], dtype=I64)
        comm.Reduce_scatter(_arange(sum(counts), 10 * r), mine, recvcounts=counts, op=MPI.MAX)
        return block.tolist(), mine.tolist()

    offsets = [sum(counts[:r]) for r in range(n)]
    assert run(n, body) == [
        (
            [sum(i + 2 * r + k for i in range(n)) for k in range(2)],
            [10 * (n - 1) + offsets[r] + k for k in range(counts[r])],
        )
        for r in range(n)
    ]


# -- user operations -----------------------------------------------------------------------------


def _concat(x: Any, y: Any, datatype: Any) -> Any:
    """Non-commutative on objects: the result spells the ranks in order only if the algorithm
    combines in rank order (MPI requires it of non-commutative operations)."""
    return x + y


def _matmul(inbuf: Any, inoutbuf: Any, datatype: Any) -> None:
    """Non-commutative on buffers: 2x2 matrix products, ``inbuf @ inoutbuf`` as MPI says."""
    a = np.frombuffer(inbuf, dtype=I64).reshape(-1, 2, 2)
    b = np.frombuffer(inoutbuf, dtype=I64).reshape(-1, 2, 2)
    b[...] = (a @ b) % 1_000_003


def _matrix(r: int) -> np.ndarray:
    return np.array([[1, r + 1], [r % 3, 1 + 2 * r]], dtype=I64)


def _product(ranks: range) -> list[list[int]]:
    out = np.eye(2, dtype=I64)
    for r in ranks:
        out = (out @ _matrix(r)) % 1_000_003
    return out.tolist()  # type: ignore[no-any-return]


@pytest.mark.parametrize("n", SIZES)
def test_non_commutative_operations_combine_in_rank_order(n: int) -> None:
    concat = MPI.Op.Create(_concat, commute=False)
    matmul = MPI.Op.Create(_matmul, commute=False)

    def body(comm: Any) -> Any:
        r, root = comm.rank, n // 2
        mine = _matrix(r).reshape(1, 2, 2)
        out = {}
        for name in ("binomial", "linear", "auto"):
            out[f"reduce {name}"] = comm.reduce(str(r), op=concat, root=root, algorithm=name)
            buf = np.zeros((1, 2, 2), dtype=I64)
            comm.Reduce(mine, buf, op=matmul, root=root, algorithm=name)
            out[f"Reduce {name}"] = buf[0].tolist() if r == root else None
        for name in ("recursive-doubling", "reduce-bcast"):
            out[f"allreduce {name}"] = comm.allreduce(str(r), op=concat, algorithm=name)
            buf = np.zeros((1, 2, 2), dtype=I64)
            comm.Allreduce(mine, buf, op=matmul, algorithm=name)
            out[f"Allreduce {name}"] = buf[0].tolist()
        for name in ("recursive-doubling", "linear"):
            out[f"scan {name}"] = comm.scan(str(r), op=concat, algorithm=name)
            out[f"exscan {name}"] = comm.exscan(str(r), op=concat, algorithm=name)
        buf = np.zeros((1, 2, 2), dtype=I64)
        comm.Scan(mine, buf, op=matmul)
        out["Scan"] = buf[0].tolist()
        comm.Reduce_scatter_block(np.concatenate([mine] * n), buf, op=matmul)
        out["Reduce_scatter_block"] = buf[0].tolist()
        return out

    try:
        results = run(n, body)
    finally:
        concat.Free()
        matmul.Free()
    digits = "".join(str(r) for r in range(n))
    for r, got in enumerate(results):
        want: dict[str, Any] = {}
        for name in ("binomial", "linear", "auto"):
            want[f"reduce {name}"] = digits if r == n // 2 else None
            want[f"Reduce {name}"] = _product(range(n)) if r == n // 2 else None
        for name in ("recursive-doubling", "reduce-bcast"):
            want[f"allreduce {name}"] = digits
            want[f"Allreduce {name}"] = _product(range(n))
        for name in ("recursive-doubling", "linear"):
            want[f"scan {name}"] = digits[: r + 1]
            want[f"exscan {name}"] = digits[:r] if r else None
        want["Scan"] = _product(range(r + 1))
        want["Reduce_scatter_block"] = _product(range(n))
        assert got == want, f"rank {r}"


# -- nonblocking ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "root"), ROOTED)
def test_nonblocking_collectives_in_flight_together(n: int, root: int) -> None:
    """Every nonblocking collective started before any is waited for; each completes with
    the value of its blocking form."""

    def body(comm: Any) -> Any:
        r = comm.rank
        bc = _arange(4, 50) if r == root else np.zeros(4, dtype=I64)
        red = np.full(2, -1, dtype=I64)
        allred = np.zeros(2, dtype=I64)
        gat = np.full(n, -1, dtype=I64) if r == root else None
        sca = np.zeros(1, dtype=I64)
        allg = np.zeros(n, dtype=I64)
        a2a = np.zeros(n, dtype=I64)
        scan = np.zeros(1, dtype=I64)
        exscan = np.full(1, -1, dtype=I64)
        rsb = np.zeros(1, dtype=I64)
        counts = [1] * n
        gatv = np.full(n, -1, dtype=I64) if r == root else None
        gspec = [gatv, counts, list(range(n)), MPI.INT64_T] if r == root else None
        scav = np.zeros(1, dtype=I64)
        sspec = [_arange(n, 300), counts, list(range(n)), MPI.INT64_T] if r == root else None
        allgv = np.zeros(n, dtype=I64)
        a2av = np.zeros(n, dtype=I64)
        reqs = [
            comm.Ibarrier(),
            comm.Ibcast(bc, root=root),
            comm.Ireduce(np.array([r, 1], dtype=I64), red, op=MPI.SUM, root=root),
            comm.Iallreduce(np.array([r, r * r], dtype=I64), allred, op=MPI.MAX),
            comm.Igather(np.array([r + 5], dtype=I64), gat, root=root),
            comm.Iscatter(_arange(n, 200) if r == root else None, sca, root=root),
            comm.Iallgather(np.array([-r], dtype=I64), allg),
            comm.Ialltoall(np.array([10 * r + j for j in range(n)], dtype=I64), a2a),
            comm.Iscan(np.array([r + 1], dtype=I64), scan, op=MPI.SUM),
            comm.Iexscan(np.array([r + 1], dtype=I64), exscan, op=MPI.SUM),
            comm.Ireduce_scatter_block(_arange(n, r), rsb, op=MPI.SUM),
            comm.Igatherv(np.array([r * 3], dtype=I64), gspec, root=root),
            comm.Iscatterv(sspec, scav, root=root),
            comm.Iallgatherv(
                np.array([r + 100], dtype=I64), [allgv, counts, list(range(n)), MPI.INT64_T]
            ),
            comm.Ialltoallv(
                [
                    np.array([r * 1000 + j for j in range(n)], dtype=I64),
                    counts,
                    list(range(n)),
                    MPI.INT64_T,
                ],
                [a2av, counts, list(range(n)), MPI.INT64_T],
            ),
        ]
        MPI.Request.Waitall(reqs)
        return {
            "bcast": bc.tolist(),
            "reduce": red.tolist(),
            "allreduce": allred.tolist(),
            "gather": None if gat is None else gat.tolist(),
            "scatter": int(sca[0]),
            "allgather": allg.tolist(),
            "alltoall": a2a.tolist(),
            "scan": int(scan[0]),
            "exscan": int(exscan[0]) if r else None,
            "reduce_scatter_block": int(rsb[0]),
            "gatherv": None if gatv is None else gatv.tolist(),
            "scatterv": int(scav[0]),
            "allgatherv": allgv.tolist(),
            "alltoallv": a2av.tolist(),
        }

    results = run(n, body)
    for r, got in enumerate(results):
        assert got == {
            "bcast": [50, 51, 52, 53],
            "reduce": [n * (n - 1) // 2, n] if r == root else [-1, -1],
            "allreduce": [n - 1, (n - 1) ** 2],
            "gather": [i + 5 for i in range(n)] if r == root else None,
            "scatter": 200 + r,
            "allgather": [-i for i in range(n)],
            "alltoall": [10 * i + r for i in range(n)],
            "scan": (r + 1) * (r + 2) // 2,
            "exscan": r * (r + 1) // 2 if r else None,
            "reduce_scatter_block": sum(i + r for i in range(n)),
            "gatherv": [3 * i for i in range(n)] if r == root else None,
            "scatterv": 300 + r,
            "allgatherv": [i + 100 for i in range(n)],
            "alltoallv": [i * 1000 + r for i in range(n)],
        }, f"rank {r}"


@pytest.mark.parametrize("n", [1, 3, 4])
def test_nonblocking_reduce_scatter_and_alltoallw(n: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        counts = [1] * n
        rs = np.zeros(1, dtype=I64)
        req1 = comm.Ireduce_scatter(_arange(n, 10 * r), rs, recvcounts=counts, op=MPI.SUM)
        send = np.array([r * 10 + j for j in range(n)], dtype=I64)
        out = np.zeros(n, dtype=I64)
        displs = [8 * j for j in range(n)]
        types = [MPI.INT64_T] * n
        req2 = comm.Ialltoallw([send, counts, displs, types], [out, counts, displs, types])
        req2.Wait()
        req1.Wait()
        return int(rs[0]), out.tolist()

    assert run(n, body) == [
        (sum(10 * i + r for i in range(n)), [10 * i + r for i in range(n)]) for r in range(n)
    ]


def test_nonblocking_collectives_progress_while_tested() -> None:
    """An Ibcast completes through Test calls alone, interleaved with point-to-point."""

    def body(comm: Any) -> Any:
        buf = np.full(3, comm.rank, dtype=I64)
        req = comm.Ibcast(buf, root=2)
        comm.sendrecv(comm.rank, dest=(comm.rank + 1) % 3, source=(comm.rank - 1) % 3)
        spins = 0
        while not req.Test():
            spins += 1
        return buf.tolist()

    assert run(3, body) == [[2, 2, 2]] * 3


# -- every registered algorithm ------------------------------------------------------------------

ALGORITHMS = {
    "barrier": ("dissemination", "tree", "auto", "nic-mcast"),
    "bcast": ("binomial", "auto", "nic-mcast", "nicvm"),
    "reduce": ("binomial", "linear", "auto"),
    "allreduce": ("recursive-doubling", "reduce-bcast"),
    "allgather": ("recursive-doubling", "ring"),
    "alltoall": ("pairwise", "scattered"),
    "scan": ("recursive-doubling", "linear"),
    "exscan": ("recursive-doubling", "linear"),
}
"""Each operation's algorithms but application bypass (it needs signals from the NIC)."""

CASES = [(op, name) for op, names in ALGORITHMS.items() for name in names]


@pytest.mark.parametrize(("operation", "algorithm"), CASES)
def test_every_algorithm_on_one_to_five_ranks(operation: str, algorithm: str) -> None:
    def body(comm: Any) -> Any:
        n, r = comm.size, comm.rank
        root = n - 1
        small = ("v", r)
        if operation == "barrier":
            comm.barrier(algorithm=algorithm)
            return None
        if operation == "bcast":
            obj = {"root": r, "pad": "p" * 40} if r == root else None
            big = np.full(2000, r, dtype=I64) if r == root else np.zeros(2000, dtype=I64)
            comm.Bcast(big, root=root, algorithm=algorithm)
            return comm.bcast(obj, root=root, algorithm=algorithm), int(big.sum())
        if operation == "reduce":
            return comm.reduce(r + 1, root=root, algorithm=algorithm)
        if operation == "allreduce":
            return comm.allreduce(r + 1, algorithm=algorithm)
        if operation == "allgather":
            return comm.allgather(small, algorithm=algorithm)
        if operation == "alltoall":
            return comm.alltoall([(r, j) for j in range(n)], algorithm=algorithm)
        if operation == "scan":
            return comm.scan(r + 1, algorithm=algorithm)
        return comm.exscan(r + 1, algorithm=algorithm)

    for n in SIZES:
        got = run(n, body, eager_limit=4096)
        root = n - 1
        tri = n * (n + 1) // 2
        want: list[Any] = {
            "barrier": [None] * n,
            "bcast": [({"root": root, "pad": "p" * 40}, 2000 * root)] * n,
            "reduce": [tri if r == root else None for r in range(n)],
            "allreduce": [tri] * n,
            "allgather": [[("v", r) for r in range(n)]] * n,
            "alltoall": [[(i, j) for i in range(n)] for j in range(n)],
            "scan": [(r + 1) * (r + 2) // 2 for r in range(n)],
            "exscan": [None if r == 0 else r * (r + 1) // 2 for r in range(n)],
        }[operation]
        assert got == want, f"{operation} {algorithm} on {n} ranks"


@pytest.mark.parametrize(("n", "root"), ROOTED)
def test_none_as_the_send_buffer_works_in_place(n: int, root: int) -> None:
    """mpi4py takes None for IN_PLACE on an intracommunicator (its ``is_IN_PLACE``): the
    reductions, scans, Reduce_scatter_block and Gather/Allgather/Alltoall/Scatter."""

    def body(comm: Any) -> Any:
        r = comm.rank
        allred = _arange(3, r)
        comm.Allreduce(None, allred, op=MPI.SUM)
        red = _arange(3, r)
        comm.Reduce(None if r == root else red, red if r == root else None, op=MPI.MAX, root=root)
        scan = _arange(2, r)
        comm.Scan(None, scan, op=MPI.SUM)
        rsb = np.full(n, r + 1, dtype=I64)
        comm.Reduce_scatter_block(None, rsb, op=MPI.SUM)
        gath = np.full(n, -1, dtype=I64)
        gath[r] = 10 * r
        if r == root:
            comm.Gather(None, gath, root=root)
        else:
            comm.Gather(gath[r : r + 1], None, root=root)
        allg = np.full(n, -1, dtype=I64)
        allg[r] = 10 * r
        comm.Allgather(None, allg)
        a2a = np.full(n, r, dtype=I64)
        comm.Alltoall(None, a2a)
        scat = np.arange(n, dtype=I64) * 3 if r == root else np.full(1, -1, dtype=I64)
        comm.Scatter(scat if r == root else None, None if r == root else scat, root=root)
        return (allred.tolist(), red.tolist() if r == root else None, scan.tolist(),
                int(rsb[0]), gath.tolist() if r == root else None, allg.tolist(), a2a.tolist(),
                scat.tolist())  # fmt: skip

    total = [sum(r + k for r in range(n)) for k in range(3)]
    tens = [10 * r for r in range(n)]
    want = [
        (total, [n - 1 + k for k in range(3)] if r == root else None,
         [sum(q + k for q in range(r + 1)) for k in range(2)], n * (n + 1) // 2,
         tens if r == root else None, tens, list(range(n)),
         list(range(0, 3 * n, 3)) if r == root else [3 * r])
        for r in range(n)
    ]  # fmt: skip
    assert run(n, body) == want


@pytest.mark.parametrize("n", SIZES)
def test_reduce_scatter_of_one_buffer_as_both_works_in_place(n: int) -> None:
    """mpi4py after 4.1.2: a send buffer at the receive buffer's address is IN_PLACE."""

    def body(comm: Any) -> Any:
        r = comm.rank
        counts = list(range(1, n + 1))
        buf = np.full(sum(counts), r + 1, dtype=I64)
        comm.Reduce_scatter(buf, buf, counts, op=MPI.SUM)
        block = np.full(2 * n, r, dtype=I64)
        comm.Reduce_scatter_block(block, block, op=MPI.MAX)
        return buf[: counts[r]].tolist(), block[:2].tolist()

    total = n * (n + 1) // 2
    assert run(n, body) == [([total] * (r + 1), [n - 1] * 2) for r in range(n)]
