"""Where passive-target progress happens (2 ranks); prints "stall <mode> <rank> ok".

Rank 1 (the target) runs a pure-Python loop for LOOP_S seconds without calling MPI, noting
when it ended on the machine's monotonic clock (shared by the ranks); rank 0 meanwhile runs
one Lock/Put/Unlock epoch at rank 1 and notes when it ended. With the NIC executing the
epoch (the default) the target's loop waits for the put's bytes and ends only after them;
with host-driven progress (``EMU_RMA_PROGRESS=host``) the epoch can end only after the loop,
when the target enters MPI again. Outcomes compared, not durations.
"""

from __future__ import annotations

import os
import time

import numpy as np

from emucluster import MPI

world = MPI.COMM_WORLD
rank = world.rank
MODE = os.environ.get("EMU_RMA_PROGRESS", "nic")
LOOP_S = 2.0
DEADLINE_S = 120.0

win = MPI.Win.Allocate(8 if rank == 1 else 0, 8, MPI.INFO_NULL, world)
mem = np.frombuffer(win.tomemory(), np.int64)
if rank == 1:
    mem[:] = 0
world.Barrier()
if rank == 1:
    started = time.monotonic()
    spins = 0
    # pure Python, no MPI call: run LOOP_S at least; in NIC mode also until the put landed
    while time.monotonic() - started < LOOP_S or (MODE == "nic" and mem[0] != 7):
        spins += 1
        if time.monotonic() - started > DEADLINE_S:
            raise AssertionError(f"rank 1: the put never landed: {mem.tolist()}")
    end = time.monotonic()
else:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(np.array([7], np.int64), 1)
    win.Unlock(1)
    end = time.monotonic()
ends = world.gather(end, root=0)
world.Barrier()
if rank == 1:
    assert int(mem[0]) == 7, mem.tolist()
if rank == 0:
    epoch_end, loop_end = ends
    if MODE == "host":
        assert epoch_end > loop_end, "host-driven: the epoch ended while the target computed"
    else:
        assert epoch_end < loop_end, "NIC: the loop ended before the NIC applied the put"
win.Free()
print(f"stall {MODE} {rank} ok", flush=True)
