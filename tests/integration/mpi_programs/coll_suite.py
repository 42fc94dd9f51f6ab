"""Every collective call of the surface, checked against mpi4py's documented results.

Runs on any number of ranks; each rank prints ``coll ok <rank>``. Results are compared with
values computed locally from the same inputs (rank order for non-commutative operations).
"""

from __future__ import annotations

import functools

import numpy as np

from emucluster import MPI

EMU = MPI.__name__.startswith("emucluster")  # the same file runs under mpi4py (import swapped)
comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size


def concat(x: str, y: str, datatype: object) -> str:
    return f"({x}.{y})"


CONCAT = MPI.Op.Create(concat, commute=False)


def fold(op, values):  # type: ignore[no-untyped-def]
    return functools.reduce(op, values)


def flat(text: str | None) -> str | None:
    """A CONCAT result without its parentheses: any association of the rank order."""
    return None if text is None else text.replace("(", "").replace(")", "")


def dotted(count: int) -> str:
    return ".".join(str(i) for i in range(count))


def lowercase(c: MPI.Intracomm) -> None:
    r, n = c.rank, c.size
    c.barrier()
    for root in range(n):
        assert c.bcast({"root": root} if r == root else None, root=root) == {"root": root}
        gathered = c.gather((r, "g"), root=root)
        assert gathered == ([(i, "g") for i in range(n)] if r == root else None)
        items = [i * 10 + root for i in range(n)] if r == root else None
        assert c.scatter(items, root=root) == r * 10 + root
        reduced = c.reduce(r + 1, op=MPI.SUM, root=root)
        assert reduced == (n * (n + 1) // 2 if r == root else None)
        text = c.reduce(str(r), op=CONCAT, root=root)
        assert flat(text) == (dotted(n) if r == root else None)
    assert c.allgather(r * r) == [i * i for i in range(n)]
    assert c.alltoall([(r, j) for j in range(n)]) == [(i, r) for i in range(n)]
    assert c.allreduce(r, op=MPI.MAX) == n - 1
    assert c.allreduce(r + 2, op=MPI.MIN) == 2
    assert c.allreduce(r + 1, op=MPI.PROD) == fold(lambda a, b: a * b, range(1, n + 1))
    assert c.allreduce([r], op=MPI.SUM) == list(range(n))
    assert flat(c.allreduce(str(r), op=CONCAT)) == dotted(n)
    assert c.allreduce((r % 2, r), op=MPI.MAXLOC) == ((1, 1) if n > 1 else (0, 0))
    assert c.allreduce((5, n - 1 - r), op=MPI.MINLOC) == (5, 0)
    assert c.allreduce(r, op=MPI.REPLACE) == n - 1
    assert c.allreduce(r, op=MPI.NO_OP) == 0
    assert c.allreduce(r, op=MPI.LAND) == (n == 1 and False)
    assert c.allreduce(r, op=MPI.LOR) == (n > 1)
    assert c.allreduce(r + 1, op=MPI.BAND) == fold(lambda a, b: a & b, range(1, n + 1))
    assert c.allreduce(1 << r, op=MPI.BOR) == (1 << n) - 1
    assert c.allreduce(np.array([r, -r]), op=MPI.MAX).tolist() == [n - 1, 0]
    assert c.scan(r + 1) == (r + 1) * (r + 2) // 2
    assert c.exscan(r + 1) == (None if r == 0 else r * (r + 1) // 2)
    assert flat(c.scan(str(r), op=CONCAT)) == dotted(r + 1)
    assert flat(c.exscan(str(r), op=CONCAT)) == (None if r == 0 else dotted(r))
    if EMU:
        assert c.allreduce(r, algorithm="reduce-bcast") == n * (n - 1) // 2
    big = c.bcast(list(range(50_000)) if r == 0 else None, root=0)
    assert len(big) == 50_000


def uppercase(c: MPI.Intracomm) -> None:
    r, n = c.rank, c.size
    c.Barrier()
    for root in {0, n - 1}:
        buf = np.arange(5, dtype="d") if r == root else np.zeros(5)
        c.Bcast(buf, root=root)
        assert buf.tolist() == list(range(5))
        out = np.zeros(3, dtype="i") if r == root else None
        c.Reduce(np.array([r, 1, -r], dtype="i"), out, op=MPI.SUM, root=root)
        if r == root:
            assert out is not None
            assert out.tolist() == [n * (n - 1) // 2, n, -n * (n - 1) // 2]
        inplace = np.array([r + 1.0])
        c.Reduce(MPI.IN_PLACE if r == root else inplace, inplace, op=MPI.MAX, root=root)
        if r == root:
            assert inplace[0] == n
        gathered = np.zeros(2 * n, dtype="i") if r == root else None
        c.Gather(np.array([r, r * 10], dtype="i"), gathered, root=root)
        if r == root:
            assert gathered is not None
            assert gathered.tolist() == [v for i in range(n) for v in (i, i * 10)]
        send = np.arange(3 * n, dtype="d") if r == root else None
        part = np.zeros(3)
        c.Scatter(send, part, root=root)
        assert part.tolist() == [3.0 * r, 3.0 * r + 1, 3.0 * r + 2]
    total = np.zeros(4)
    c.Allreduce(np.full(4, r + 1.0), total, op=MPI.SUM)
    assert (total == n * (n + 1) / 2).all()
    c.Allreduce([np.full(4, float(r)), MPI.DOUBLE], [total, MPI.DOUBLE], op=MPI.MIN)
    assert (total == 0).all()
    mine = np.array([r, 2 * r], "d")
    c.Allreduce(MPI.IN_PLACE, mine, op=MPI.SUM)
    assert mine.tolist() == [n * (n - 1) / 2, n * (n - 1)]
    pairs = np.zeros(1, dtype=MPI.DOUBLE_INT.dtype)
    pairs[0] = (float(r % 3), r)
    best = np.zeros_like(pairs)
    c.Allreduce(pairs, best, op=MPI.MAXLOC)
    top = max(i % 3 for i in range(n))
    assert best[0]["value"] == top
    assert best[0]["index"] == min(i for i in range(n) if i % 3 == top)
    every = np.zeros(n, dtype="i")
    c.Allgather(np.array([r * 7], dtype="i"), every)
    assert every.tolist() == [i * 7 for i in range(n)]
    every = np.full(n, -1, dtype="i")
    every[r] = r
    c.Allgather(MPI.IN_PLACE, every)
    assert every.tolist() == list(range(n))
    recv = np.zeros(n, dtype="i")
    c.Alltoall(np.array([r * 100 + j for j in range(n)], dtype="i"), recv)
    assert recv.tolist() == [i * 100 + r for i in range(n)]
    acc = np.zeros(2, dtype="i8")
    c.Scan(np.array([1, r], dtype="i8"), acc)
    assert acc.tolist() == [r + 1, r * (r + 1) // 2]
    acc[:] = -1
    c.Exscan(np.array([1, r], dtype="i8"), acc)
    assert acc.tolist() == ([-1, -1] if r == 0 else [r, r * (r - 1) // 2])
    big = np.arange(200_000, dtype="d") if r == 0 else np.zeros(200_000)
    c.Bcast(big, root=0)
    assert big[-1] == 199_999
    summed = np.zeros(50_000)
    c.Allreduce(np.ones(50_000), summed)
    assert (summed == n).all()


def nonblocking(c: MPI.Intracomm) -> None:
    r, n = c.rank, c.size
    c.Ibarrier().Wait()
    buf = np.arange(4, dtype="d") if r == 0 else np.zeros(4)
    req = c.Ibcast(buf, root=0)
    while not req.Test():
        pass
    assert buf.tolist() == [0, 1, 2, 3]
    a, b = np.zeros(2), np.zeros(2)
    r1 = c.Iallreduce(np.array([r, 1.0]), a)
    r2 = c.Iallreduce(np.array([1.0, r]), b, op=MPI.MAX)
    barrier = c.Ibarrier()
    MPI.Request.Waitall([r2, barrier, r1])
    assert a.tolist() == [n * (n - 1) / 2, n]
    assert b.tolist() == [1.0, n - 1]
    out = np.zeros(1, dtype="i") if r == n - 1 else None
    req = c.Ireduce(np.array([r], dtype="i"), out, op=MPI.SUM, root=n - 1)
    # progress of a nonblocking collective while blocked in point-to-point
    peer = (r + 1) % n
    got = c.sendrecv(r, peer, 7, source=(r - 1) % n, recvtag=7)
    assert got == (r - 1) % n
    req.Wait()
    if r == n - 1:
        assert out is not None
        assert out[0] == n * (n - 1) // 2


def isolation(c: MPI.Intracomm) -> None:
    """A wildcard point-to-point receive posted across collectives takes none of their
    messages (collectives use their own context)."""
    r, n = c.rank, c.size
    pending = c.irecv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
    c.bcast("x", root=0)
    c.allreduce(r)
    c.barrier()
    c.send(("p2p", r), (r + 1) % n, tag=3)
    assert pending.wait() == ("p2p", (r - 1) % n)


def sub_communicators() -> None:
    dup = comm.Dup()
    lowercase(dup)
    odd = comm.Split(rank % 2, rank)
    lowercase(odd)
    uppercase(odd)
    nonblocking(odd)
    odd.Free()
    dup.Free()
    lowercase(MPI.COMM_SELF)


for section in (lambda: lowercase(comm), lambda: uppercase(comm), lambda: nonblocking(comm),
                lambda: isolation(comm), sub_communicators):  # fmt: skip
    section()
    comm.Barrier()
print(f"coll ok {rank}")
