"""Rounds of a ring exchange that last several seconds (a link is cut meanwhile):
``ring_rounds.py ROUNDS PAUSE_S``. Rank 0 prints ``started`` after the first round and
``rounds ok N`` at the end; every payload is checked."""

from __future__ import annotations

import sys
import time

from emucluster import MPI


def main() -> None:
    rounds, pause = int(sys.argv[1]), float(sys.argv[2])
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    for i in range(rounds):
        got = comm.sendrecv((rank, i, bytes(2000)), dest=right, source=left)
        assert got[:2] == (left, i), got[:2]
        if i == 0 and rank == 0:
            print("started", flush=True)
        time.sleep(pause)
    total = comm.allreduce(rounds)
    if rank == 0:
        print(f"rounds ok {total}", flush=True)


if __name__ == "__main__":
    main()
