"""The ranks of ``emubench rma`` (2 ranks: 0 is the origin, 1 the target).

* latency: Put then Flush, and Get then Flush, in one Lock_all epoch, per size; the median
  over batches of one operation's time.
* passive target while the target computes: the target runs a fixed pure-Python loop twice,
  alone and while the origin runs Lock/Put/Unlock epochs at it; it reports the loop's wall and
  CPU seconds both times (its host's CPU during the epochs), the origin the epochs' median and
  longest time while the target computed and while it waited inside MPI (a Barrier), and how
  many of its epochs ended before the target's loop did (the ranks share the machine's
  monotonic clock: an implementation whose target must enter the library ends none).

Rank 0 writes the JSON record to ``--out``. ``--impl mpi4py`` imports the real mpi4py (for
MPICH under ``mpiexec``), the default emucluster's ``MPI``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time
from typing import Any

import numpy as np

__all__ = ["main"]

SIZES = (8, 64, 512, 4096, 32768, 65536)


def _mpi(impl: str) -> Any:
    return importlib.import_module("mpi4py.MPI" if impl == "mpi4py" else "emucluster.MPI")


def _latency(MPI: Any, win: Any, comm: Any, sizes: list[int], iters: int) -> dict[str, Any]:
    out: dict[str, Any] = {"put_us": {}, "get_us": {}}
    if comm.Get_rank() == 0:
        win.Lock_all()
        for size in sizes:
            buf = np.zeros(size, np.uint8)
            for name, call in (("put_us", win.Put), ("get_us", win.Get)):
                batches = []
                for _ in range(5):
                    started = time.perf_counter()
                    for _ in range(iters):
                        call(buf, 1)
                        win.Flush(1)
                    batches.append((time.perf_counter() - started) / iters * 1e6)
                out[name][str(size)] = statistics.median(batches)
        win.Unlock_all()
    comm.Barrier()
    return out


def _compute(work: int) -> tuple[float, float, float]:
    """(wall s, CPU s, monotonic time at the end) of the target's loop."""
    wall, cpu = time.perf_counter(), time.process_time()
    total = 0
    for i in range(work):  # pure Python: this host does not enter the MPI library
        total += i & 7
    return time.perf_counter() - wall, time.process_time() - cpu, time.monotonic()


def _epochs(MPI: Any, win: Any, count: int) -> tuple[list[float], list[float]]:
    """Each epoch's time (us) and the monotonic time it ended."""
    buf = np.zeros(8, np.uint8)
    times, ends = [], []
    for _ in range(count):
        started = time.perf_counter()
        win.Lock(1, MPI.LOCK_EXCLUSIVE)
        win.Put(buf, 1)
        win.Unlock(1)
        times.append((time.perf_counter() - started) * 1e6)
        ends.append(time.monotonic())
    return times, ends


def _overlap(MPI: Any, win: Any, comm: Any, work: int, epochs: int) -> dict[str, Any]:
    rank = comm.Get_rank()
    out: dict[str, Any] = {}
    comm.Barrier()
    if rank == 1:
        out["alone_s"] = _compute(work)
    comm.Barrier()
    if rank == 1:
        out["with_epochs_s"] = _compute(work)
    else:
        out["computing"] = _epochs(MPI, win, epochs)
    comm.Barrier()
    if rank == 0:
        out["in_mpi"] = _epochs(MPI, win, epochs)[0]
    comm.Barrier()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m emubench.rma_rank")
    p.add_argument("--out", required=True)
    p.add_argument("--impl", choices=("emucluster", "mpi4py"), default="emucluster")
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--work", type=int, default=3_000_000, help="target's loop iterations")
    p.add_argument("--epochs", type=int, default=200)
    args = p.parse_args(argv)
    MPI = _mpi(args.impl)
    comm = MPI.COMM_WORLD
    win = MPI.Win.Allocate(max(args.sizes) if comm.Get_rank() == 1 else 0, 1, MPI.INFO_NULL, comm)
    record = {"latency": _latency(MPI, win, comm, args.sizes, args.iters)}
    overlap = _overlap(MPI, win, comm, args.work, args.epochs)
    parts = comm.gather(overlap, root=0)
    win.Free()
    if comm.Get_rank() == 0:
        target = parts[1]
        times, ends = parts[0]["computing"]
        loop_end = target["with_epochs_s"][2]
        record["overlap"] = {
            "target_alone_wall_s": target["alone_s"][0],
            "target_alone_cpu_s": target["alone_s"][1],
            "target_with_epochs_wall_s": target["with_epochs_s"][0],
            "target_with_epochs_cpu_s": target["with_epochs_s"][1],
            "epoch_us_target_computing": statistics.median(times),
            "epoch_max_us_target_computing": max(times),
            "epoch_us_target_in_mpi": statistics.median(parts[0]["in_mpi"]),
            "epoch_max_us_target_in_mpi": max(parts[0]["in_mpi"]),
            "epochs": len(times),
            "epochs_done_while_target_computed": sum(end < loop_end for end in ends),
        }
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
