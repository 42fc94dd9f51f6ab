"""Port-level placement benchmark: ping-pong between ranks 0 and 1, then an all-to-all exchange.

Run under emurun with each placement and compare, e.g.::

    emurun -np 2 --bind-to core examples/port_bench.py pingpong 2000
    emurun -np 16 --bind-to none examples/port_bench.py pingpong 2000 busy
    emurun -np 16 --bind-to none examples/port_bench.py exchange 50

``pingpong N [busy]``: ranks 0 and 1 bounce a 64-byte message N times (after 200 warm-up
rounds); rank 0 prints the median and 90th percentile one-way time (half a round trip). Other
ranks idle, or with ``busy`` spin on the CPU until rank 0 is done (the papers' busy hosts,
DESIGN §10). ``exchange N``: N rounds in which every rank sends 64 bytes to every other rank and
waits for all of them; rank 0 prints the median and 90th percentile round time. Output is
one JSON line from rank 0.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from emucluster.port.client import Port, RecvEvent

PORT = 0
WARMUP = 200
TIMEOUT_S = 60.0
PAYLOAD = bytes(64)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def spin_until_told(port: Port) -> None:
    while not any(isinstance(event, RecvEvent) for event in port.poll()):
        end = time.perf_counter() + 0.001
        while time.perf_counter() < end:
            pass


def pingpong(port: Port, rank: int, size: int, rounds: int, busy: bool) -> dict[str, float] | None:
    if rank > 1:
        if busy:
            spin_until_told(port)
        return None
    peer = 1 - rank
    samples = []
    for i in range(WARMUP + rounds):
        start = time.perf_counter()
        if rank == 0:
            port.send(peer, PORT, PAYLOAD)
            port.recv(timeout=TIMEOUT_S)
        else:
            port.recv(timeout=TIMEOUT_S)
            port.send(peer, PORT, PAYLOAD)
        if i >= WARMUP:
            samples.append((time.perf_counter() - start) / 2 * 1e6)
    if busy and rank == 0:
        for other in range(2, size):
            port.send(other, PORT, b"stop")
    port.flush(timeout=TIMEOUT_S)
    return {"median_us": statistics.median(samples), "p90_us": percentile(samples, 0.9)}


def exchange(port: Port, rank: int, size: int, rounds: int) -> dict[str, float]:
    samples = []
    # Rounds are not separated by a barrier: a fast rank's next-round messages may arrive
    # early, which is fine (each round receives size-1 messages, any round's).
    for i in range(WARMUP // 10 + rounds):
        start = time.perf_counter()
        for peer in range(size):
            if peer != rank:
                port.send(peer, PORT, PAYLOAD)
        for _ in range(size - 1):
            port.recv(timeout=TIMEOUT_S)
        if i >= WARMUP // 10:
            samples.append((time.perf_counter() - start) * 1e6)
    port.flush(timeout=TIMEOUT_S)
    return {"median_us": statistics.median(samples), "p90_us": percentile(samples, 0.9)}


def main() -> None:
    kind, rounds = sys.argv[1], int(sys.argv[2])
    rank, size = int(os.environ["EMU_RANK"]), int(os.environ["EMU_SIZE"])
    with Port.open(port=PORT) as port:
        if kind == "pingpong":
            busy = sys.argv[3:] == ["busy"]
            result = pingpong(port, rank, size, rounds, busy)
        elif kind == "exchange":
            result = exchange(port, rank, size, rounds)
        else:
            sys.exit(f"unknown benchmark {kind!r}: pingpong or exchange")
        time.sleep(0.2)  # let the last acknowledgements settle before ports close
    if rank == 0 and result is not None:
        print(json.dumps({"bench": " ".join(sys.argv[1:]), "nodes": size, **result}))


if __name__ == "__main__":
    main()
