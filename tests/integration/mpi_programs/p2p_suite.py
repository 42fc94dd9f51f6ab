"""Every point-to-point call of the surface, checked against mpi4py's documented behaviour.

Runs on any number of ranks (1, 2, 3, 4, 8 in CI); each rank prints ``p2p ok <rank>``. A
failed check raises AssertionError, which ends the job with status 1 and a traceback. With
the import swapped to ``from mpi4py import MPI`` it passes under mpiexec too (the
emucluster-only checks are skipped), which is how its expectations were checked.
"""

from __future__ import annotations

import os
import pickle

import numpy as np

from emucluster import MPI

EMU = MPI.__name__.startswith("emucluster")  # the same file runs under mpi4py (import swapped)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size


def expect_error(error_class: int, fn, *args, **kwargs) -> MPI.Exception:  # type: ignore[no-untyped-def]
    try:
        fn(*args, **kwargs)
    except MPI.Exception as exc:
        caught = exc
    else:
        raise AssertionError(f"{fn.__name__} did not raise error class {error_class}")
    assert caught.Get_error_class() == error_class, (caught.Get_error_class(), error_class)
    return caught


def basics() -> None:
    assert rank == comm.rank == int(os.environ.get("EMU_RANK", rank))
    assert size == comm.size == int(os.environ.get("EMU_SIZE", size))
    assert MPI.Is_initialized()
    assert not MPI.Is_finalized()
    assert isinstance(comm, MPI.Intracomm)
    assert comm.Is_intra()
    assert not comm.Is_inter()
    assert comm.Get_name() == "MPI_COMM_WORLD"
    assert MPI.COMM_WORLD.Dup().Get_name() == ""
    assert MPI.Get_version() >= (3, 0)
    assert MPI.Query_thread() >= MPI.THREAD_SINGLE
    t0 = MPI.Wtime()
    assert MPI.Wtime() >= t0
    assert 0 < MPI.Wtick() < 1e-3
    assert isinstance(MPI.Get_processor_name(), str)
    assert comm.Get_attr(MPI.TAG_UB) >= 32767
    assert (MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.PROC_NULL, MPI.UNDEFINED) == (-2, -1, -1, -32766)
    assert MPI.COMM_SELF.Get_size() == 1
    assert MPI.COMM_SELF.Get_rank() == 0


def lowercase() -> None:
    status = MPI.Status()
    comm.send((rank, "hi"), right, tag=11)
    obj = comm.recv(source=left, tag=11, status=status)
    assert obj == (left, "hi")
    assert (status.source, status.tag, status.Get_source(), status.Get_tag()) == (left, 11) * 2
    assert status.Get_count() == len(pickle.dumps((left, "hi"), pickle.HIGHEST_PROTOCOL))
    assert status.Get_error() == MPI.SUCCESS
    # nonblocking, receives posted in reverse tag order
    sends = [comm.isend(rank * 100 + i, right, tag=20 + i) for i in range(5)]
    recvs = [comm.irecv(source=left, tag=20 + i) for i in reversed(range(5))]
    assert MPI.Request.waitall(recvs) == [left * 100 + i for i in reversed(range(5))]
    assert MPI.Request.waitall(sends) == [None] * 5
    assert all(r == MPI.REQUEST_NULL for r in recvs)
    # sendrecv, big object (rendezvous)
    got = comm.sendrecv({"from": rank, "data": list(range(30_000))}, right, 30,
                        source=left, recvtag=30, status=status)  # fmt: skip
    assert got["from"] == left
    assert len(got["data"]) == 30_000
    assert status.source == left
    # ssend / issend
    request = comm.issend(("sync", rank), right, tag=31)
    assert comm.recv(source=left, tag=31) == ("sync", left)
    request.wait()
    comm.ssend("s", rank, tag=32) if False else None  # blocking ssend to self would deadlock
    self_req = comm.issend("to myself", rank, tag=32)
    assert comm.recv(source=rank, tag=32) == "to myself"
    assert self_req.test()[0]


