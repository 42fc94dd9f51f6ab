"""The rank side of the NICVM benchmarks (thesis §4.4): one job of one MODE under emurun
(``emurun -np N python -m emubench.nicvm MODE --out F``; `emubench.nicvm` has the modes and
the sweep that runs them).

Each mode is a function of the parsed arguments and the MPI module, returning this rank's
samples; `run_rank` gathers them to rank 0, which writes ``--out``.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from emubench.common import write_json
from emucluster import hosttime
from emucluster.nicvm import Nicvm
from emucluster.port.client import Port
from nicd.nicvm.modules import NOOP

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

__all__ = ["ECHO", "ECHO_PORT", "MODES", "run_rank"]

ECHO = """\
func main()
    if mpi_get_rank() != mpi_get_root() then
        mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, mpi_get_root());
        return NICVM_RESULT_PACKET_CONSUMED;
    end if;
    return NICVM_RESULT_SUCCESS;
end func;
"""
"""Fig 4.11's NIC echo: a non-root NIC sends the packet back to the root and consumes it."""
ECHO_PORT = 5


def _pingpong(args: argparse.Namespace, MPI: Any) -> dict[str, Any]:
    comm = MPI.COMM_WORLD
    rank = comm.rank
    out: dict[str, Any] = {}
    for size in args.sizes:
        buf = bytearray(size)
        samples = []
        for i in range(args.warmup + args.iters):
            t0 = time.perf_counter()
            if rank == 0:
                comm.Send(buf, 1, 0)
                comm.Recv(buf, 1, 0)
            else:
                comm.Recv(buf, 0, 0)
                comm.Send(buf, 0, 0)
            if i >= args.warmup:
                samples.append((time.perf_counter() - t0) / 2 * 1e6)
        out[str(size)] = samples
    return out


def _echo(args: argparse.Namespace, MPI: Any) -> dict[str, Any]:
    port = Port.open(port=ECHO_PORT, receive_buffers=64)
    vm = Nicvm(port)
    vm.load("echo", ECHO)
    vm.load("noop", NOOP)
    me = port.node_id
    out: dict[str, Any] = {v: {} for v in ("host", "noop", "nic")}
    _sync(port, me)
    for size in args.sizes:
        body = bytes(size)
        for v in out:
            out[v][str(size)] = []
        for i in range(args.warmup + args.iters):
            for variant in ("host", "noop", "nic"):
                if me == 0:
                    t0 = time.perf_counter()
                    if variant == "host":
                        port.send(1, ECHO_PORT, body)
                    else:
                        vm.send(1, variant if variant == "noop" else "echo", body, root=0)
                    port.recv(timeout=30)
                    if i >= args.warmup:
                        out[variant][str(size)].append((time.perf_counter() - t0) * 1e6)
                elif variant != "nic":
                    event = port.recv(timeout=30)
                    port.send(0, ECHO_PORT, event.payload)
    port.flush(timeout=30)
    if me == 1:  # node 1's host must not close before node 0 got the last echo
        port.recv(timeout=30)
    else:
        port.send(1, ECHO_PORT, b"bye")
        port.flush(timeout=30)
    port.close()
    return out


def _sync(port: Any, me: int) -> None:
    if me == 0:
        port.send(1, ECHO_PORT, b"go")
        port.recv(timeout=60)
    else:
        port.recv(timeout=60)
        port.send(0, ECHO_PORT, b"go")


