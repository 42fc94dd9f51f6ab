"""GRIM 4.5.6 ordering, in a program that also uses MPI: a remote-memory operation may pass
earlier active messages (the NIC executes it at once, the AM waits in the endpoint until it
polls); AM->AM, RM->AM and RM->RM never reorder."""

from __future__ import annotations

import json
import struct
import sys

from emucluster import MPI, am, rm

N = int(sys.argv[1])
comm = MPI.COMM_WORLD
ep = am.endpoint()
rank = ep.rank
word = struct.Struct("<I")
seen1: list[tuple[int, int]] = []
seen2: list[tuple[int, int]] = []
box: dict[str, rm.Block] = {}

am.register("check1", lambda s, a, p: seen1.append((a[0], box["w"].word(0))))
am.register("check2", lambda s, a, p: seen2.append((a[0], box["w"].word(4))))
am.sync()
result: dict[str, object] = {"rank": rank}
if rank == 1:
    box["w"] = rm.alloc(64)
    comm.send(box["w"].handle, dest=0)  # a Handle pickles: MPI carries it
    comm.Barrier()  # phase 1 runs while this rank sits in MPI, not polling its endpoint
    ep.wait_for(lambda: len(seen1) == N, 60, "phase 1")
    comm.Barrier()
    observed = []  # phase 2: watch the RM->RM word while handling RM->AM and AM->AM
    while len(seen2) < N:
        observed.append(box["w"].word(8))
        am.poll()
    ep.wait_for(lambda: box["w"].word(8) == N, 30, "last RM")
    observed.append(box["w"].word(8))
    result.update(
        rm_passed_am=sum(value > i for i, value in seen1),
        am_order=[i for i, _ in seen1] == list(range(1, N + 1))
        and [i for i, _ in seen2] == list(range(1, N + 1)),
        rm_before_am=all(value >= i for i, value in seen2),
        rm_rm_monotonic=observed == sorted(observed),
        final=box["w"].word(8),
    )
else:
    h = comm.recv(source=1)
    for i in range(1, N + 1):  # phase 1: AM i, then an RM write of i
        am.send(1, "check1", (i, 0, 0, 0))
        rm.write(1, h, 0, word.pack(i))
    comm.Barrier()
    comm.Barrier()
    reqs = []
    for i in range(1, N + 1):  # phase 2: RM (not waited for) then AM; RM after RM
        reqs.append(rm.iwrite(1, h, 4, word.pack(i)))
        am.send(1, "check2", (i, 0, 0, 0))
        reqs.append(rm.iwrite(1, h, 8, word.pack(i)))
    for r in reqs:
        r.wait()
ep.flush()
comm.Barrier()
print("RESULT " + json.dumps(result), flush=True)
