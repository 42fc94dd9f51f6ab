"""Host program for the no-silent-loss test: rank 0 sends one large message to rank 1 (the
test freezes rank 0's nicd in the middle of it), then a small one on the same stream.

Rank 0 starts once rank 1 said hello (its port is open), prints ``sending PID`` just before
the large send, then ``outcome sent`` or ``outcome error NODE REASON`` for it, then sends
``after`` and waits for its SENT. Rank 1 prints ``got big LENGTH OK`` for the large message if
it ever arrives (OK: intact) and ``got after`` for the small one, then exits. Every wait is
bounded: a timeout prints ``timeout WHAT`` and exits 1.
"""

from __future__ import annotations

import os
import sys

from emucluster.port.client import ErrorEvent, Port, RecvEvent, SentEvent

PORT = 0
TIMEOUT_S = 120.0
RANK = int(os.environ["EMU_RANK"])
AFTER = b"after"


def big(size: int) -> bytes:
    return bytes(i % 251 for i in range(size))


def outcome(port: Port, handle: int) -> SentEvent | ErrorEvent:
    while True:
        event = port.wait(timeout=TIMEOUT_S)
        if event is None:
            print(f"timeout outcome of {handle}", flush=True)
            sys.exit(1)
        if isinstance(event, SentEvent | ErrorEvent) and event.handle == handle:
            return event


def sender(port: Port, size: int) -> None:
    payload = big(size)
    port.recv(timeout=TIMEOUT_S)  # rank 1's port is open
    print(f"sending {os.getpid()}", flush=True)
    handle = port.send(1, PORT, payload, timeout=TIMEOUT_S)
    done = outcome(port, handle)
    if isinstance(done, ErrorEvent):
        print(f"outcome error {done.dst_node} {done.reason}", flush=True)
    else:
        print("outcome sent", flush=True)
    if not isinstance(outcome(port, port.send(1, PORT, AFTER, timeout=TIMEOUT_S)), SentEvent):
        print("after failed", flush=True)
        sys.exit(1)


def receiver(size: int) -> None:
    with Port.open(port=PORT, receive_buffers=2) as port:
        print(f"ready {RANK} {os.getpid()}", flush=True)
        port.send(0, PORT, b"hello", timeout=TIMEOUT_S)
        while True:
            event = port.wait(timeout=TIMEOUT_S)
            if event is None:
                print("timeout receive", flush=True)
                sys.exit(1)
            if not isinstance(event, RecvEvent):
                continue
            if event.payload == AFTER:
                print("got after", flush=True)
                return
            print(f"got big {len(event.payload)} {event.payload == big(size)}", flush=True)


def main() -> None:
    size = int(sys.argv[1])
    if RANK == 1:
        receiver(size)
        return
    with Port.open(port=PORT, receive_buffers=2) as port:
        print(f"ready {RANK} {os.getpid()}", flush=True)
        sender(port, size)


if __name__ == "__main__":
    main()
