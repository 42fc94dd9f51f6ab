"""Every algorithm of the 8-byte Bcast, Reduce and Barrier, chosen per call, on real processes.

Each rank prints ``small ok <rank>``. Barrier: every rank's entry and exit on the machine's
monotonic clock (one kernel, so comparable across ranks) are gathered, and no rank may leave
before the last one entered; a rank sleeps a little, by rank, before some barriers so the
entries differ. Bcast and Reduce of one double against values computed locally.
"""

from __future__ import annotations

import time

import numpy as np

from emucluster import MPI, coll

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
ROUNDS = 3

for name in coll.choices("barrier"):
    for round_ in range(ROUNDS):
        if round_ == 1:
            time.sleep(0.002 * ((rank * 7) % size))
        entered = time.monotonic()
        comm.Barrier(algorithm=name)
        left = time.monotonic()
        times = comm.allgather((entered, left))
        last_in = max(t[0] for t in times)
        first_out = min(t[1] for t in times)
        assert last_in <= first_out, f"barrier {name}: a rank left before all entered"
    comm.barrier(algorithm=name)  # lowercase, and the nonblocking one
    comm.Ibarrier(algorithm=name).Wait()

for name in coll.choices("bcast"):
    for root in sorted({0, size - 1, size // 2}):
        for round_ in range(ROUNDS):
            value = np.array([float(root * 100 + round_)]) if rank == root else np.zeros(1)
            comm.Bcast([value, MPI.DOUBLE], root=root, algorithm=name)
            assert value[0] == root * 100 + round_, (name, root, value)

for name in coll.choices("reduce"):
    for root in sorted({0, size - 1}):
        for round_ in range(ROUNDS):
            mine = np.array([float(rank + round_)])
            out = np.zeros(1)
            comm.Reduce([mine, MPI.DOUBLE], [out, MPI.DOUBLE], op=MPI.SUM, root=root,
                        algorithm=name)  # fmt: skip
            if rank == root:
                assert out[0] == size * (size - 1) / 2 + size * round_, (name, root, out)

# The default bcast: NIC multicast on COMM_WORLD from 3 ranks, never on a communicator whose
# context id may be reused (a Dup), where it is the host binomial tree.
from emucluster.offload.nic_mcast import shell  # noqa: E402

dup = comm.Dup()


def sent_and_received() -> tuple[int, int]:
    active = shell.active()
    return (
        (0, 0) if active is None else (active.counters["multicasts"], active.counters["received"])
    )


for c, nic, blocking in ((comm, size >= 3, True), (comm, size >= 3, False), (dup, False, True)):
    before = sent_and_received()
    comm.Barrier()  # nobody multicasts before everyone has read its counters
    value = np.array([42.0]) if c.rank == 0 else np.zeros(1)
    if blocking:
        c.Bcast([value, MPI.DOUBLE], root=0)
    else:
        c.Ibcast([value, MPI.DOUBLE], root=0).Wait()
    assert value[0] == 42.0
    after = sent_and_received()
    moved = after[0 if c.rank == 0 else 1] - before[0 if c.rank == 0 else 1]
    assert moved == (1 if nic else 0), (c is comm, before, after)
dup.Free()
comm.Barrier()
print(f"small ok {rank}", flush=True)
