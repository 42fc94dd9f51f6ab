"""The rank side of the reduce-under-skew benchmark (thesis 3.5, Figs 3.6-3.10): one emurun job
measuring every variant (``emurun -np N python -m emubench.reduce_skew ...``; `emubench.
reduce_skew` has the method, the sweep over jobs and the figures).

Rank 0 writes JSON: parameters, environment (wait policy, nicd scheduling, slice), per-rank raw
samples and the application-bypass counters.
"""

from __future__ import annotations

import os
import platform
import socket
import struct
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np

import emucluster.mpi
from emubench.common import write_json
from emucluster import hosttime
from emucluster.coll.trees import binomial_parent
from emucluster.mpi import lifecycle
from emucluster.offload.app_bypass import shell as appbypass
from launcher.tuning import set_slice

if TYPE_CHECKING:
    import argparse

__all__ = ["ALGORITHM", "VARIANTS", "Rank", "last_node", "run_rank"]

VARIANTS = ("nab", "ab", "ireduce")
ALGORITHM = {"ab": "app-bypass", "nab": "binomial"}

SETTLE_LIMIT_S = 1.0
SETTLE_STEP_S = 50e-6


def _settle() -> float:
    """Prolong the sleeping catch-up until no application-bypass reduction of this rank is
    outstanding (thesis 3.5: the catch-up must be long enough to capture all asynchronous
    processing; with many nodes time-sliced on few cores a nominal bound is not, and a late
    child's packet would otherwise be combined, unmeasured, inside the next barrier); the
    signal handlers do the work meanwhile. Returns the seconds slept."""
    bypass = appbypass.active()
    if bypass is None or not bypass.core.outstanding:
        return 0.0
    t0 = time.monotonic()
    while bypass.core.outstanding and time.monotonic() - t0 < SETTLE_LIMIT_S:
        time.sleep(SETTLE_STEP_S)
    return time.monotonic() - t0


def last_node(size: int, root: int = 0) -> int:
    """The node furthest from ``root`` in the binomial tree (the highest rank among the
    deepest)."""

    def depth(rank: int) -> int:
        hops = 0
        parent = binomial_parent(rank, root, size)
        while parent is not None:
            hops += 1
            parent = binomial_parent(parent, root, size)
        return hops

    return max(range(size), key=lambda rank: (depth(rank), rank))


