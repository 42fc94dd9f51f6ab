"""Hello from every rank: ``emurun -np 4 python examples/hello.py``.

Every rank reports its rank, the job size and its (emulated) node name; rank 0 gathers the
greetings and prints them in rank order.
"""

from __future__ import annotations

from emucluster import MPI


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    greeting = f"Hello from rank {rank} of {size} on {MPI.Get_processor_name()}"
    greetings = comm.gather(greeting, root=0)
    if rank == 0:
        assert greetings is not None
        print("\n".join(greetings))


if __name__ == "__main__":
    main()
