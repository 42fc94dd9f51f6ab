"""NIC-multicast bcast on a communicator whose context id was freed and reused by another
membership: each rank must get its own communicator's root's value (``reuse ok <rank>``)."""

from __future__ import annotations

from emucluster import MPI

world = MPI.COMM_WORLD
first = world.Split(0, world.rank)  # everyone
first.bcast("first" if first.rank == 0 else None, root=0, algorithm="nic-mcast")
first.Free()  # its context id is free again
pairs = world.Split(world.rank // 2, world.rank)  # {0, 1}, {2, 3}: may reuse that context id
got = pairs.bcast(("pairs", world.rank) if pairs.rank == 0 else None, root=0,
                  algorithm="nic-mcast")  # fmt: skip
assert got == ("pairs", world.rank - world.rank % 2), (world.rank, got)
world.Barrier()
print(f"reuse ok {world.rank}", flush=True)
