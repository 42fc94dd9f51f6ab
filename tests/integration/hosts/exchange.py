"""Host program: send seeded messages of random sizes to every other node, check what arrives.

argv: node nodes socket messages_per_node seed
Message i of a node goes to the i-th of its peers in turn. Prints one JSON line with the
counts and the first error found (None when every message arrived exactly once, in order
per source, byte-identical, and every send completed).
"""

from __future__ import annotations

import json
import random
import struct
import sys

from emucluster.port.client import ErrorEvent, Port, RecvEvent

HEADER = struct.Struct(">HHI")  # src, dst, index
PORT = 0
TIMEOUT_S = 120.0


def payload(src: int, dst: int, index: int, seed: int) -> bytes:
    rng = random.Random(f"{seed}:{src}:{dst}:{index}")
    size = int(2 ** rng.uniform(0, 16))  # log-uniform, 1 B .. 64 KiB
    if rng.random() < 0.02:
        size = 64 * 1024
    size = max(HEADER.size, size)
    return HEADER.pack(src, dst, index) + rng.randbytes(size - HEADER.size)


def destinations(src: int, nodes: int, count: int) -> list[int]:
    peers = [p for p in range(nodes) if p != src]
    return [peers[i % len(peers)] for i in range(count)]


def main() -> None:
    node, nodes = int(sys.argv[1]), int(sys.argv[2])
    sock, per_node, seed = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    peers = [p for p in range(nodes) if p != node]
    expected = sum(destinations(p, nodes, per_node).count(node) for p in peers)
    next_index = dict.fromkeys(peers, 0)
    sent_index = dict.fromkeys(peers, 0)
    errors: list[str] = []
    received = 0

    def take(event: object) -> None:
        nonlocal received
        if isinstance(event, ErrorEvent):
            errors.append(f"send {event.handle} to {event.dst_node} failed: {event.reason}")
            return
        if not isinstance(event, RecvEvent):
            return
        received += 1
        src, dst, index = HEADER.unpack_from(event.payload)
        want = next_index.get(event.src_node)
        if src != event.src_node or dst != node:
            errors.append(f"misdelivered {src}->{dst} at {node} from {event.src_node}")
        elif index != want:
            errors.append(f"from {src}: got message {index}, expected {want}")
        elif event.payload != payload(src, dst, index, seed):
            errors.append(f"from {src}: message {index} corrupted")
        next_index[event.src_node] = index + 1

    with Port.open(sock, PORT, receive_buffers=32) as port:
        for dst in destinations(node, nodes, per_node):
            port.send(dst, PORT, payload(node, dst, sent_index[dst], seed), timeout=TIMEOUT_S)
            sent_index[dst] += 1
            for event in port.poll():
                take(event)
        while received < expected and not errors:
            event = port.wait(timeout=TIMEOUT_S)
            if event is None:
                errors.append(f"timed out with {received} of {expected} received")
            take(event)
        while port.outstanding and not errors:
            event = port.wait(timeout=TIMEOUT_S)
            if event is None:
                errors.append(f"timed out with {port.outstanding} sends outstanding")
            take(event)
    result = {"node": node, "received": received, "expected": expected, "errors": errors[:5]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
