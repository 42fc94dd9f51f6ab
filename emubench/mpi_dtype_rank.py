"""One rank's side of ``emubench mpi-datatypes``, under emucluster or under mpi4py (MPICH).

``emurun -np N python -m emubench.mpi_dtype_rank --out FILE`` or, as the reference,
``mpiexec -n N python -m emubench.mpi_dtype_rank --impl mpi4py --out FILE``. The same code
runs under both; only the ``MPI`` module differs. Rank 0 writes one JSON file:

* ``alltoallv`` (every rank): OSU-style ``osu_alltoallv`` latency, ``size`` bytes to and from
  every rank (counts and displacements given explicitly), mean microseconds per call over
  ``--coll-iters`` calls after a warm-up and a barrier; the figure is the mean over ranks with
  the slowest rank's mean beside it, as OSU reports.
* ``vector_pingpong`` (ranks 0 and 1): one-way microseconds of a ping-pong whose messages are
  ``size`` bytes of doubles, sent once from a contiguous array and once as a vector datatype
  (every other double of an array twice as long: ``Create_vector(n, 1, 2)``); the receiver
  always receives contiguously. Blocks of the two variants alternate so both see the same
  machine; the median of ``--blocks`` blocks is kept.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from emubench.common import write_json

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["main"]

ALLTOALLV_SIZES = (8, 64, 512, 4096, 16384)
VECTOR_SIZES = (64, 512, 4096, 32768, 131072)


def _one_way_us(rounds: int, round_trip: Callable[[], object]) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        round_trip()
    return (time.perf_counter() - start) / rounds / 2 * 1e6


def _alltoallv_us(mpi: Any, comm: Any, size: int, iters: int) -> float:
    """This rank's mean microseconds of one Alltoallv of ``size`` bytes per peer."""
    n = comm.size
    send = np.ones(size * n, dtype=np.uint8)
    recv = np.zeros(size * n, dtype=np.uint8)
    counts = [size] * n
    displs = [size * r for r in range(n)]
    send_spec = [send, counts, displs, mpi.BYTE]
    recv_spec = [recv, counts, displs, mpi.BYTE]
    for _ in range(max(3, iters // 10)):
        comm.Alltoallv(send_spec, recv_spec)
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(iters):
        comm.Alltoallv(send_spec, recv_spec)
    return (time.perf_counter() - start) / iters * 1e6


def _alltoallv(mpi: Any, comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"sizes": list(args.alltoallv_sizes), "mean_us": [], "max_us": []}
    for size in args.alltoallv_sizes:
        iters = args.coll_iters if size <= 4096 else max(10, args.coll_iters // 4)
        every = comm.gather(_alltoallv_us(mpi, comm, size, iters), root=0)
        if comm.rank == 0:
            out["mean_us"].append(statistics.fmean(every))
            out["max_us"].append(max(every))
    return out


def _round_trips(
    mpi: Any, comm: Any, size: int
) -> tuple[Callable[[], object], Callable[[], object], Any]:
    """(contiguous, vector) round trips of ``size`` bytes of doubles, and the vector type."""
    peer = 1 - comm.rank
    count = size // 8
    contiguous = np.ones(count)
    strided = np.ones(2 * count)  # the message is every other double of it
    landing = np.zeros(count)
    vector = mpi.DOUBLE.Create_vector(count, 1, 2).Commit()
    first = comm.rank == 0

    def plain() -> object:
        if first:
            comm.Send([contiguous, mpi.DOUBLE], dest=peer, tag=3)
            comm.Recv([landing, mpi.DOUBLE], source=peer, tag=3)
        else:
            comm.Recv([landing, mpi.DOUBLE], source=peer, tag=3)
            comm.Send([contiguous, mpi.DOUBLE], dest=peer, tag=3)
        return None

    def strided_trip() -> object:
        if first:
            comm.Send([strided, 1, vector], dest=peer, tag=4)
            comm.Recv([landing, mpi.DOUBLE], source=peer, tag=4)
        else:
            comm.Recv([landing, mpi.DOUBLE], source=peer, tag=4)
            comm.Send([strided, 1, vector], dest=peer, tag=4)
        return None

    return plain, strided_trip, vector


def _vector_pingpong(mpi: Any, comm: Any, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"sizes": list(args.vector_sizes), "contiguous_us": [], "vector_us": []}
    if comm.rank > 1:
        return out
    for size in args.vector_sizes:
        plain, strided, vector = _round_trips(mpi, comm, size)
        rounds = max(10, args.iters if size <= 4096 else args.iters // 8)
        for trip in (plain, strided):
            _one_way_us(max(3, rounds // 5), trip)  # warm-up
        contiguous_blocks, vector_blocks = [], []
        for _ in range(args.blocks):
            contiguous_blocks.append(_one_way_us(rounds, plain))
            vector_blocks.append(_one_way_us(rounds, strided))
        vector.Free()
        out["contiguous_us"].append(statistics.median(contiguous_blocks))
        out["vector_us"].append(statistics.median(vector_blocks))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m emubench.mpi_dtype_rank", description=__doc__)
    p.add_argument("--impl", choices=("emucluster", "mpi4py"), default="emucluster")
    p.add_argument("--out", required=True, help="rank 0 writes the JSON results here")
    p.add_argument("--iters", type=int, default=300, help="round trips per ping-pong block")
    p.add_argument("--blocks", type=int, default=5, help="ping-pong blocks (median taken)")
    p.add_argument("--coll-iters", type=int, default=100, help="Alltoallv calls per size")
    p.add_argument("--alltoallv-sizes", type=int, nargs="+", default=list(ALLTOALLV_SIZES))
    p.add_argument("--vector-sizes", type=int, nargs="+", default=list(VECTOR_SIZES))
    args = p.parse_args(argv)
    mpi = importlib.import_module(f"{args.impl}.MPI")
    comm = mpi.COMM_WORLD
    results: dict[str, Any] = {"impl": args.impl, "nodes": comm.size}
    results["alltoallv"] = _alltoallv(mpi, comm, args)
    comm.Barrier()
    if comm.size >= 2:
        results["vector_pingpong"] = _vector_pingpong(mpi, comm, args)
    comm.Barrier()
    if comm.rank == 0:
        write_json(args.out, results, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