def wildcards() -> None:
    status = MPI.Status()
    if rank != 0:
        comm.send(("w", rank), 0, tag=40 + rank)
        return
    seen = set()
    for _ in range(size - 1):
        obj = comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        assert obj == ("w", status.source)
        assert status.tag == 40 + status.source
        seen.add(status.source)
    assert seen == set(range(1, size))


def ordering() -> None:
    """Non-overtaking: 40 messages on one tag, sizes across the eager limit, mixed wildcards."""
    sizes = [8, 16_000, 16_287, 16_288, 40_000, 3, 100_000, 1]
    reqs = [comm.Isend(np.full(sizes[i % 8], i % 251, dtype=np.uint8), right, tag=50)
            for i in range(40)]  # fmt: skip
    status = MPI.Status()
    for i in range(40):
        buf = np.zeros(100_000, dtype=np.uint8)
        source = left if i % 3 else MPI.ANY_SOURCE
        tag = 50 if i % 2 else MPI.ANY_TAG
        comm.Recv(buf, source=source, tag=tag, status=status)
        n = status.Get_count(MPI.BYTE)
        assert n == sizes[i % 8], (i, n)
        assert (buf[:n] == i % 251).all(), (i, n)
        assert status.source == left
        assert status.tag == 50
    MPI.Request.Waitall(reqs)


def uppercase() -> None:
    status = MPI.Status()
    data = np.arange(10, dtype="i") + 100 * rank
    comm.Send([data, MPI.INT], right, tag=60)
    buf = np.zeros(12, dtype="i")
    comm.Recv([buf, MPI.INT], left, 60, status)
    assert status.Get_count(MPI.INT) == 10
    assert (buf[:10] == np.arange(10) + 100 * left).all()
    comm.Send([data, 4, MPI.INT], right, tag=61)
    comm.Send([data, (3, 5), MPI.INT], right, tag=62)
    comm.Recv([buf, 4, MPI.INT], left, 61, status)
    assert buf[:4].tolist() == [100 * left + i for i in range(4)]
    comm.Recv([buf, (3, 2), MPI.INT], left, 62, status)
    assert buf[2:5].tolist() == [100 * left + 5 + i for i in range(3)]
    assert status.Get_count(MPI.INT) == 3
    assert status.Get_count(MPI.DOUBLE) == MPI.UNDEFINED
    b = bytearray(5)
    comm.Sendrecv(b"hey" + bytes([rank]), right, 63, b, left, 63, status)
    assert bytes(b[:4]) == b"hey" + bytes([left])
    assert status.Get_count() == 4
    arr = np.full(3, float(rank))
    comm.Sendrecv_replace(arr, right, 64, left, 64)
    assert (arr == left).all()
    req = comm.Irecv(buf, source=left, tag=65)
    comm.Isend(np.array([7, 8], "i"), right, 65).Wait()
    assert req.Wait(status) is True
    assert buf[:2].tolist() == [7, 8]
    # big buffers (rendezvous by remote-memory write), to the neighbour and to itself
    big = np.arange(300_000, dtype="d") + rank
    out = np.empty_like(big)
    comm.Sendrecv(big, right, 66, out, left, 66)
    assert (out == np.arange(300_000) + left).all()
    comm.Isend(big, rank, 67)
    comm.Recv(out, rank, 67)
    assert (out == big).all()
    comm.Ssend(b"x", rank, 68) if False else None
    s = comm.Issend(b"ss", right, 68)
    comm.Recv(b, left, 68)
    s.Wait()


