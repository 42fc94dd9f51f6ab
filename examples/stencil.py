"""1-D heat diffusion with halo exchange by Sendrecv: ``emurun -np 4 python examples/stencil.py``.

The rod [0, 1] is split evenly among the ranks; each step exchanges one ghost cell with
each neighbour (``Sendrecv``; PROC_NULL at the rod's ends, whose temperature stays fixed)
and applies the explicit three-point stencil. Rank 0 gathers the rod and prints a
coarse profile and the total heat, which must equal the serial result.
"""

from __future__ import annotations

import numpy as np

from emucluster import MPI

CELLS = 64  # per rank
STEPS = 200
ALPHA = 0.25  # diffusion number: stable for <= 0.5


def initial(total: int) -> np.ndarray:
    u = np.zeros(total)
    u[total // 3 : 2 * total // 3] = 100.0
    return u


def serial(total: int) -> np.ndarray:
    u = initial(total)
    for _ in range(STEPS):
        u[1:-1] = u[1:-1] + ALPHA * (u[:-2] - 2 * u[1:-1] + u[2:])
    return u


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    total = CELLS * size
    u = np.zeros(CELLS + 2)  # with one ghost cell at each end
    u[1:-1] = initial(total)[rank * CELLS : (rank + 1) * CELLS]
    left = rank - 1 if rank > 0 else MPI.PROC_NULL
    right = rank + 1 if rank < size - 1 else MPI.PROC_NULL
    for _ in range(STEPS):
        comm.Sendrecv(u[1:2], left, 0, u[-1:], right, 0)  # my first cell -> left
        comm.Sendrecv(u[-2:-1], right, 1, u[0:1], left, 1)  # my last cell -> right
        lo = 2 if rank == 0 else 1  # the rod's end cells keep their temperature
        hi = CELLS if rank == size - 1 else CELLS + 1
        new = u.copy()
        new[lo:hi] = u[lo:hi] + ALPHA * (u[lo - 1 : hi - 1] - 2 * u[lo:hi] + u[lo + 1 : hi + 1])
        u = new
    rod = np.empty(total) if rank == 0 else None
    comm.Gather(np.ascontiguousarray(u[1:-1]), rod, root=0)
    if rank == 0:
        assert rod is not None
        assert np.allclose(rod, serial(total)), "differs from the serial stencil"
        profile = " ".join(f"{v:5.1f}" for v in rod[:: max(1, total // 8)])
        print(f"after {STEPS} steps on {size} ranks: {profile}")
        print(f"total heat {rod.sum():.6f} (serial {serial(total).sum():.6f})")


if __name__ == "__main__":
    main()
