"""A rank that fails: ``raise`` (uncaught exception in rank 1), ``abort`` (rank N-1 calls
``comm.Abort(7)``), ``exit`` (rank 1 calls ``sys.exit(3)``). The other ranks block in a
receive that never completes; emurun must stop them and exit with the failing rank's code.
"""

from __future__ import annotations

import sys

from emucluster import MPI

comm = MPI.COMM_WORLD
mode = sys.argv[1]
comm.Barrier()
if mode == "raise" and comm.rank == 1:
    raise RuntimeError(f"boom from rank {comm.rank}")
if mode == "abort" and comm.rank == comm.size - 1:
    comm.Abort(7)
if mode == "exit" and comm.rank == 1:
    sys.exit(3)
comm.recv(source=MPI.ANY_SOURCE, tag=12345)  # never sent
