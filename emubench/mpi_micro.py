"""One rank's side of the MPI microbenchmarks, under emucluster or under mpi4py (MPICH).

``emurun -np N python -m emubench.mpi_micro --out FILE`` or, as the reference,
``mpiexec -n N python -m emubench.mpi_micro --impl mpi4py --out FILE``. The same code
runs under both; only the ``MPI`` module differs. Rank 0 writes one JSON file:

* ``pingpong`` (ranks 0 and 1 only, the others wait): one-way microseconds of a ping-pong for
  every size, lowercase (pickled ``bytes``) and uppercase (numpy byte buffers), median of
  ``--blocks`` blocks of ``--iters`` round trips after a warm-up;
* ``raw_port`` (emucluster only): the same 8-byte ping-pong on raw GM ports, in blocks
  interleaved with the uppercase MPI blocks so both see the same machine state; the MPI
  layer's own cost is the ratio of the two;
* ``collectives``: ``Bcast`` and ``Reduce`` of one double (8 bytes) and ``Barrier`` on every
  rank. Each iteration starts after a barrier; a rank's time is its mean over iterations and
  the figure is the mean over ranks (as the OSU benchmarks report), with the slowest rank's
  mean beside it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from emubench.common import write_json

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["main"]

PINGPONG_SIZES = (8, 64, 512, 4096, 16384, 65536)
RAW_PORT = 3  # GM port of the raw ping-pong; MPI uses its own


def _mpi(impl: str) -> Any:
    """The ``MPI`` module of ``impl`` (emucluster or mpi4py), imported on demand."""
    return importlib.import_module(f"{impl}.MPI")


def _one_way_us(rounds: int, round_trip: Callable[[], object]) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        round_trip()
    return (time.perf_counter() - start) / rounds / 2 * 1e6


def _pingpong_pair(mpi: Any, comm: Any, size: int) -> tuple[Callable[[], object], ...]:
    """(lowercase, uppercase) round trips of ``size`` bytes between ranks 0 and 1."""
    peer = 1 - comm.rank
    data = bytes(size)
    buf = np.zeros(size, dtype=np.uint8)
    if comm.rank == 0:

        def lower() -> object:
            comm.send(data, dest=peer, tag=1)
            return comm.recv(source=peer, tag=1)

        def upper() -> object:
            comm.Send([buf, mpi.BYTE], dest=peer, tag=2)
            comm.Recv([buf, mpi.BYTE], source=peer, tag=2)
            return None

    else:

        def lower() -> object:
            got = comm.recv(source=peer, tag=1)
            comm.send(got, dest=peer, tag=1)
            return got

        def upper() -> object:
            comm.Recv([buf, mpi.BYTE], source=peer, tag=2)
            comm.Send([buf, mpi.BYTE], dest=peer, tag=2)
            return None

    return lower, upper


def _raw_port_round_trip(rank: int) -> tuple[Callable[[], object], Callable[[], None]]:
    """An 8-byte round trip on raw GM ports between nodes 0 and 1, and the port's closer."""
    # late: the mpi4py (MPICH) reference never loads emucluster
    from emucluster.port.client import Port

    port = Port.open(port=RAW_PORT)
    peer = 1 - rank
    payload = bytes(8)

    def round_trip() -> object:
        if rank == 0:
            port.send(peer, RAW_PORT, payload)
            return port.recv()
        got = port.recv()
        port.send(peer, RAW_PORT, payload)
        return got

    def close() -> None:
        port.flush(timeout=30)
        port.close()

    return round_trip, close