def probes() -> None:
    status = MPI.Status()
    assert not comm.Iprobe(source=MPI.ANY_SOURCE, tag=999)
    assert not comm.iprobe(tag=999)
    comm.Send(np.arange(7, dtype="d"), right, tag=70)
    assert comm.Probe(source=left, tag=70, status=status) is True
    assert status.source == left
    assert status.tag == 70
    assert status.Get_count(MPI.DOUBLE) == 7
    buf = np.empty(status.Get_count(MPI.DOUBLE))
    comm.Recv(buf, status.source, status.tag)
    assert buf.tolist() == list(range(7))
    comm.send("p", right, tag=71)
    while not comm.iprobe(source=left, tag=71, status=status):
        pass
    assert comm.probe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG) is True
    assert comm.recv(source=left, tag=71) == "p"
    vector = MPI.DOUBLE.Create_vector(3, 1, 2).Commit()  # every other double
    comm.Send(np.arange(3, dtype="d"), right, tag=72)
    strided = np.full(5, -1.0)
    comm.Mprobe(left, 72).Recv([strided, 1, vector])
    assert strided.tolist() == [0.0, -1.0, 1.0, -1.0, 2.0]
    vector.Free()


def proc_null_and_self() -> None:
    status = MPI.Status()
    comm.send("nothing", MPI.PROC_NULL)
    comm.Send(b"x", MPI.PROC_NULL, 3)
    assert comm.recv(source=MPI.PROC_NULL, status=status) is None
    assert (status.source, status.tag, status.Get_count()) == (MPI.PROC_NULL, MPI.ANY_TAG, 0)
    assert comm.irecv(source=MPI.PROC_NULL).wait() is None
    assert comm.Probe(MPI.PROC_NULL)
    assert comm.Iprobe(MPI.PROC_NULL)
    # a non-periodic chain with PROC_NULL at both ends
    up = rank + 1 if rank + 1 < size else MPI.PROC_NULL
    down = rank - 1 if rank > 0 else MPI.PROC_NULL
    got = comm.sendrecv(rank, up, 80, source=down, recvtag=80)
    assert got == (None if rank == 0 else rank - 1)
    comm.send({"self": rank}, rank, tag=81)
    assert comm.recv(source=rank, tag=81) == {"self": rank}
    self_comm = MPI.COMM_SELF
    self_comm.send("alone", 0, 1)
    assert self_comm.recv(source=0, tag=1) == "alone"


def truncation() -> None:
    status = MPI.Status()
    for n in (16, 4000):  # eager, then rendezvous
        sent = comm.Isend(np.arange(n, dtype="d"), right, tag=90)
        small = np.zeros(8)
        exc = expect_error(MPI.ERR_TRUNCATE, comm.Recv, small, left, 90, status)
        assert exc.error_class == MPI.ERR_TRUNCATE
        assert isinstance(exc, RuntimeError)
        assert status.source == left
        assert status.tag == 90
        assert status.Get_count(MPI.DOUBLE) == 8
        assert small.tolist() == list(range(8))
        sent.Wait()
    req = comm.Irecv(bytearray(2), left, 91)
    comm.Send(b"toolong", right, 91)
    expect_error(MPI.ERR_TRUNCATE, req.Wait)


def errors() -> None:
    expect_error(MPI.ERR_RANK, comm.send, 1, size)
    expect_error(MPI.ERR_RANK, comm.Send, b"x", -7)
    expect_error(MPI.ERR_TAG, comm.send, 1, 0, tag=-5)
    expect_error(MPI.ERR_RANK, comm.recv, source=size + 5)
    expect_error(MPI.ERR_TAG, comm.Recv, bytearray(1), 0, -3)
    expect_error(MPI.ERR_COMM, MPI.COMM_NULL.send, 1, 0)
    expect_error(MPI.ERR_COMM, MPI.COMM_NULL.Get_rank)
    expect_error(MPI.ERR_BUFFER, comm.Recv, b"readonly", 0, 1)
    expect_error(MPI.ERR_COMM, comm.Free)


