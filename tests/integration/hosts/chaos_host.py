"""Host program for the chaos tests: all-pairs traffic on port 0, checked message by message.

argv: rounds stop_rank
Each round a rank sends one seeded message (1 B .. 4 KiB) to every other rank, then takes
what has arrived; every message must arrive exactly once, in order per source, intact.
``rounds`` < 0: go on for ever (the test kills something). Rank ``stop_rank`` stops itself
with SIGSTOP halfway through its sends (after printing ``stopping RANK PID``) and goes on when
the test sends SIGCONT. Prints ``ready RANK PID`` once its port is open and, at the end, one
JSON line with the counts and the first errors.
"""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import sys

from emucluster.port.client import ErrorEvent, Port, RecvEvent

HEADER = struct.Struct(">HHI")  # src, dst, index
PORT = 0
TIMEOUT_S = 300.0  # the whole job is bounded by the test's own timeout
RANK = int(os.environ["EMU_RANK"])
SIZE = int(os.environ["EMU_SIZE"])


def payload(src: int, dst: int, index: int) -> bytes:
    rng = random.Random(f"{src}:{dst}:{index}")
    size = max(HEADER.size, int(2 ** rng.uniform(0, 12)))
    return HEADER.pack(src, dst, index) + rng.randbytes(size - HEADER.size)


def main() -> None:
    rounds, stop_rank = int(sys.argv[1]), int(sys.argv[2])
    peers = [p for p in range(SIZE) if p != RANK]
    next_index = dict.fromkeys(peers, 0)
    errors: list[str] = []
    received = 0

    def take(event: object) -> None:
        nonlocal received
        if isinstance(event, ErrorEvent):
            errors.append(f"send to {event.dst_node} failed: {event.reason}")
        if not isinstance(event, RecvEvent):
            return
        received += 1
        src, dst, index = HEADER.unpack_from(event.payload)
        want = next_index.get(event.src_node)
        if src != event.src_node or dst != RANK:
            errors.append(f"misdelivered {src}->{dst} at {RANK} from {event.src_node}")
        elif index != want:
            errors.append(f"from {src}: got message {index}, expected {want}")
        elif event.payload != payload(src, dst, index):
            errors.append(f"from {src}: message {index} corrupted")
        next_index[event.src_node] = index + 1

    with Port.open(port=PORT, receive_buffers=8) as port:
        print(f"ready {RANK} {os.getpid()}", flush=True)
        index = 0
        while (rounds < 0 or index < rounds) and not errors:
            if stop_rank == RANK and index == rounds // 2:
                print(f"stopping {RANK} {os.getpid()}", flush=True)
                os.kill(os.getpid(), signal.SIGSTOP)
            for dst in peers:
                port.send(dst, PORT, payload(RANK, dst, index), timeout=TIMEOUT_S)
            index += 1
            for event in port.poll():
                take(event)
        expected = len(peers) * rounds
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
    print(json.dumps({"rank": RANK, "received": received, "errors": errors[:5]}), flush=True)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
