"""mpi4py.futures spawning its workers, unmodified:
``emurun -np 1 --mpi4py python examples/mpi4py_futures_spawn.py``.

The one rank makes an ``MPIPoolExecutor``, which starts its workers with ``MPI.Comm.Spawn``:
emurun starts them as new emulated nodes (a nicd and a host each) joined to the running
fabric. It maps a function over them, checks every result, says on which nodes the work ran,
and shuts the pool down (the workers exit; the job goes on and ends with this rank).
"""

import math
import os

from mpi4py.futures import MPIPoolExecutor

WORKERS = 2


def work(n: int) -> float:
    """Something for a worker to do: the sum of the square roots up to n."""
    return sum(math.sqrt(i) for i in range(n))


def where(_: int) -> str:
    """The emulated node a task ran on (a spawned worker's node, not this rank's)."""
    return os.environ["EMU_NIC_SOCKET"].rsplit("/", 1)[-1]


if __name__ == "__main__":
    with MPIPoolExecutor(max_workers=WORKERS) as pool:
        sizes = list(range(1000, 1040))
        results = list(pool.map(work, sizes))
        assert results == [work(n) for n in sizes]
        assert pool.submit(pow, 2, 10).result() == 1024
        sockets = set(pool.map(where, range(20)))
    mine = os.environ["EMU_NIC_SOCKET"].rsplit("/", 1)[-1]
    assert mine not in sockets
    print(f"mpi4py.futures spawn ok: {len(results)} results from {len(sockets)} spawned nodes")
