"""Rank side of ``emubench trace``: one skewed broadcast, or an 8-byte ping-pong.

``bcast``: ``--bcast-warmup`` broadcasts (groups posted, paths warm), then the root names an instant
``--start-margin-ms`` ahead on CLOCK_MONOTONIC (one machine) and every rank calls one ``Bcast``
of ``--size`` bytes from rank 0 at that instant plus its seeded skew
(``trace_figure.rank_skew_us``; the measured one: the last Bcast of the job), then a barrier.
``pingpong``: ``--iters`` round trips of 8 bytes between ranks 0 and 1; rank 0 writes the
median one-way latency in us to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from emubench.trace_figure import rank_skew_us
from emucluster import MPI

__all__ = ["main"]


def _bcast(comm: MPI.Intracomm, args: argparse.Namespace) -> dict[str, float]:
    rank = comm.Get_rank()
    buf = np.zeros(args.size, dtype=np.uint8)
    if rank == 0:
        buf[:] = 7
    for _ in range(args.bcast_warmup):
        comm.Bcast(buf, root=0)
    skew_s = rank_skew_us(args.seed, rank, args.skew_us) / 1e6
    comm.Barrier()
    # One instant for all (CLOCK_MONOTONIC: one machine), so each rank's call is its skew
    # after the root's, not after its own exit from a barrier.
    at = comm.bcast(time.monotonic() + args.start_margin_ms / 1e3 if rank == 0 else None)
    time.sleep(max(0.0, at + skew_s - time.monotonic()))
    start = time.perf_counter()
    comm.Bcast(buf, root=0)
    took = time.perf_counter() - start
    comm.Barrier()
    assert int(buf.sum()) == 7 * args.size, "broadcast delivered wrong data"
    return {"bcast_us_rank0": took * 1e6}


def _pingpong(comm: MPI.Intracomm, args: argparse.Namespace) -> dict[str, float]:
    rank = comm.Get_rank()
    buf = np.zeros(8, dtype=np.uint8)
    times = []
    for i in range(args.warmup + args.iters):
        start = time.perf_counter()
        if rank == 0:
            comm.Send(buf, dest=1, tag=1)
            comm.Recv(buf, source=1, tag=1)
        elif rank == 1:
            comm.Recv(buf, source=0, tag=1)
            comm.Send(buf, dest=0, tag=1)
        if i >= args.warmup:
            times.append((time.perf_counter() - start) / 2)
    return {"latency_us": statistics.median(times) * 1e6 if times else 0.0}


def main(argv: list[str] | None = None) -> None:
    """Entry point under emurun."""
    p = argparse.ArgumentParser(prog="python -m emubench.trace_ranks")
    p.add_argument("what", choices=("bcast", "pingpong"))
    p.add_argument("--size", type=int, default=4)
    p.add_argument("--skew-us", type=float, default=100.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bcast-warmup", type=int, default=2)
    p.add_argument("--start-margin-ms", type=float, default=50.0)
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    comm = MPI.COMM_WORLD
    result = (_bcast if args.what == "bcast" else _pingpong)(comm, args)
    if comm.Get_rank() == 0 and args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
