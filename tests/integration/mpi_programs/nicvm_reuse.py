"""NICVM bcast on communicators that reuse one freed context id with other memberships: each
rank must get its own communicator's root's value (``nicvm reuse ok <rank>``).

mcast_reuse.py's sequence first (everyone, freed, then pairs), then the id goes {0,1},{2,3}
-> {1,2} -> {0,1},{2,3}: on the last, rank 0 (and 3) last posted the same map for that id and
rank 1 (and 2) another one, so a shell that remembered freed communicators' maps disagreed
on whether the call is the communicator's first (which synchronises) and hung."""

from __future__ import annotations

from emucluster import MPI

world = MPI.COMM_WORLD
rank = world.rank


def check(comm: MPI.Intracomm, name: str) -> None:
    """A bcast from every root of ``comm`` (consecutive world ranks) gives that root's value."""
    low = rank - comm.rank
    for root in range(comm.size):
        mine = (name, rank) if comm.rank == root else None
        got = comm.bcast(mine, root=root, algorithm="nicvm")
        assert got == (name, low + root), (rank, name, root, got)


first = world.Split(0, rank)  # everyone
check(first, "first")
first.Free()  # its context id is free again
pairs = world.Split(rank // 2, rank)  # {0, 1}, {2, 3}: the same id
check(pairs, "pairs")
pairs.Free()
middle = world.Split(0 if rank in (1, 2) else MPI.UNDEFINED, rank)  # {1, 2}: the same id
if middle != MPI.COMM_NULL:
    check(middle, "middle")
    middle.Free()
again = world.Split(rank // 2, rank)  # {0, 1}, {2, 3} once more: the same id
check(again, "again")
again.Free()
everyone = world.Split(0, rank)
check(everyone, "everyone")
everyone.Free()
world.Barrier()
print(f"nicvm reuse ok {rank}", flush=True)
