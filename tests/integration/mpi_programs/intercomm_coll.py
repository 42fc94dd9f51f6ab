"""Collectives on an intercommunicator between two groups of unequal size (the first rank
alone against the rest, from 2 nodes); prints "inter ok <rank>".

The groups are made with Create_intercomm over COMM_WORLD; every result comes from the other
group and is checked exactly: a Bcast and a Reduce rooted in each group at its last process,
a Gatherv landing blocks in reverse order, an allgather of objects, an Alltoall, an
Ireduce_scatter_block and an Allreduce_init started twice, then Merge.
"""

from __future__ import annotations

import numpy as np

from emucluster import MPI

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
LOW = 1  # world rank 0 alone in the low group


def check(what: str, got: object, want: object) -> None:
    if got != want:
        raise AssertionError(f"rank {rank}: {what}: got {got!r}, want {want!r}")


color = 0 if rank < LOW else 1
half = world.Split(color, key=rank)
inter = half.Create_intercomm(0, world, LOW if color == 0 else 0, tag=77)
mine = list(range(LOW)) if color == 0 else list(range(LOW, size))
theirs = sorted(set(range(size)) - set(mine))
rs = inter.remote_size
check("sizes", (inter.size, rs), (len(mine), len(theirs)))

for root_color in (0, 1):
    if color == root_color:
        root = MPI.ROOT if inter.rank == inter.size - 1 else MPI.PROC_NULL
    else:
        root = rs - 1
    sender = theirs[-1] if color != root_color else None
    buf = np.arange(6, dtype=np.int64) + 100 * rank if root == MPI.ROOT else np.zeros(6, np.int64)
    inter.Bcast(buf, root=root)
    if sender is not None:
        check("Bcast", buf.tolist(), [100 * sender + i for i in range(6)])
    out = np.full(2, -1, dtype=np.int64)
    inter.Reduce(np.array([rank, 1], dtype=np.int64) if root >= 0 else None,
                 out if root == MPI.ROOT else None, op=MPI.SUM, root=root)  # fmt: skip
    if root == MPI.ROOT:
        check("Reduce", out.tolist(), [sum(theirs), len(theirs)])
    if root == MPI.ROOT:  # the other group's blocks in reverse order
        recv = np.full(rs, -1, dtype=np.int64)
        inter.Gatherv(None, [recv, [1] * rs, [rs - 1 - i for i in range(rs)], MPI.INT64_T],
                      root=root)  # fmt: skip
        check("Gatherv", recv.tolist(), theirs[::-1])
    else:
        inter.Gatherv(np.array([rank], dtype=np.int64) if root >= 0 else None, None, root=root)

check("allgather", inter.allgather(("x", rank)), [("x", r) for r in theirs])
recv = np.full((rs, 2), -1, dtype=np.int64)
inter.Alltoall(np.array([[rank, j] for j in range(rs)], dtype=np.int64), recv)
me = mine.index(rank)
check("Alltoall", recv.tolist(), [[r, me] for r in theirs])
block = np.full(rs, -1, dtype=np.int64)
inter.Ireduce_scatter_block(np.arange(inter.size * rs, dtype=np.int64), block, MPI.SUM).Wait()
check("Ireduce_scatter_block", block.tolist(),
      [len(theirs) * (me * rs + i) for i in range(rs)])  # fmt: skip
total = np.zeros(1, dtype=np.int64)
req = inter.Allreduce_init(np.array([rank], dtype=np.int64), total, op=MPI.MAX)
for _ in range(2):
    total[0] = -1
    req.Start()
    req.Wait()
    check("Allreduce_init", int(total[0]), max(theirs))
req.Free()
merged = inter.Merge(high=color == 1)
check("Merge", (merged.size, merged.rank, merged.allreduce(rank)), (size, rank, sum(range(size))))
for comm in (merged, inter, half):
    comm.Free()
print(f"inter ok {rank}", flush=True)
