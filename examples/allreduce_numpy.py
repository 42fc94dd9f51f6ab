"""Buffer Allreduce on numpy arrays: ``emurun -np 4 python examples/allreduce_numpy.py``.

Every rank contributes an array filled with its rank; ``Allreduce`` with SUM, MAX and
MAXLOC (on (value, index) pairs) gives every rank the same results, which each checks.
Shows the buffer specs ``array`` and ``[array, MPI.DOUBLE]`` and ``MPI.IN_PLACE``.
"""

from __future__ import annotations

import numpy as np

from emucluster import MPI

N = 100_000  # doubles: 800 kB, far above the eager limit


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    mine = np.full(N, float(rank))
    total = np.empty(N)
    comm.Allreduce([mine, MPI.DOUBLE], [total, MPI.DOUBLE], op=MPI.SUM)
    assert (total == size * (size - 1) / 2).all()
    largest = np.arange(N, dtype="d") * (rank + 1)
    comm.Allreduce(MPI.IN_PLACE, largest, op=MPI.MAX)
    assert (largest == np.arange(N) * size).all()
    pair_type = np.dtype([("value", "f8"), ("index", "i4")], align=True)  # C struct layout
    pair = np.array([(float((rank * 7) % size), rank)], dtype=pair_type)
    best = np.empty_like(pair)
    comm.Allreduce([pair, MPI.DOUBLE_INT], [best, MPI.DOUBLE_INT], op=MPI.MAXLOC)
    if rank == 0:
        print(f"sum of ranks in every element: {total[0]:.0f}; max ok")
        print(f"maxloc: value {best[0]['value']:.0f} at rank {best[0]['index']}")


if __name__ == "__main__":
    main()
