"""NICVM bcast on communicators that reuse one freed context id with other memberships: each
rank must get its own communicator's root's value (``nicvm reuse ok <rank>``).

The context id goes {0,1},{2,3} -> {1,2} -> {0,1},{2,3}: on the third, rank 0 (and 3) last
posted the same map for that id and rank 1 (and 2) another one, so a shell that remembered
freed communicators' maps would disagree on whether the call is the communicator's first
(which synchronises) and hang or mismatch."""

from __future__ import annotations

from emucluster import MPI

world = MPI.COMM_WORLD
rank = world.rank


def check(comm: MPI.Intracomm, name: str) -> None:
    root_node = world.rank - comm.rank  # ranks are consecutive world ranks here
    got = comm.bcast((name, rank) if comm.rank == 0 else None, root=0, algorithm="nicvm")
    assert got == (name, root_node), (rank, name, got)


pairs = world.Split(rank // 2, rank)  # {0, 1}, {2, 3}
check(pairs, "pairs")
pairs.Free()
middle = world.Split(0 if rank in (1, 2) else MPI.UNDEFINED, rank)  # {1, 2}: the same id
if middle != MPI.COMM_NULL:
    check(middle, "middle")
    middle.Free()
again = world.Split(rank // 2, rank)  # {0, 1}, {2, 3} once more: the same id
check(again, "again")
again.Free()
first = world.Split(0, rank)  # everyone
check(first, "first")
world.Barrier()
print(f"nicvm reuse ok {rank}", flush=True)
