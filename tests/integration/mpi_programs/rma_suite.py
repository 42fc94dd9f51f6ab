"""One-sided communication on any number of nodes (>= 2); prints "rma ok <rank>".

1. Passive target while the target computes: rank 0 enters a pure-Python busy loop (no MPI
   call) until its window shows the flag the last origin puts there; the origins lock rank 0,
   put, accumulate, fetch-and-add and unlock meanwhile. Only the target's NIC can execute
   them, so the loop ends only if it does (within a generous deadline, else a failure).
2. Atomicity: every rank fetch-and-adds 1 to one counter many times under Lock_all; the old
   values every rank saw are all distinct and cover 0..total-1, and the counter is the total.
3. Fence: a ring of Put/Get/Accumulate over a Create window (separate model) with a strided
   target datatype, checked element by element (a Get sees what a third rank put in the
   epoch before); Get_accumulate and Compare_and_swap.
4. A dynamic window: memory attached at its address, Put/Accumulate/Get at addresses.
5. PSCW and the request forms (Rput, Rget, Raccumulate, Rget_accumulate); every data movement
   to PROC_NULL completes at once whatever its origin buffer (``MPI.BOTTOM``), as mpi4py's
   test_rma_nb has it, and leaves the window as it was.
"""

from __future__ import annotations

import time

import numpy as np

from emucluster import MPI

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
DEADLINE_S = 90.0
ROUNDS = 40


def check(what: str, got: object, want: object) -> None:
    if got != want:
        raise AssertionError(f"rank {rank}: {what}: got {got!r}, want {want!r}")


def passive_target_while_computing() -> None:
    win = MPI.Win.Allocate(8 * 16, 8, MPI.INFO_NULL, world)
    mem = np.frombuffer(win.tomemory(), np.int64)
    mem[:] = 0
    world.Barrier()
    if rank == 0:
        started = time.monotonic()
        spins = 0
        while mem[15] != size - 1:  # pure Python: this host never enters the library
            spins += 1
            if time.monotonic() - started > DEADLINE_S:
                raise AssertionError(f"flag never set: window {mem.tolist()}")
        check("origins' puts", mem[1:size].tolist(), [100 + r for r in range(1, size)])
        check("accumulated", int(mem[0]), sum(range(1, size)))
        check("fetch-and-add", int(mem[14]), size - 1)
        check("busy loop ran", spins > 0, True)
    else:
        win.Lock(0, MPI.LOCK_EXCLUSIVE)
        win.Put(np.array([100 + rank], np.int64), 0, rank)
        win.Accumulate(np.array([rank], np.int64), 0, 0, MPI.SUM)
        old = np.zeros(1, np.int64)
        win.Fetch_and_op(np.array([1], np.int64), old, 0, 14, MPI.SUM)
        win.Unlock(0)
        # the last origin to arrive sets the flag: the counter at 14 says how many came
        win.Lock(0, MPI.LOCK_SHARED)
        win.Accumulate(np.array([1], np.int64), 0, 15, MPI.SUM)
        win.Unlock(0)
    world.Barrier()
    win.Free()


def atomic_counter() -> None:
    win = MPI.Win.Allocate(8 if rank == 0 else 0, 8, MPI.INFO_NULL, world)
    if rank == 0:
        np.frombuffer(win.tomemory(), np.int64)[:] = 0
    world.Barrier()
    seen = []
    one, old = np.ones(1, np.int64), np.zeros(1, np.int64)
    win.Lock_all()
    for _ in range(ROUNDS):
        win.Fetch_and_op(one, old, 0, 0, MPI.SUM)
        win.Flush(0)
        seen.append(int(old[0]))
    win.Unlock_all()
    everyone = sorted(v for part in world.allgather(seen) for v in part)
    check("fetch-and-add values", everyone, list(range(ROUNDS * size)))
    world.Barrier()
    if rank == 0:
        check("counter", int(np.frombuffer(win.tomemory(), np.int64)[0]), ROUNDS * size)
    win.Free()


