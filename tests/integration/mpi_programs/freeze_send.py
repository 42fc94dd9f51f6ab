"""MPI program for the no-silent-loss test at the MPI level: rank 0 ``Send``s a large buffer
(rendezvous) to rank 1 while the test freezes rank 0's nicd past rank 1's reassembly timeout.

Rank 0 prints ``sending`` just before the Send, then ``send ok`` or ``send failed CLASS
TEXT`` (the MPI.Exception's error class and message) and, on failure, exits 3 (the job ends,
rank 1 with it). Rank 1 posts the receive and polls it: ``got big LENGTH INTACT`` if it ever
completes (INTACT: the bytes are the ones sent); a bounded wait prints ``timeout``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from emucluster import MPI

TIMEOUT_S = 90.0

comm = MPI.COMM_WORLD
size = int(sys.argv[1])
expected = (np.arange(size, dtype=np.int64) % 251).astype(np.uint8)
comm.Barrier()
if comm.rank == 0:
    print("sending", flush=True)
    try:
        comm.Send(expected, dest=1, tag=7)
    except MPI.Exception as exc:
        print(f"send failed {exc.Get_error_class()} {exc}", flush=True)
        sys.exit(3)
    print("send ok", flush=True)
    comm.recv(source=1, tag=8)  # rank 1's verdict: the job ends after it
else:
    buf = np.zeros(size, dtype=np.uint8)
    request = comm.Irecv(buf, source=0, tag=7)
    deadline = time.monotonic() + TIMEOUT_S
    while not request.Test():
        if time.monotonic() > deadline:
            print("timeout", flush=True)
            sys.exit(1)
        time.sleep(0.01)
    print(f"got big {size} {bool(np.array_equal(buf, expected))}", flush=True)
    comm.send("done", dest=0, tag=8)
