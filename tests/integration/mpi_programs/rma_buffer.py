"""``memoryview(win)`` (PEP 688's buffer protocol: Python 3.12's, or 3.11's through the C base of
emucluster.pep688) on any number of nodes (>= 2); prints "view ok <rank>".

1. An Allocate window (unified model): each rank stores its words through ``memoryview(win)``;
   its right neighbour Gets them and Fetch_and_op-adds to one word under a lock; after a
   Barrier and ``Sync`` the view shows the neighbour's addition (the view is the memory the
   NIC reaches, not a copy).
2. A Create window (separate model): the view is the program's buffer; a Put from the left
   neighbour shows in it after ``Sync``, a store through it reaches the right neighbour's Get.
3. A dynamic window exports no bytes; a freed window (WIN_NULL) raises ERR_WIN, as mpi4py's.
"""

from __future__ import annotations

import numpy as np

from emucluster import MPI

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
right, left = (rank + 1) % size, (rank - 1) % size


def check(what: str, got: object, want: object) -> None:
    if got != want:
        raise AssertionError(f"rank {rank}: {what}: got {got!r}, want {want!r}")


def allocate_window() -> None:
    win = MPI.Win.Allocate(4 * 4, 4, MPI.INFO_NULL, world)
    memory = memoryview(win).cast("i")
    check("view size", (memory.nbytes, memory.readonly), (16, False))
    for i, value in enumerate([100 * rank, 1, 2, 3]):
        memory[i] = value
    world.Barrier()
    got = np.zeros(4, np.int32)
    prev = np.zeros(1, np.int32)
    win.Lock(right)
    win.Get(got, right)
    win.Flush(right)
    win.Fetch_and_op(np.array([rank + 10], np.int32), prev, right, 1, MPI.SUM)
    win.Unlock(right)
    check("Get of the neighbour's stores", got.tolist(), [100 * right, 1, 2, 3])
    check("Fetch_and_op's old value", int(prev[0]), 1)
    world.Barrier()
    win.Sync()
    check("the view after the neighbour's add", memory.tolist(), [100 * rank, 11 + left, 2, 3])
    memory.release()
    win.Free()


def create_window() -> None:
    private = np.zeros(4, np.int64)
    win = MPI.Win.Create(private, 8, MPI.INFO_NULL, world)
    view = memoryview(win).cast("q")
    win.Fence()
    win.Put(np.array([rank + 1000], np.int64), right, target=(2, 1, MPI.INT64_T))
    win.Fence()
    check("the view is the program's buffer", view.tolist(), private.tolist())
    check("a Put shows in the view", view[2], left + 1000)
    view[0] = 7 * rank
    win.Fence()
    got = np.zeros(1, np.int64)
    win.Get(got, right, target=(0, 1, MPI.INT64_T))
    win.Fence()
    check("a store through the view reaches a Get", int(got[0]), 7 * right)
    view.release()
    win.Free()


def dynamic_and_freed() -> None:
    dyn = MPI.Win.Create_dynamic(MPI.INFO_NULL, world)
    check("a dynamic window's bytes", memoryview(dyn).nbytes, 0)
    dyn.Free()
    try:
        memoryview(dyn)
    except MPI.Exception as exc:
        check("a freed window's error", exc.Get_error_class(), MPI.ERR_WIN)
    else:
        raise AssertionError("memoryview of a freed window did not raise")


def main() -> None:
    allocate_window()
    create_window()
    dynamic_and_freed()
    print(f"view ok {rank}", flush=True)


if __name__ == "__main__":
    main()