def _bcast(args: argparse.Namespace, MPI: Any) -> dict[str, Any]:
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    note = bytearray(1)
    one_way = []  # root <-> rank size-1 notification latency
    for _ in range(50):
        comm.Barrier()
        if rank == 0:
            t0 = time.perf_counter()
            comm.Send(note, size - 1, 9)
            comm.Recv(note, size - 1, 9)
            one_way.append((time.perf_counter() - t0) / 2 * 1e6)
        elif rank == size - 1:
            comm.Recv(note, 0, 9)
            comm.Send(note, 0, 9)
    notify = statistics.median(one_way) if rank == 0 else 0.0
    out: dict[str, Any] = {"one_way_us": notify, "binomial": {}, "nicvm": {}}
    for nbytes in args.sizes:
        buf = bytearray(nbytes)
        for algorithm in ("binomial", "nicvm"):
            out[algorithm][str(nbytes)] = []
        for i in range(args.warmup + args.iters):
            for algorithm in ("binomial", "nicvm"):
                comm.Barrier()
                t0 = time.perf_counter()
                comm.Bcast(buf, 0, algorithm=algorithm)
                if rank != 0:
                    comm.Send(note, 0, 8)
                else:
                    for _ in range(size - 1):
                        comm.Recv(note, MPI.ANY_SOURCE, 8)
                    if i >= args.warmup:
                        elapsed = (time.perf_counter() - t0) * 1e6 - notify
                        out[algorithm][str(nbytes)].append(elapsed)
    return out


def _skew(args: argparse.Namespace, MPI: Any) -> dict[str, Any]:
    """Thesis §4.4.4 per iteration: barrier; busy-loop a random skew in [0, max]; the broadcast;
    a catch-up of max skew + ``--bound-us``. ``cpu_us`` is the public `emucluster.hosttime`
    measure of a `Region` from the skew loop's start through the catch-up, minus the skew
    (asynchronous work included, also a signal handler's inside the loop, which `hosttime.spin`
    prolongs); ``wall_us`` the paper's elapsed - nominal skew - nominal catch-up, on the
    own-processor clock. The catch-up *sleeps*: on a real cluster a rank's catch-up loop costs
    no other rank anything, but here a busy one takes the shared cores from the ranks still in
    their skew loops, and the waits of the ranks waiting for those (charged as polling) grow
    with it. The variants alternate which goes first."""
    comm = MPI.COMM_WORLD
    rank = comm.rank
    rng = np.random.default_rng(args.seed * 1000 + rank)
    skew_max = args.skew_us / 1e6
    catch_up = skew_max + args.bound_us / 1e6
    algorithms = ("binomial", "nicvm")
    out: dict[str, Any] = {}
    for nbytes in args.sizes:
        buf = bytearray(nbytes)
        res: dict[str, dict[str, list[float]]] = {
            a: {"wall_us": [], "cpu_us": []} for a in algorithms
        }
        for i in range(args.warmup + args.iters):
            for k in range(len(algorithms)):
                algorithm = algorithms[(i + k) % len(algorithms)]  # neither always first
                comm.Barrier()
                skew = float(rng.uniform(0, skew_max))
                with hosttime.Region() as used:
                    hosttime.spin(skew)
                    comm.Bcast(buf, 0, algorithm=algorithm)
                    time.sleep(catch_up)
                if i >= args.warmup:
                    res[algorithm]["wall_us"].append((used.own_wall_s - skew - catch_up) * 1e6)
                    res[algorithm]["cpu_us"].append((used.cpu_s - skew) * 1e6)
        out[str(nbytes)] = res
    return out


MODES: dict[str, Callable[[argparse.Namespace, Any], dict[str, Any]]] = {
    "pingpong": _pingpong,
    "echo": _echo,
    "bcast": _bcast,
    "skew": _skew,
}


def run_rank(args: argparse.Namespace) -> None:
    """One rank's side of one job; every rank gathers to rank 0, which writes ``--out``."""
    from emucluster import MPI  # late: importing MPI initialises it; the driver imports MODES

    result = MODES[args.mode](args, MPI)
    comm = MPI.COMM_WORLD
    gathered = comm.gather(result, 0)
    if comm.rank == 0:
        report = {"parameters": vars(args) | {"nodes": comm.size},
                  "environment": {k: v for k, v in os.environ.items() if k.startswith("EMU_")},
                  "ranks": gathered}  # fmt: skip
        write_json(args.out, report)
