"""Host program for the emurun tests; argv[1] picks the behaviour, EMU_* says where it runs.

hello            print one line on stdout and one on stderr, exit 0
fail R CODE      rank R exits with CODE; the others wait forever
hang             say ready, then wait forever
stubborn         ignore SIGTERM, say ready, wait forever
recv             open port 0, say ready, wait for a message forever (fails if nicd dies)
leak             create a /dev/shm segment of the job and a child that ignores SIGTERM
                 (in a session of its own), say ready, then wait forever
exchange K       send K messages to every other rank on port 0, receive all, exit 0
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

RANK = int(os.environ["EMU_RANK"])
SIZE = int(os.environ["EMU_SIZE"])
JOB = os.environ["EMU_JOB_ID"]
TIMEOUT_S = 60.0


def ready() -> None:
    print(f"ready {RANK} {os.getpid()}", flush=True)


def forever() -> None:
    while True:
        time.sleep(3600)


def exchange(count: int) -> None:
    from emucluster.port.client import Port

    with Port.open(port=0) as port:
        for i in range(count):
            for peer in range(SIZE):
                if peer != RANK:
                    port.send(peer, 0, f"{RANK}:{i}".encode() + bytes(100))
        got = [port.recv(timeout=TIMEOUT_S) for _ in range(count * (SIZE - 1))]
        port.flush(timeout=TIMEOUT_S)
    assert len(got) == count * (SIZE - 1)
    print(f"rank {RANK} received {len(got)}", flush=True)


def main() -> None:
    what = sys.argv[1]
    if what == "hello":
        print(f"out {RANK} of {SIZE}")
        print(f"err {RANK}", file=sys.stderr)
    elif what == "fail":
        ready()
        if int(sys.argv[2]) == RANK:
            print(f"rank {RANK} failing", file=sys.stderr, flush=True)
            time.sleep(0.2)  # let the others start waiting
            sys.exit(int(sys.argv[3]))
        forever()
    elif what == "hang":
        ready()
        forever()
    elif what == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        ready()
        forever()
    elif what == "recv":
        from emucluster.port.client import Port

        with Port.open(port=0) as port:
            ready()
            port.recv()
    elif what == "leak":
        with open(f"/dev/shm/emu_{JOB}_{RANK}", "wb") as f:
            f.write(bytes(4096))
        subprocess.Popen(
            [sys.executable, "-c", "import signal, time\n"
             "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(3600)"],
            start_new_session=True,
        )  # fmt: skip
        ready()
        forever()
    elif what == "exchange":
        exchange(int(sys.argv[2]))
    else:
        sys.exit(f"unknown behaviour {what!r}")


if __name__ == "__main__":
    main()