def requests() -> None:
    null = MPI.REQUEST_NULL
    assert null.wait() is None
    assert null.test() == (True, None)
    assert null.Wait() is True
    assert MPI.Request.waitany([null]) == (MPI.UNDEFINED, None)
    assert MPI.Request.testany([null]) == (MPI.UNDEFINED, True, None)
    assert MPI.Request.testall([]) == (True, [])
    assert MPI.Request.Waitsome([null]) is None
    assert MPI.Request.Testsome([null]) is None
    pending = comm.irecv(source=left, tag=100)
    assert pending.test() == (False, None)
    comm.Barrier()
    comm.send("late", right, tag=100)
    index, obj = MPI.Request.waitany([MPI.REQUEST_NULL, pending])
    assert (index, obj) == (1, "late")
    reqs = [comm.irecv(source=left, tag=101 + i) for i in range(3)]
    for i in (2, 0, 1):
        comm.send(i, right, tag=101 + i)
    done: list[int] = []
    while len(done) < 3:
        got = MPI.Request.Waitsome(reqs)
        assert got is not None
        done += got
    assert sorted(done) == [0, 1, 2]
    r1, r2 = comm.irecv(source=left, tag=105), comm.irecv(source=left, tag=106)
    comm.send("a", right, 105)
    comm.send("b", right, 106)
    flag, objs = False, None
    while not flag:
        flag, objs = MPI.Request.testall([r1, r2])
    assert objs == ["a", "b"]
    statuses = [MPI.Status(), MPI.Status()]
    r3, r4 = comm.Irecv(bytearray(4), left, 107), comm.Irecv(bytearray(4), left, 108)
    comm.Send(b"ab", right, 108)
    comm.Send(b"abc", right, 107)
    assert MPI.Request.Waitall([r3, r4], statuses)
    assert [s.Get_count() for s in statuses] == [3, 2]
    while True:
        index, flag = MPI.Request.Testany([comm.isend(0, rank, 109)])
        if flag:
            break
    comm.recv(source=rank, tag=109)
    cancelled = comm.irecv(source=left, tag=999)
    cancelled.Cancel()
    status = MPI.Status()
    cancelled.Wait(status)
    assert status.Is_cancelled()


def communicators() -> None:
    dup = comm.Dup()
    assert dup != comm
    assert dup.rank == rank
    assert dup.size == size
    assert MPI.Comm.Compare(dup, comm) == MPI.CONGRUENT
    assert MPI.Comm.Compare(comm, comm) == MPI.IDENT
    # isolation: the dup's message, sent first, is not taken by a receive on COMM_WORLD
    dup.send("on dup", right, tag=1)
    comm.send("on world", right, tag=1)
    assert comm.recv(source=left, tag=1) == "on world"
    assert dup.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG) == "on dup"
    half = comm.Split(color=rank % 2, key=-rank)
    members = [r for r in range(size) if r % 2 == rank % 2]
    assert half.size == len(members)
    assert half.rank == sorted(members, reverse=True).index(rank)
    total = half.allreduce(rank)
    assert total == sum(members)
    hr, hn = half.rank, half.size
    assert half.sendrecv(rank, (hr + 1) % hn, 5, source=(hr - 1) % hn, recvtag=5) in members
    none = comm.Split(MPI.UNDEFINED if rank == 0 else 1, 0)
    assert (none == MPI.COMM_NULL) == (rank == 0)
    if none != MPI.COMM_NULL:
        assert none.size == size - 1
        assert none.rank == rank - 1
        none.Free()
    half.Free()
    assert half == MPI.COMM_NULL
    dup.Free()
    for _ in range(50):  # context ids are recycled
        c = comm.Dup()
        c.Free()


def stats() -> None:
    if not EMU:
        return
    import emucluster.mpi

    s = emucluster.mpi.stats()
    assert s["rank"] == rank
    matching = s["matching"]
    assert isinstance(matching, dict)
    assert matching["arrivals"] > 0
    assert 0.0 <= matching["unexpected_ratio"] <= 1.0
    if size > 1:
        assert comm.Get_queue_stats()["protocol"]["rts_sent"] > 0  # type: ignore[index]


for section in (basics, lowercase, wildcards, ordering, uppercase, probes, proc_null_and_self,
                truncation, errors, requests, communicators, stats):  # fmt: skip
    if os.environ.get("SUITE_TRACE"):
        print(f"rank {rank}: {section.__name__}", flush=True)
    section()
    comm.Barrier()
print(f"p2p ok {rank}")
