"""A communicator freed while an operation on it is still pending (MPI-4.0 §7.4.3: the
operation completes normally; the communicator, and so its context id, lives until then).

Run with one argument naming the pending operation; every rank prints ``free ok <rank>``:

* ``nic-mcast``: the communicator's first nic-mcast Ibcast, still agreeing its epoch (the
  root is late) when the others call Free; then Split, which may reuse the context id, runs
  nic-mcast bcasts from every root of the new communicators, and only then the old request
  is completed. Each rank also prints ``free groups <rank> <posted> <freed>``: the host
  shell's multicast groups posted and freed (equal: every communicator was freed).
* ``nicvm``: the same with the nicvm bcast (its first call on a communicator synchronises).
* ``p2p``: an Irecv on the freed communicator; a new communicator's message with the same
  source and tag must not complete it, and cancelling it completes it as cancelled.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from emucluster import MPI

DEADLINE_S = 60.0  # longest a poll loop below waits
LATE_S = 0.5  # the old root's delay, so the others' call is pending at their Free

world = MPI.COMM_WORLD
rank = world.rank
part = sys.argv[1]


def check(comm: MPI.Intracomm, name: str, algorithm: str) -> None:
    """A bcast from every root of ``comm`` (consecutive world ranks) gives that root's value."""
    low = rank - comm.rank
    for root in range(comm.size):
        mine = (name, rank) if comm.rank == root else None
        got = comm.bcast(mine, root=root, algorithm=algorithm)
        assert got == (name, low + root), (rank, name, root, got)


def pending_bcast(algorithm: str) -> None:
    old = world.Split(0, rank)  # a fresh communicator: its first bcast of this kind
    buf = np.full(4, -1, dtype="i4")
    if rank == 0:
        buf[:] = 4242
        time.sleep(LATE_S)
    request = old.Ibcast(buf, root=0, algorithm=algorithm)
    old.Free()  # the Ibcast is still pending at the late root's peers
    for name in ("pairs", "pairs again"):
        pairs = world.Split(rank // 2, rank)  # may take the freed communicator's context id
        check(pairs, name, algorithm)
        pairs.Free()
    request.Wait()
    assert (buf == 4242).all(), (rank, buf)
    everyone = world.Split(0, rank)
    check(everyone, "everyone", algorithm)
    everyone.Free()


def pending_irecv() -> None:
    old = world.Split(0, rank)
    pending = old.irecv(source=0, tag=5) if rank == 1 else MPI.REQUEST_NULL
    old.Free()
    fresh = world.Split(0, rank)  # may take the freed communicator's context id
    if rank == 0:
        fresh.send("new", dest=1, tag=5)
    elif rank == 1:
        request = fresh.irecv(source=0, tag=5)
        deadline = time.monotonic() + DEADLINE_S
        done, got = request.test()
        while not done:
            assert not pending.Get_status(), "the freed communicator's Irecv took a message"
            assert time.monotonic() < deadline, "the new communicator's message never came"
            done, got = request.test()
        assert got == "new", got
        assert not pending.Get_status()
        pending.Cancel()
        status = MPI.Status()
        pending.Wait(status)
        assert status.Is_cancelled()
    fresh.Free()


if part == "p2p":
    pending_irecv()
else:
    pending_bcast(part)
world.Barrier()
freeing = MPI.COMM_WORLD.Get_queue_stats()["comm_free"]
print(f"free deferred {rank} {freeing['deferred']} waiting {freeing['waiting']}")
if part == "nic-mcast":
    counters = MPI.COMM_WORLD.Get_queue_stats()["mcast"]
    print(f"free groups {rank} {counters['groups_posted']} {counters['groups_freed']}")
print(f"free ok {rank}", flush=True)
