"""Host program for the cleanup tests: open port 0 (so the library watches the lifeline), leave
a /dev/shm segment of the job and a child in a session of its own that ignores SIGTERM, say
``ready RANK PID``, then sleep forever without touching the port (only the lifeline can stop
it: its nicd dying would not, since it never reads the port)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from emucluster.port.client import Port

RANK = int(os.environ["EMU_RANK"])
JOB = os.environ["EMU_JOB_ID"]


def main() -> None:
    port = Port.open(port=0)
    with open(f"/dev/shm/emu_{JOB}_{RANK}_orphan", "wb") as f:
        f.write(bytes(4096))
    subprocess.Popen(
        [sys.executable, "-c", "import signal, time\n"
         "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(3600)"],
        start_new_session=True,
    )  # fmt: skip
    print(f"ready {RANK} {os.getpid()}", flush=True)
    while port is not None:
        time.sleep(3600)


if __name__ == "__main__":
    main()
