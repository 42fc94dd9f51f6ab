"""A ULFM recovery: rank VICTIM exits (code 7) after a barrier; the survivors, in allreduces
with it, see ERR_PROC_FAILED (the NIC) or ERR_REVOKED (a survivor revoked), shrink COMM_WORLD
and finish an allreduce and a barrier on the survivors' communicator.

Usage: ulfm_recover.py VICTIM
"""

from __future__ import annotations

import os
import sys

from emucluster import MPI


def main() -> None:
    world = MPI.COMM_WORLD
    world.Set_errhandler(MPI.ERRORS_RETURN)
    rank, victim = world.Get_rank(), int(sys.argv[1])
    world.Barrier()
    if rank == victim:
        os._exit(7)
    seen = MPI.SUCCESS
    try:
        for _ in range(1000):
            world.allreduce(1)
    except MPI.Exception as exc:
        seen = exc.Get_error_class()
        if seen == MPI.ERR_PROC_FAILED:
            world.Revoke()
    names = {MPI.ERR_PROC_FAILED: "PROC_FAILED", MPI.ERR_REVOKED: "REVOKED"}
    print(f"rank {rank} saw {names.get(seen, seen)}", flush=True)
    shrunk = world.Shrink()
    total = shrunk.allreduce(rank)
    shrunk.Barrier()
    world.Ack_failed()
    flag = world.Agree(0b110)  # acknowledged: no ERR_PROC_FAILED
    size, new_rank = shrunk.Get_size(), shrunk.Get_rank()
    print(f"rank {rank} shrunk {size} {new_rank} total {total} revoked {world.Is_revoked()} "
          f"agreed {flag}", flush=True)  # fmt: skip
    shrunk.Free()


if __name__ == "__main__":
    main()
