"""An intermediate host busy outside MPI does not delay its children under NIC multicast.

The root broadcasts; the internal node P (a child of the root with children of its own)
busy-loops in plain Python, calling nothing of MPI, until its child C has the message (C
creates a flag file) or ``wait_s`` passed, and only then enters Bcast. Under NIC multicast C
gets the message from P's NIC while P's host is busy (``child_first=True``); under the host
binomial algorithm C's message can only come from P's host inside Bcast, so the flag cannot
appear first (``child_first=False``): causality, not timing.

argv: flag directory, wait_s. Run with EMU_MCAST_TREE=binomial (a known tree shape).
"""

from __future__ import annotations

import os
import sys
import time

from emucluster import MPI
from emucluster.offload.nic_mcast.trees import binomial_tree

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
flag_dir, wait_s = sys.argv[1], float(sys.argv[2])
tree = binomial_tree(0, range(size))
P = next(c for c in tree.children(0) if tree.children(c))
C = tree.children(P)[0]
flag = os.path.join(flag_dir, "child_has_it")

assert comm.bcast("warm-up: posts the groups" if rank == 0 else None, root=0) is not None
comm.Barrier()
if rank == P:
    started = time.monotonic()
    while not os.path.exists(flag) and time.monotonic() - started < wait_s:
        sum(range(1000))  # busy, outside MPI
    child_first = os.path.exists(flag)
    got = comm.bcast(None, root=0)
    print(f"busy P={P} C={C} child_first={child_first} got={got}", flush=True)
else:
    got = comm.bcast("payload" if rank == 0 else None, root=0)
    if rank == C:
        with open(flag + ".tmp", "w") as f:
            f.write(got)
        os.replace(flag + ".tmp", flag)
assert got == "payload"
comm.Barrier()
print(f"busy ok {rank}", flush=True)
