"""NIC-multicast bcast against the host binomial one: random payloads and roots, buffers and
objects, p2p traffic interleaved, a sub-communicator and Ibcast. Prints ``mcast ok <rank>``
and this rank's multicast counters as JSON (``mcast stats <rank> {...}``).

argv: seed, rounds.
"""

from __future__ import annotations

import json
import random
import sys

import numpy as np

from emucluster import MPI, mpi

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
seed, rounds = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)  # the same stream on every rank
SIZES = (0, 1, 2, 8, 100, 1000, 4095, 4096, 4097, 8192, 16_000, 16_285, 16_286, 16_287, 40_000)

for i in range(rounds):
    root = rng.randrange(size)
    payload = rng.randbytes(rng.choice(SIZES))
    # p2p on the same communicator, sent before the bcast and received after it
    if rank == root:
        for dest in range(size):
            if dest != root:
                comm.send(("p2p", i), dest=dest, tag=7)
    got = comm.bcast(payload if rank == root else None, root=root, algorithm="nic-mcast")
    ref = comm.bcast(payload if rank == root else None, root=root, algorithm="binomial")
    assert got == ref == payload, (i, len(payload))
    buf = (
        np.frombuffer(payload, dtype=np.uint8).copy()
        if rank == root
        else np.zeros(len(payload), dtype=np.uint8)
    )
    comm.Bcast(buf, root=root)  # EMU_BCAST (emurun --bcast) picks the algorithm
    assert buf.tobytes() == payload, (i, "Bcast")
    if rank != root:
        assert comm.recv(source=root, tag=7) == ("p2p", i)

# several outstanding nonblocking ones, then a sub-communicator with its own groups
bufs = [np.full(64, r, dtype=np.int32) if rank == r % size else np.zeros(64, np.int32)
        for r in range(4)]  # fmt: skip
requests = [comm.Ibcast(b, root=r % size, algorithm="nic-mcast") for r, b in enumerate(bufs)]
MPI.Request.Waitall(requests)
assert all((b == r).all() for r, b in enumerate(bufs))
sub = comm.Split(rank % 2, rank)
value = sub.bcast({"color": rank % 2} if sub.rank == sub.size - 1 else None,
                  root=sub.size - 1, algorithm="nic-mcast")  # fmt: skip
assert value == {"color": rank % 2}
sub.Free()
comm.Barrier()
print(f"mcast ok {rank}", flush=True)
print(f"mcast stats {rank} {json.dumps(mpi.stats().get('mcast', {}))}", flush=True)