def fence_ring() -> None:
    n = 6
    local = np.full(2 * n, -1, np.int32)
    win = MPI.Win.Create(local, 4, MPI.INFO_NULL, world)
    check("model", win.model, MPI.WIN_SEPARATE)
    strided = MPI.INT.Create_vector(n, 1, 2).Commit()
    right, left = (rank + 1) % size, (rank - 1) % size
    win.Fence()
    win.Put(np.arange(n, dtype=np.int32) + 10 * rank, right, [0, 1, strided])
    win.Fence()
    check("strided put", local[0::2].tolist(), [10 * left + i for i in range(n)])
    got = np.zeros(n, np.int32)
    win.Get(got, right, [0, 1, strided])
    far = (rank + 2) % size  # what a third rank (far's left) put there in the last epoch
    seen = np.zeros(n, np.int32)
    win.Get(seen, far, [0, 1, strided])
    win.Accumulate(np.ones(n, np.int32), left, [1, 1, strided], MPI.SUM)
    win.Fence()
    check("get", got.tolist(), [10 * rank + i for i in range(n)])
    check(
        "get what a third rank put", seen.tolist(), [10 * ((far - 1) % size) + i for i in range(n)]
    )
    check("accumulate into the gaps the put left", local[1::2].tolist(), [0] * n)
    fetched = np.zeros(1, np.int32)
    win.Get_accumulate(np.array([5], np.int32), fetched, right, 0, MPI.MAX)
    win.Fence()
    check("get_accumulate old", int(fetched[0]), 10 * rank)
    check("get_accumulate max", int(local[0]), max(5, 10 * left))
    result = np.zeros(1, np.int32)
    win.Compare_and_swap(np.array([77], np.int32), np.array([local[0]], np.int32), result, rank, 0)
    win.Fence(MPI.MODE_NOSUCCEED)
    check("compare_and_swap", (int(result[0]), int(local[0])), (max(5, 10 * left), 77))
    strided.Free()
    win.Free()


def pscw_and_requests() -> None:
    win = MPI.Win.Allocate(4 * size, 4, MPI.INFO_NULL, world)
    mem = np.frombuffer(win.tomemory(), np.int32)
    mem[:] = 0
    world.Barrier()
    group = win.Get_group()
    others = group.Excl([rank])
    win.Post(others)
    win.Start(others)
    for peer in range(size):
        if peer != rank:
            win.Rput(np.array([rank + 1], np.int32), peer, rank).Wait()
    win.Complete()
    win.Wait()
    check("pscw puts", mem.tolist(), [0 if r == rank else r + 1 for r in range(size)])
    world.Barrier()
    target = (rank + 1) % size
    win.Lock(target, MPI.LOCK_SHARED)
    reqs = [win.Raccumulate(np.array([1000], np.int32), target, rank, MPI.SUM)]
    win.Flush(target)
    got = np.zeros(size, np.int32)
    old = np.zeros(1, np.int32)
    reqs.append(win.Rget(got, target))
    reqs.append(win.Rget_accumulate(np.zeros(1, np.int32), old, target, rank, MPI.NO_OP))
    MPI.Request.Waitall(reqs)
    win.Unlock(target)
    check("rget sees own raccumulate", int(got[rank]), 1000 + rank + 1)
    check("rget_accumulate no_op", int(old[0]), 1000 + rank + 1)
    world.Barrier()  # the left neighbour's accumulate into this window is done before `before`
    win.Lock_all()
    before = mem.tolist()
    null = MPI.PROC_NULL
    reqs = [win.Rput(MPI.BOTTOM, null, None), win.Rget(MPI.BOTTOM, null, None),
            win.Raccumulate([None, MPI.INT], null, None, MPI.SUM),
            win.Rget_accumulate([None, MPI.INT], [None, MPI.INT], null, None, MPI.SUM)]  # fmt: skip
    MPI.Request.Waitall(reqs)
    check("PROC_NULL requests done", [r == MPI.REQUEST_NULL for r in reqs], [True] * 4)
    win.Put(MPI.BOTTOM, null)
    win.Get(MPI.BOTTOM, null)
    win.Unlock_all()
    check("PROC_NULL leaves the window", mem.tolist(), before)
    others.Free()
    group.Free()
    world.Barrier()
    win.Free()


def dynamic_window() -> None:
    win = MPI.Win.Create_dynamic(MPI.INFO_NULL, world)
    memory = np.full(8, -1, np.int32)
    win.Attach(memory)
    addresses = world.allgather(MPI.Get_address(memory))
    right = (rank + 1) % size
    win.Fence()
    win.Put(np.array([rank, rank], np.int32), right, addresses[right] + 8)
    win.Accumulate(np.array([10], np.int32), right, addresses[right], MPI.SUM)
    win.Fence()
    left = (rank - 1) % size
    check("dynamic window", memory.tolist(), [9, -1, left, left, -1, -1, -1, -1])
    win.Lock(right, MPI.LOCK_SHARED)
    got = np.zeros(2, np.int32)
    win.Get(got, right, addresses[right] + 8)
    win.Unlock(right)
    check("dynamic get", got.tolist(), [rank, rank])
    world.Barrier()
    win.Detach(memory)
    win.Free()


passive_target_while_computing()
atomic_counter()
dynamic_window()
fence_ring()
pscw_and_requests()
print(f"rma ok {rank}", flush=True)
