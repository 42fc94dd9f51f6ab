"""Host CPU spent in a broadcast under process skew, measured the way a user would.

``emurun -np 16 python examples/bcast_skew_cpu.py --method mcast --avg-skew-us 400``
``emurun -np 16 python examples/bcast_skew_cpu.py --method nicvm --skew-us 1000``

Written from the two papers' descriptions of their benchmarks, not from emubench:

* ``--method mcast`` (NIC multicast, seed 001 §7.3, Fig 7): every iteration starts with a
  barrier; each non-root rank draws a number between minus and plus half the maximum skew; a
  rank with a positive number computes that long, then calls ``Bcast``; the others call it at
  once. A rank's figure is the host CPU time inside ``Bcast``. The paper states its skews as
  the *average* skew between two ranks, a third of the maximum (``--avg-skew-us``), and
  averages over the non-root ranks. Variants: ``binomial`` (the host forwards down its tree)
  and ``nic-mcast`` (the NICs forward).
* ``--method nicvm`` (NICVM broadcast, thesis §4.4.4, Fig 4.16): every rank delays a random
  time in [0, max] (``--skew-us``) by busy-looping, broadcasts, then waits a catch-up of the
  maximum skew plus a bound on the broadcast's latency, so asynchronous work is captured; a
  rank's figure is its CPU time from the start of the delay through the catch-up, minus the
  delay, averaged over all ranks. Variants: ``binomial`` and ``nicvm`` (Fig 4.3's module forwards on
  the NICs).

Time is read with `emucluster.hosttime`, the library's public measure: the skew loops run on
the host's own-processor clock (``hosttime.spin``) and CPU is a ``hosttime.Region`` (process
CPU time plus the library's waits for the NIC charged as polling, as on a node with its own
processor). Both variants run interleaved in one job (neither always first), and every
broadcast is checked. Rank 0 prints one JSON line: mean CPU microseconds per variant, the
factor (binomial / offload) and the spread of the per-rank means.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from emucluster import MPI, hosttime

OFFLOAD = {"mcast": "nic-mcast", "nicvm": "nicvm"}
CATCH_UP_BOUND_S = 0.002
"""The catch-up's bound on the broadcast's own latency (thesis: "a conservative estimate")."""


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--method", choices=tuple(OFFLOAD), default="mcast")
    p.add_argument("--avg-skew-us", type=float, default=400.0,
                   help="mcast: average skew (max = 3 x average)")  # fmt: skip
    p.add_argument("--skew-us", type=float, default=1000.0, help="nicvm: maximum skew")
    p.add_argument("--size", type=int, default=32, help="bytes broadcast")
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


def mcast_iteration(comm: MPI.Intracomm, variant: str, buf: np.ndarray, skew: float) -> float:
    """Seed 001 §7.3: this rank's CPU seconds inside one ``Bcast``."""
    comm.Barrier()
    if skew > 0:
        hosttime.spin(skew)
    with hosttime.Region() as used:
        comm.Bcast(buf, root=0, algorithm=variant)
    return used.cpu_s


def nicvm_iteration(comm: MPI.Intracomm, variant: str, buf: np.ndarray, skew: float,
                    catch_up: float) -> float:  # fmt: skip
    """Thesis §4.4.4: CPU seconds from the broadcast's start through the catch-up."""
    comm.Barrier()
    with hosttime.Region() as used:  # start timing, then the skew loop (not counted)
        hosttime.spin(skew)
        comm.Bcast(buf, root=0, algorithm=variant)
        time.sleep(catch_up)
    return used.cpu_s - skew


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    comm = MPI.COMM_WORLD
    rank = comm.rank
    rng = np.random.default_rng(args.seed * 1000 + rank)
    variants = ("binomial", OFFLOAD[args.method])
    pattern = (np.arange(args.size) % 251).astype(np.uint8)
    buf = np.empty(args.size, dtype=np.uint8)
    top = (3 * args.avg_skew_us if args.method == "mcast" else args.skew_us) / 1e6  # max skew
    catch_up = top + CATCH_UP_BOUND_S
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    for i in range(args.warmup + args.iters):
        for k in range(len(variants)):
            variant = variants[(i + k) % len(variants)]  # neither always goes first
            buf[:] = pattern if rank == 0 else 0
            if args.method == "mcast":
                skew = float(rng.uniform(-top / 2, top / 2)) if rank else 0.0
                used = mcast_iteration(comm, variant, buf, skew)
            else:
                used = nicvm_iteration(comm, variant, buf, float(rng.uniform(0, top)), catch_up)
            if not np.array_equal(buf, pattern):
                raise AssertionError(f"rank {rank}: {variant} broadcast delivered wrong bytes")
            if i >= args.warmup:
                cpu[variant].append(used)
    mine = {v: statistics.fmean(samples) for v, samples in cpu.items()}
    every = comm.gather(mine, root=0)
    if rank == 0:
        assert every is not None
        ranks = every[1:] if args.method == "mcast" else every  # §7.3 averages non-root ranks
        means = {v: statistics.fmean(r[v] for r in ranks) * 1e6 for v in variants}
        spread = {v: round(statistics.pstdev(r[v] * 1e6 for r in ranks), 1) for v in variants}
        result = {
            "method": args.method, "nodes": comm.size, "size": args.size,
            "max_skew_us": round(top * 1e6, 1), "iters": args.iters,
            "cpu_us": {v: round(us, 1) for v, us in means.items()},
            "rank_spread_us": spread,
            "factor": round(means["binomial"] / means[variants[1]], 2),
            "run_delay_readable": hosttime.available(),
        }  # fmt: skip
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