class Rank:
    """One rank's side of a job."""

    def __init__(self, args: argparse.Namespace) -> None:
        from emucluster import MPI  # late: importing MPI initialises it; the driver imports us

        self.MPI = MPI
        self.args = args
        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.rank, self.comm.size
        self.rng = np.random.default_rng(args.seed * 1000 + self.rank)

    def reduce(self, variant: str, data: np.ndarray, out: np.ndarray,
               catch_up: float = 0.0) -> float:  # fmt: skip
        """One reduce of ``variant`` and its catch-up, if any; the seconds slept to settle.
        ``ab`` and ``nab`` sleep the catch-up (the signal handlers of application bypass run
        meanwhile), then settle (`_settle`); ``ireduce`` busy-loops it between ``Ireduce``
        and ``Wait`` (the overlap it offers)."""
        comm, MPI = self.comm, self.MPI
        if variant == "ireduce":
            request = comm.Ireduce(data, out, MPI.SUM, 0)
            if catch_up > 0:
                hosttime.spin(catch_up)
            request.Wait()
            return 0.0
        comm.Reduce(data, out, MPI.SUM, 0, algorithm=ALGORITHM[variant])
        if catch_up <= 0:
            return 0.0
        time.sleep(catch_up)
        return _settle()

    def utilisation(self, skew_us: float, elements: int) -> dict[str, dict[str, list[float]]]:
        """Figs 3.6-3.8: per variant, this rank's paper utilisation and its CPU time."""
        args, comm = self.args, self.comm
        data = np.full(elements, self.rank + 1.0)
        out = np.zeros(elements)
        skew_max = skew_us / 1e6
        catch_up = skew_max + args.bound_us / 1e6
        samples: dict[str, dict[str, list[float]]] = {
            v: {"wall_us": [], "cpu_us": [], "settle_us": []} for v in args.variants
        }
        variants = list(args.variants)
        for i in range(args.warmup + args.iters):
            for k in range(len(variants)):
                variant = variants[(i + k) % len(variants)]  # rotate: no variant always first
                comm.Barrier()
                skew = float(self.rng.uniform(0, skew_max))
                with hosttime.Region() as used:
                    hosttime.spin(skew)
                    settled = self.reduce(variant, data, out, catch_up)
                if i >= args.warmup:
                    busy = skew + (catch_up if variant == "ireduce" else 0.0)
                    wall = used.own_wall_s - skew - catch_up - settled
                    cell = samples[variant]
                    cell["wall_us"].append(round(wall * 1e6, 1))
                    cell["cpu_us"].append(round((used.cpu_s - busy) * 1e6, 1))
                    cell["settle_us"].append(round(settled * 1e6, 1))
                if self.rank == 0 and not np.allclose(out, self.size * (self.size + 1) / 2):
                    raise AssertionError(f"{variant}: wrong result {out}")
        return samples

    def one_way(self, last: int, rounds: int = 50) -> float:
        """Median one-way latency root <-> ``last`` of the notification message (seconds)."""
        comm = self.comm
        note = np.zeros(1)
        times: list[float] = []
        comm.Barrier()
        for _ in range(rounds):
            if self.rank == 0:
                t0 = time.perf_counter()
                comm.Send(note, last, tag=77)
                comm.Recv(note, last, tag=77)
                times.append((time.perf_counter() - t0) / 2)
            elif self.rank == last:
                comm.Recv(note, 0, tag=77)
                comm.Send(note, 0, tag=77)
        one_way = comm.bcast(float(np.median(times)) if times else 0.0, 0)
        assert isinstance(one_way, float)
        return one_way

    def latency(self, elements: int) -> tuple[float, dict[str, list[float]]]:
        """Figs 3.9-3.10: the one-way latency and, per variant, the last node's samples."""
        args, comm = self.args, self.comm
        last = last_node(self.size)
        one_way = self.one_way(last)
        data = np.full(elements, self.rank + 1.0)
        out = np.zeros(elements)
        note = np.zeros(1)
        samples: dict[str, list[float]] = {v: [] for v in args.variants}
        variants = list(args.variants)
        for i in range(args.warmup + args.iters):
            for k in range(len(variants)):
                variant = variants[(i + k) % len(variants)]
                comm.Barrier()
                t0 = time.perf_counter()
                self.reduce(variant, data, out)
                if self.rank == 0:
                    comm.Send(note, last, tag=78)
                if self.rank == last:
                    comm.Recv(note, 0, tag=78)
                    if i >= args.warmup:
                        samples[variant].append(
                            round((time.perf_counter() - t0 - one_way) * 1e6, 1)
                        )
        return one_way, samples

    def run(self) -> None:
        args, comm = self.args, self.comm
        util: list[dict[str, Any]] = []
        for skew in args.skews:
            for elements in args.elements:
                samples = self.utilisation(skew, elements)
                util.append({"skew_us": skew, "elements": elements, "samples": samples})
        lat: list[dict[str, Any]] = []
        for elements in args.latency_elements:
            one_way, last_samples = self.latency(elements)
            lat.append({"elements": elements, "one_way_us": one_way * 1e6, "samples": last_samples})
        gathered = comm.gather((util, lat, _stats()), 0)
        if self.rank != 0:
            return
        assert gathered is not None
        report = {
            "parameters": {k: v for k, v in vars(args).items() if k != "command"}
            | {"nodes": self.size, "last_node": last_node(self.size)},
            "environment": rank_environment(args),
            "utilisation": [
                {
                    "skew_us": u["skew_us"],
                    "elements": u["elements"],
                    "ranks": [g[0][j]["samples"] for g in gathered],
                }
                for j, u in enumerate(util)
            ],
            "latency": [
                {
                    "elements": x["elements"],
                    "one_way_us": x["one_way_us"],
                    "last_node_samples": gathered[last_node(self.size)][1][j]["samples"],
                }
                for j, x in enumerate(lat)
            ],
            "app_bypass": [g[2] for g in gathered],
        }
        write_json(args.out, report)


def rank_environment(args: argparse.Namespace) -> dict[str, object]:
    """What decides the timings, seen from rank 0: wait policy, nicd scheduling, host slice,
    machine."""
    return {
        "EMU": {
            k: v
            for k, v in os.environ.items()
            if k.startswith("EMU_") and "SOCKET" not in k and "DIR" not in k and "JOB" not in k
        },
        "wait_policy": os.environ.get("EMU_WAIT", "hybrid"),
        "nicd_scheduling": _nicd_scheduling(),
        "host_slice_us": args.slice_us or "kernel default",
        "cpus": len(os.sched_getaffinity(0)),
        "host_cpus": sorted(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def _nicd_scheduling() -> str:
    """This node's nicd scheduling policy (its pid from the PCI socket's peer credentials)."""
    try:
        with socket.fromfd(
            lifecycle.current().engine.port.fileno(), socket.AF_UNIX, socket.SOCK_SEQPACKET
        ) as sock:
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid = struct.unpack("3i", creds)[0]
        policy = os.sched_getscheduler(pid)
        priority = os.sched_getparam(pid).sched_priority
    except (OSError, AttributeError) as exc:
        return f"unknown ({exc})"
    names = {os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR", os.SCHED_OTHER: "SCHED_OTHER"}
    return (
        f"{names.get(policy, str(policy))} {priority}, nice {os.getpriority(os.PRIO_PROCESS, pid)}"
    )


def _stats() -> dict[str, object]:
    stats = emucluster.mpi.stats().get("app_bypass", {})
    return dict(stats) if isinstance(stats, dict) else {}


def run_rank(args: argparse.Namespace) -> None:
    """One rank's side of one job: ask for the host time slice, then measure (`Rank`)."""
    if args.slice_us > 0:
        problem = set_slice(0, args.slice_us / 1e6)
        if problem is not None:
            print(f"reduce_skew: {problem}; kernel default slice", file=sys.stderr)
            args.slice_us = 0.0
    Rank(args).run()
