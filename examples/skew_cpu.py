"""Host CPU spent in a reduce under process skew, measured the way a user would.

``emurun -np 8 python examples/skew_cpu.py --skew-us 1000``

Written from the thesis's description (ch. 3.5), not from emubench: per iteration every rank
passes a barrier, busy-loops a random skew in [0, max], calls ``Reduce`` of 4 doubles (32 bytes)
to rank 0, then sleeps a catch-up of max skew plus a conservative bound on the reduce's own
latency, long enough for asynchronous work (application bypass combines children's data in
signal handlers while the rank sleeps). The thesis does not give its bound; here it is twice
the slowest rank's median time of a few unskewed binomial reduces measured first
(``--bound-us`` sets it instead): an emulated 16-node reduce takes milliseconds, and work that
arrives after the catch-up would escape the measure. A
rank's figure is its CPU time from the start of the reduce through the catch-up, meaned over
iterations; the job's figure is the mean over ranks. Both variants run interleaved in the same
job: ``binomial`` (the host waits in the call for its children) and ``app-bypass``; the factor
is binomial / app-bypass.

``--clock host`` (default) uses `emucluster.hosttime`: the skew loop runs on the host's
own-processor clock and the CPU is a `hosttime.Region` (process CPU time plus the library's
waits for the NIC charged as polling) from the start of the skew loop, minus the skew: as the
thesis times from before its delay loop, so that signal handlers which interrupt the loop
(prolonging it, see `hosttime.spin`) are counted. ``--clock wall`` is the naive version: the
skew loop reads ``time.perf_counter`` and the CPU is ``time.process_time``; on a machine where
many emulated hosts share each core, its skew is not what it says (a 1 ms wall loop gets only a
share of a core) and its waits are only partly counted.

Rank 0 prints one JSON line: the mean CPU microseconds per variant and the factor.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from emucluster import MPI, hosttime

VARIANTS = ("binomial", "app-bypass")
LATENCY_PROBES = 10  # unskewed reduces timed for the catch-up's bound


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--skew-us", type=float, default=1000.0, help="maximum skew (us)")
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--elements", type=int, default=4, help="doubles reduced (4 = 32 bytes)")
    p.add_argument("--clock", choices=("host", "wall"), default="host")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bound-us", type=float, default=None,
                   help="catch-up beyond the skew (default: measured, see above)")  # fmt: skip
    return p.parse_args(argv)


def wall_spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def one_reduce(comm: MPI.Intracomm, variant: str, data: np.ndarray, out: np.ndarray,
               skew: float, catch_up: float, clock: str) -> float:  # fmt: skip
    """One iteration; this rank's CPU seconds from the reduce through the catch-up."""
    comm.Barrier()
    if clock == "host":
        with hosttime.Region() as used:  # thesis: start timing, then the skew loop
            hosttime.spin(skew)
            comm.Reduce(data, out, MPI.SUM, 0, algorithm=variant)
            time.sleep(catch_up)
        return used.cpu_s - skew
    wall_spin(skew)
    start = time.process_time()
    comm.Reduce(data, out, MPI.SUM, 0, algorithm=variant)
    time.sleep(catch_up)
    return time.process_time() - start


def latency_bound(comm: MPI.Intracomm, data: np.ndarray, out: np.ndarray) -> float:
    """Twice the slowest rank's median wall time of unskewed binomial reduces (seconds)."""
    times = []
    for _ in range(LATENCY_PROBES):
        comm.Barrier()
        start = time.perf_counter()
        comm.Reduce(data, out, MPI.SUM, 0, algorithm="binomial")
        times.append(time.perf_counter() - start)
    slowest: float = comm.allreduce(statistics.median(times), op=MPI.MAX)
    return 2.0 * slowest


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    comm = MPI.COMM_WORLD
    rng = np.random.default_rng(args.seed * 1000 + comm.rank)
    data = np.full(args.elements, comm.rank + 1.0)
    out = np.zeros(args.elements)
    expected = comm.size * (comm.size + 1) / 2
    skew_max = args.skew_us / 1e6
    bound = latency_bound(comm, data, out) if args.bound_us is None else args.bound_us / 1e6
    catch_up = skew_max + bound
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for i in range(args.warmup + args.iters):
        for k in range(len(VARIANTS)):
            variant = VARIANTS[(i + k) % len(VARIANTS)]  # neither always goes first
            skew = float(rng.uniform(0.0, skew_max))
            used = one_reduce(comm, variant, data, out, skew, catch_up, args.clock)
            if i >= args.warmup:
                cpu[variant].append(used)
            if comm.rank == 0 and not np.allclose(out, expected):
                raise AssertionError(f"{variant}: reduce gave {out}, expected {expected}")
    mine = {v: statistics.fmean(samples) for v, samples in cpu.items()}
    every = comm.gather(mine, root=0)
    if comm.rank == 0:
        means = {v: statistics.fmean(r[v] for r in every) * 1e6 for v in VARIANTS}
        result = {
            "nodes": comm.size, "skew_us": args.skew_us, "elements": args.elements,
            "clock": args.clock, "iters": args.iters, "bound_us": round(bound * 1e6, 1),
            "cpu_us": {v: round(us, 1) for v, us in means.items()},
            "factor": round(means["binomial"] / means["app-bypass"], 2),
            "run_delay_readable": hosttime.available(),
        }  # fmt: skip
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