def _pingpong(mpi: Any, comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Ranks 0 and 1: every size, both cases; emucluster also the interleaved raw port."""
    results: dict[str, Any] = {"sizes": list(args.sizes), "lowercase_us": [], "uppercase_us": []}
    if comm.rank > 1:
        return results
    raw: tuple[Callable[[], object], Callable[[], None]] | None = None
    if args.impl == "emucluster":
        raw = _raw_port_round_trip(comm.rank)
        comm.sendrecv(None, dest=1 - comm.rank, source=1 - comm.rank)  # both ports open
    raw_blocks: list[float] = []
    mpi8_blocks: list[float] = []
    for size in args.sizes:
        lower, upper = _pingpong_pair(mpi, comm, size)
        rounds = max(20, args.iters if size <= 4096 else args.iters // 4)
        for fn in (lower, upper):
            _one_way_us(max(5, rounds // 5), fn)  # warm-up
        low, up = [], []
        for _ in range(args.blocks):
            low.append(_one_way_us(rounds, lower))
            up.append(_one_way_us(rounds, upper))
            if raw is not None and size == 8:
                raw_blocks.append(_one_way_us(rounds, raw[0]))
                mpi8_blocks.append(up[-1])
        results["lowercase_us"].append(statistics.median(low))
        results["uppercase_us"].append(statistics.median(up))
    if raw is not None:
        raw[1]()
        results["raw_port_8B_us"] = statistics.median(raw_blocks)
        results["uppercase_8B_interleaved_us"] = statistics.median(mpi8_blocks)
        results["raw_port_blocks_us"] = raw_blocks
        results["uppercase_8B_blocks_us"] = mpi8_blocks
    return results


def _collective_us(comm: Any, iters: int, op: Callable[[], object]) -> float:
    """This rank's mean microseconds of ``op``, each iteration started after a barrier."""
    for _ in range(max(5, iters // 10)):  # warm-up
        comm.Barrier()
        op()
    total = 0.0
    for _ in range(iters):
        comm.Barrier()
        start = time.perf_counter()
        op()
        total += time.perf_counter() - start
    return total / iters * 1e6


def _collectives(mpi: Any, comm: Any, iters: int) -> dict[str, Any]:
    value = np.array([float(comm.rank)])
    result = np.zeros(1)
    ops: dict[str, Callable[[], object]] = {
        "bcast": lambda: comm.Bcast([value, mpi.DOUBLE], root=0),
        "reduce": lambda: comm.Reduce([value, mpi.DOUBLE], [result, mpi.DOUBLE], op=mpi.SUM),
        "barrier": comm.Barrier,
    }
    out: dict[str, Any] = {}
    for name, op in ops.items():
        mine = _collective_us(comm, iters, op)
        every = comm.gather(mine, root=0)
        if comm.rank == 0:
            out[name] = {"mean_us": statistics.fmean(every), "max_us": max(every), "ranks": every}
    return out


CANDIDATES = {  # emucluster only: every algorithm worth comparing for a small message
    "bcast": ("binomial", "nic-mcast", "nicvm"),
    "reduce": ("binomial", "linear", "app-bypass"),
    "barrier": ("dissemination", "tree", "nic-mcast"),
}


def _candidates(mpi: Any, comm: Any, iters: int, rounds: int) -> dict[str, Any]:
    """Every algorithm of `CANDIDATES`, chosen per call, in ``rounds`` interleaved blocks of
    ``iters // rounds`` iterations (so all see the same machine state): per rank the mean wall
    time, process CPU time and run delay (time runnable but waiting for a core) per call."""
    from emucluster import hosttime  # late: as in _raw_port_round_trip

    value = np.array([float(comm.rank)])
    result = np.zeros(1)

    def call(op: str, name: str) -> Callable[[], object]:
        if op == "bcast":
            return lambda: comm.Bcast([value, mpi.DOUBLE], root=0, algorithm=name)
        if op == "reduce":
            return lambda: comm.Reduce(
                [value, mpi.DOUBLE], [result, mpi.DOUBLE], op=mpi.SUM, algorithm=name
            )
        return lambda: comm.Barrier(algorithm=name)

    sums: dict[tuple[str, str], list[float]] = {}
    per_block = max(1, iters // rounds)
    for block in range(rounds + 1):  # block 0 warms every algorithm up (groups, calibration)
        for op, names in CANDIDATES.items():
            for name in names:
                fn = call(op, name)
                totals = sums.setdefault((op, name), [0.0, 0.0, 0.0, 0.0])
                for _ in range(per_block if block else 3):
                    comm.Barrier()
                    region = hosttime.Region().start()
                    start = time.perf_counter()
                    fn()
                    wall = time.perf_counter() - start
                    usage = region.stop()
                    if block:
                        totals[0] += wall
                        totals[1] += usage.process_cpu_s
                        totals[2] += usage.run_delay_s
                        totals[3] += 1
    out: dict[str, Any] = {}
    for (op, name), (wall, cpu, delay, count) in sums.items():
        mine = (wall / count * 1e6, cpu / count * 1e6, delay / count * 1e6)
        every = comm.gather(mine, root=0)
        if comm.rank == 0:
            out.setdefault(op, {})[name] = {
                "mean_us": statistics.fmean(w for w, _, _ in every),
                "max_us": max(w for w, _, _ in every),
                "cpu_us": statistics.fmean(c for _, c, _ in every),
                "run_delay_us": statistics.fmean(d for _, _, d in every),
                "ranks": every,
            }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m emubench.mpi_micro", description=__doc__)
    p.add_argument("--impl", choices=("emucluster", "mpi4py"), default="emucluster")
    p.add_argument("--out", required=True, help="rank 0 writes the JSON results here")
    p.add_argument("--iters", type=int, default=500, help="round trips per ping-pong block")
    p.add_argument("--blocks", type=int, default=5, help="ping-pong blocks (median taken)")
    p.add_argument("--coll-iters", type=int, default=300, help="iterations per collective")
    p.add_argument("--sizes", type=int, nargs="+", default=list(PINGPONG_SIZES))
    p.add_argument("--no-pingpong", action="store_true", help="collectives only")
    p.add_argument(
        "--candidates",
        action="store_true",
        help="emucluster: also every algorithm of CANDIDATES, interleaved",
    )
    p.add_argument("--rounds", type=int, default=5, help="interleaved blocks of --candidates")
    args = p.parse_args(argv)
    mpi = _mpi(args.impl)
    comm = mpi.COMM_WORLD
    results: dict[str, Any] = {"impl": args.impl, "nodes": comm.size}
    if comm.size >= 2 and not args.no_pingpong:
        results["pingpong"] = _pingpong(mpi, comm, args)
    comm.Barrier()
    results["collectives"] = _collectives(mpi, comm, args.coll_iters)
    if args.candidates and args.impl == "emucluster":
        results["candidates"] = _candidates(mpi, comm, args.coll_iters, args.rounds)
    if comm.rank == 0:
        results["environment"] = {
            key: os.environ[key]
            for key in ("EMU_WAIT", "EMU_BCAST", "EMU_REDUCE", "EMU_SPIN_US")
            if key in os.environ
        }
        write_json(args.out, results, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
