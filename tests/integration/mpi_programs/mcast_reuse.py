"""NIC-multicast bcast on a communicator whose context id was freed and reused by another
membership: each rank must get its own communicator's root's value (``reuse ok <rank>``).

Then more of the same id's lives: both roots of each pair; {1, 2} alone (ranks 0 and 3 keep
their groups of the pairs' epoch); the pairs again; an Ibcast still pending at a Free (its
message may reach a NIC whose group was already freed); everyone again."""

from __future__ import annotations

import numpy as np

from emucluster import MPI

world = MPI.COMM_WORLD
first = world.Split(0, world.rank)  # everyone
first.bcast("first" if first.rank == 0 else None, root=0, algorithm="nic-mcast")
first.Free()  # its context id is free again
pairs = world.Split(world.rank // 2, world.rank)  # {0, 1}, {2, 3}: may reuse that context id
got = pairs.bcast(("pairs", world.rank) if pairs.rank == 0 else None, root=0,
                  algorithm="nic-mcast")  # fmt: skip
assert got == ("pairs", world.rank - world.rank % 2), (world.rank, got)


def check(comm: MPI.Intracomm, name: str) -> None:
    """A bcast from every root of ``comm`` (consecutive world ranks) gives that root's value."""
    low = world.rank - comm.rank
    for root in range(comm.size):
        mine = (name, world.rank) if comm.rank == root else None
        got = comm.bcast(mine, root=root, algorithm="nic-mcast")
        assert got == (name, low + root), (world.rank, name, root, got)


check(pairs, "pairs")
pairs.Free()
middle = world.Split(0 if world.rank in (1, 2) else MPI.UNDEFINED, world.rank)  # {1, 2}
if middle != MPI.COMM_NULL:
    check(middle, "middle")
    middle.Free()
again = world.Split(world.rank // 2, world.rank)  # {0, 1}, {2, 3} once more
check(again, "again")
buf = np.full(4, world.rank, dtype="i4")
request = again.Ibcast(buf, root=1, algorithm="nic-mcast")
again.Free()  # the Ibcast is still pending at some ranks
request.Wait()
assert (buf == world.rank - world.rank % 2 + 1).all(), (world.rank, buf)
everyone = world.Split(0, world.rank)
check(everyone, "everyone")
everyone.Free()
world.Barrier()
print(f"reuse ok {world.rank}", flush=True)
