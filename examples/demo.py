"""The quick start's demo, an mpi4py program on the cluster: ``emurun -np 8 examples/demo.py``.

Every rank says hello (gathered at rank 0), the ranks estimate pi together (bcast + reduce),
exchange a 1 MB numpy array around the ring (rendezvous: RTS, CTS, then the NIC writes the
payload into the receiver's registered shared memory) and agree on a checksum with
Allreduce; ranks 0 and 1 time an 8-byte ping-pong through their NICs. Rank 0 prints it all.
Nothing but the import differs from an mpi4py program.
"""

from __future__ import annotations

import math
import time

import numpy as np

from emucluster import MPI

PI_INTERVALS = 200_000
RING_DOUBLES = 131_072  # 1 MiB
PINGPONG_ROUNDS = 200


def pingpong_us(comm: MPI.Intracomm) -> float | None:
    """One-way microseconds of an 8-byte Send/Recv ping-pong between ranks 0 and 1."""
    buf = np.zeros(1)
    if comm.rank > 1:
        return None
    peer = 1 - comm.rank
    start = time.perf_counter()
    for _ in range(PINGPONG_ROUNDS):
        if comm.rank == 0:
            comm.Send(buf, dest=peer)
            comm.Recv(buf, source=peer)
        else:
            comm.Recv(buf, source=peer)
            comm.Send(buf, dest=peer)
    return (time.perf_counter() - start) / PINGPONG_ROUNDS / 2 * 1e6


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    hellos = comm.gather(f"rank {rank} of {size} on {MPI.Get_processor_name()}", root=0)

    n = comm.bcast(PI_INTERVALS if rank == 0 else None, root=0)
    h = 1.0 / n
    share = h * sum(4.0 / (1.0 + ((i + 0.5) * h) ** 2) for i in range(rank, n, size))
    pi = comm.reduce(share, op=MPI.SUM, root=0)

    mine = np.full(RING_DOUBLES, float(rank))
    theirs = np.empty_like(mine)
    left, right = (rank - 1) % size, (rank + 1) % size
    start = MPI.Wtime()
    comm.Sendrecv(mine, dest=right, sendtag=7, recvbuf=theirs, source=left, recvtag=7)
    ring_s = MPI.Wtime() - start
    assert (theirs == left).all(), "the ring delivered the wrong array"
    checksum = comm.allreduce(float(theirs.sum()), op=MPI.SUM)

    comm.Barrier()
    one_way = pingpong_us(comm) if size > 1 else None
    if rank == 0:
        assert hellos is not None
        assert pi is not None
        print("\n".join(f"hello from {line}" for line in hellos))
        print(f"pi ~ {pi:.12f} (error {abs(pi - math.pi):.1e}) from {size} ranks")
        expected = RING_DOUBLES * size * (size - 1) / 2
        print(f"ring of 1 MiB arrays: {ring_s * 1e3:.1f} ms, checksum {checksum:.0f} "
              f"(expected {expected:.0f})")  # fmt: skip
        if one_way is not None:
            print(f"8-byte Send/Recv ping-pong, ranks 0-1: {one_way:.0f} us one way")


if __name__ == "__main__":
    main()
