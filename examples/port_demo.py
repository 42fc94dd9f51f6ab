"""Port-level demo: every rank greets every other rank; rank 0 prints what arrived.

Run it on 8 emulated nodes with ``emurun -np 8 examples/port_demo.py``. Each host opens GM
port 0 of its NIC, sends one greeting to port 0 of every other node, receives the size-1
greetings addressed to it, and reports to rank 0, which prints a summary.
"""

from __future__ import annotations

import json
import os
import time

from emucluster.port.client import Port

PORT = 0
TIMEOUT_S = 60.0


def main() -> None:
    rank, size = int(os.environ["EMU_RANK"]), int(os.environ["EMU_SIZE"])
    with Port.open(port=PORT) as port:
        start = time.perf_counter()
        for peer in range(size):
            if peer != rank:
                port.send(peer, PORT, f"hello from {rank}".encode())
        greetings = sorted(port.recv(timeout=TIMEOUT_S).payload.decode() for _ in range(size - 1))
        port.flush(timeout=TIMEOUT_S)
        elapsed_ms = (time.perf_counter() - start) * 1000
        if rank != 0:  # report to rank 0 (greetings are all in: a report is never mistaken)
            port.send(0, PORT, json.dumps([rank, len(greetings), elapsed_ms]).encode())
            port.flush(timeout=TIMEOUT_S)
            return
        reports = [json.loads(port.recv(timeout=TIMEOUT_S).payload) for _ in range(size - 1)]
    reports.append([0, len(greetings), elapsed_ms])
    print(f"{size} nodes on the emulated Myrinet; every rank greeted every other rank")
    for r, got, ms in sorted(reports):
        print(f"  rank {r}: {got} greetings in {ms:.1f} ms")
    ok = all(got == size - 1 for _, got, _ in reports)
    print("all greetings arrived" if ok else "GREETINGS MISSING")


if __name__ == "__main__":
    main()
