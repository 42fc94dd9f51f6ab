"""Passive-target locks queued at the target's NIC, on 3 or more nodes; prints
"locks ok <rank> <exclusive epochs> <shared epochs>".

Rank 0's window holds a counter and a busy word. Every rank but 0 takes ROUNDS exclusive
locks on rank 0 and in each does a read-modify-write of the counter with separate Get and
Put (lost updates unless the lock excludes the others), setting the busy word while it
works; between them it takes shared locks and reads the busy word, which must read 0 (no
exclusive holder at the same time). Rank 0 reads under shared locks back to back until the
counter reaches its total: a reader-preferring lock would starve the writers and the loop
would not end; every writer must finish its rounds within DEADLINE_S.
"""

from __future__ import annotations

import time

import numpy as np

from emucluster import MPI

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
ROUNDS = 12
DEADLINE_S = 150.0
COUNTER, BUSY = 0, 1


def check(what: str, got: object, want: object) -> None:
    if got != want:
        raise AssertionError(f"rank {rank}: {what}: got {got!r}, want {want!r}")


def read(win: MPI.Win, word: int) -> int:
    buf = np.zeros(1, np.int64)
    win.Get(buf, 0, target=(word, 1, MPI.INT64_T))
    win.Flush(0)
    return int(buf[0])


def write(win: MPI.Win, word: int, value: int) -> None:
    win.Put(np.array([value], np.int64), 0, target=(word, 1, MPI.INT64_T))
    win.Flush(0)


def shared_busy_check(win: MPI.Win) -> int:
    """One shared epoch: the busy word reads 0; the counter as seen."""
    win.Lock(0, MPI.LOCK_SHARED)
    check("busy word under a shared lock", read(win, BUSY), 0)
    seen = read(win, COUNTER)
    win.Unlock(0)
    return seen


def main() -> None:
    assert size >= 3, "contention needs 3 or more ranks"
    win = MPI.Win.Allocate(8 * 2 if rank == 0 else 0, 8, MPI.INFO_NULL, world)
    if rank == 0:
        np.frombuffer(win.tomemory(), np.int64)[:] = 0
    world.Barrier()
    total = ROUNDS * (size - 1)
    started = time.monotonic()
    exclusive = shared = 0
    if rank == 0:
        while shared_busy_check(win) != total:
            shared += 1
            if time.monotonic() - started > DEADLINE_S:
                raise AssertionError("writers starved: the counter never reached its total")
    else:
        for _ in range(ROUNDS):
            win.Lock(0, MPI.LOCK_EXCLUSIVE)
            check("busy word when the exclusive lock is granted", read(win, BUSY), 0)
            write(win, BUSY, rank)
            value = read(win, COUNTER)
            time.sleep(0.002)  # widen the window a second holder would hit
            write(win, COUNTER, value + 1)
            write(win, BUSY, 0)
            win.Unlock(0)
            exclusive += 1
            shared_busy_check(win)
            shared += 1
        if time.monotonic() - started > DEADLINE_S:
            raise AssertionError(f"rounds took {time.monotonic() - started:.0f} s")
    world.Barrier()
    win.Lock_all()
    check("counter", read(win, COUNTER), total)
    win.Unlock_all()
    world.Barrier()
    win.Free()
    print(f"locks ok {rank} {exclusive} {shared}", flush=True)


main()
