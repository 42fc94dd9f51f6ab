"""A token goes around the ring of ranks ``LAPS`` times: ``emurun -np 4 python examples/ring.py``.

Rank 0 starts the token (a counter); every rank receives it from its left neighbour, adds
one and sends it to its right neighbour. After the last lap rank 0 prints the count
(``size * LAPS``) and the mean time per hop. Uses the lowercase (pickle) API.
"""

from __future__ import annotations

from emucluster import MPI

LAPS = 10


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    right, left = (rank + 1) % size, (rank - 1) % size
    start = MPI.Wtime()
    token = 0
    if rank == 0:
        comm.send(token, dest=right, tag=1)
    for lap in range(LAPS):
        token = comm.recv(source=left, tag=1)
        token += 1
        if rank != 0 or lap < LAPS - 1:
            comm.send(token, dest=right, tag=1)
    if rank == 0:
        elapsed = MPI.Wtime() - start
        print(f"token made {LAPS} laps of {size} ranks: count {token} (expected {LAPS * size})")
        print(f"{elapsed / (LAPS * size) * 1e6:.0f} us per hop")


if __name__ == "__main__":
    main()
