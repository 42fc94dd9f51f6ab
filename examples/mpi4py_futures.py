"""mpi4py.futures on emucluster, unmodified:
``emurun -np 4 --mpi4py python -m mpi4py.futures examples/mpi4py_futures.py``.

Rank 0 runs this program; the other ranks serve as the pool's workers (mpi4py's shared-pool
mode: no process is spawned). It maps a function over the workers and checks every result.
"""

import math

from mpi4py.futures import MPIPoolExecutor


def work(n: int) -> float:
    """Something for a worker to do: the sum of the square roots up to n."""
    return sum(math.sqrt(i) for i in range(n))


if __name__ == "__main__":
    with MPIPoolExecutor() as pool:
        sizes = list(range(1000, 1040))
        results = list(pool.map(work, sizes))
        assert results == [work(n) for n in sizes]
        assert pool.submit(pow, 2, 10).result() == 1024
    print(f"mpi4py.futures ok: {len(results)} results")
