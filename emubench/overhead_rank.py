"""One rank's side of ``emubench overhead``: a one-way MPI stream or a ping-pong, 2 ranks.

``emurun -np 2 python -m emubench.overhead_rank --mode stream --size 8 --count 20000 --out F``

* ``stream``: rank 0 sends ``count`` messages of ``size`` bytes to rank 1 in windows of 64
  ``Isend``s (OSU's message-rate test), rank 1 receives them with as many ``Irecv``s and
  answers one empty message at the end; rank 0 reports the message rate.
* ``pingpong``: ``count`` round trips; rank 0 reports the one-way time, as the mean of the
  loop (OSU's) and as the median of the round trips (the relay floor's statistic).

Both use numpy byte buffers (uppercase calls) and a warm-up of ``count // 10``. Rank 0 writes
JSON. The driver (`emubench.overhead`) runs each twice with different counts and takes the
difference of each process's CPU time, so start-up and teardown cancel out.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from emubench.common import write_json

__all__ = ["main"]


WINDOW = 64  # messages in flight per batch, as OSU's osu_mbw_mr


def _stream(comm: Any, mpi: Any, size: int, count: int) -> float:
    """Seconds rank 0 took to have ``count`` messages received (rank 1's answer included):
    batches of `WINDOW` ``Isend``s and ``Waitall`` on rank 0, as many ``Irecv``s on rank 1."""
    bufs = [np.zeros(size, dtype=np.uint8) for _ in range(WINDOW)]
    done = np.zeros(0, dtype=np.uint8)
    rank, byte = comm.rank, mpi.BYTE
    start = time.perf_counter()
    left = count
    while left > 0:
        batch = min(WINDOW, left)
        if rank == 0:
            requests = [comm.Isend([bufs[i], byte], dest=1, tag=5) for i in range(batch)]
        else:
            requests = [comm.Irecv([bufs[i], byte], source=0, tag=5) for i in range(batch)]
        mpi.Request.Waitall(requests)
        left -= batch
    if rank == 0:
        comm.Recv([done, byte], source=1, tag=6)
    else:
        comm.Send([done, byte], dest=0, tag=6)
    return time.perf_counter() - start


def _pingpong(comm: Any, mpi: Any, size: int, count: int, rounds: list[float] | None = None
              ) -> float:  # fmt: skip
    """Seconds of ``count`` round trips; each round trip's seconds appended to ``rounds``."""
    buf = np.zeros(size, dtype=np.uint8)
    byte = mpi.BYTE
    peer = 1 - comm.rank
    first = comm.rank == 0
    clock = time.perf_counter
    keep = rounds.append if rounds is not None else None
    start = last = clock()
    for _ in range(count):
        if first:
            comm.Send([buf, byte], dest=peer, tag=7)
            comm.Recv([buf, byte], source=peer, tag=7)
        else:
            comm.Recv([buf, byte], source=peer, tag=7)
            comm.Send([buf, byte], dest=peer, tag=7)
        if keep is not None:
            now = clock()
            keep(now - last)
            last = now
    return clock() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m emubench.overhead_rank", description=__doc__)
    p.add_argument("--mode", choices=("stream", "pingpong"), required=True)
    p.add_argument("--size", type=int, required=True, help="message bytes")
    p.add_argument("--count", type=int, required=True, help="messages (stream) or round trips")
    p.add_argument("--out", required=True, help="rank 0 writes the JSON result here")
    args = p.parse_args(argv)
    from emucluster import MPI  # late: importing MPI initialises it; not for --help

    comm = MPI.COMM_WORLD
    if comm.size != 2:
        raise SystemExit("emubench.overhead_rank runs on exactly 2 ranks")
    run = _stream if args.mode == "stream" else _pingpong
    run(comm, MPI, args.size, max(1, args.count // 10))  # warm-up
    comm.Barrier()
    rounds: list[float] = []
    if args.mode == "stream":
        seconds = _stream(comm, MPI, args.size, args.count)
    else:
        seconds = _pingpong(comm, MPI, args.size, args.count, rounds)
    if comm.rank == 0:
        result: dict[str, object] = {"mode": args.mode, "size": args.size, "count": args.count,
                                     "seconds": seconds}  # fmt: skip
        if args.mode == "stream":
            result["messages_per_s"] = args.count / seconds
        else:
            result["one_way_us"] = seconds / args.count / 2 * 1e6
            result["one_way_median_us"] = statistics.median(rounds) / 2 * 1e6
        write_json(args.out, result)
    comm.Barrier()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
