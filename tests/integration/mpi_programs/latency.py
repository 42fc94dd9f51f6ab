"""8-byte one-way latency: raw GM port ping-pong vs MPI Send/Recv, interleaved in one run.

Run: ``emurun -np 2 python tests/integration/mpi_programs/latency.py [ROUNDS] [BLOCKS]``.
Ranks 0 and 1 alternate BLOCKS blocks of ROUNDS ping-pongs on a raw Port (port 3) and with
``MPI.COMM_WORLD.Send/Recv`` (8 bytes each way), so both see the same machine state. Rank 0
prints one JSON line: median one-way microseconds of each and their ratio.
"""

from __future__ import annotations

import json
import statistics
import sys

from emucluster import MPI
from emucluster.port.client import Port

RAW_PORT = 3


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    blocks = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    comm = MPI.COMM_WORLD
    rank = comm.rank
    if rank > 1:
        return
    peer = 1 - rank
    port = Port.open(port=RAW_PORT)
    comm.Barrier() if comm.size == 2 else None
    payload = bytes(8)
    buf = bytearray(8)
    raw: list[float] = []
    mpi: list[float] = []
    for _ in range(blocks):
        for _ in range(rounds // 5):  # warm-up
            if rank == 0:
                port.send(peer, RAW_PORT, payload)
                port.recv()
            else:
                port.recv()
                port.send(peer, RAW_PORT, payload)
        t0 = MPI.Wtime()
        for _ in range(rounds):
            if rank == 0:
                port.send(peer, RAW_PORT, payload)
                port.recv()
            else:
                port.recv()
                port.send(peer, RAW_PORT, payload)
        raw.append((MPI.Wtime() - t0) / rounds / 2 * 1e6)
        t0 = MPI.Wtime()
        for _ in range(rounds):
            if rank == 0:
                comm.Send(payload, peer)
                comm.Recv(buf, peer)
            else:
                comm.Recv(buf, peer)
                comm.Send(buf, peer)
        mpi.append((MPI.Wtime() - t0) / rounds / 2 * 1e6)
    port.flush(timeout=30)
    port.close()
    if rank == 0:
        raw_us, mpi_us = statistics.median(raw), statistics.median(mpi)
        print(
            json.dumps(
                {
                    "raw_port_us": round(raw_us, 1),
                    "mpi_us": round(mpi_us, 1),
                    "ratio": round(mpi_us / raw_us, 3),
                    "rounds": rounds,
                    "blocks": blocks,
                }
            )
        )


if __name__ == "__main__":
    main()
