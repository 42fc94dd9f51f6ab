"""Pi by the midpoint rule, the classic MPI example: ``emurun -np 4 python examples/pi.py [N]``.

Rank 0 broadcasts the number of intervals; every rank sums its share of
``4 / (1 + x^2)`` and a reduce adds the shares at rank 0, which prints the estimate and
its error.
"""

from __future__ import annotations

import math
import sys

from emucluster import MPI


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    n = comm.bcast(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000, root=0)
    h = 1.0 / n
    local = h * sum(4.0 / (1.0 + ((i + 0.5) * h) ** 2) for i in range(rank, n, size))
    pi = comm.reduce(local, op=MPI.SUM, root=0)
    if rank == 0:
        print(f"pi is approximately {pi:.16f}, error {abs(pi - math.pi):.2e} ({n} intervals)")


if __name__ == "__main__":
    main()
