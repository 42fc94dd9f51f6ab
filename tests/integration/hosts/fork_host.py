"""Host program for the fork-server tests; argv[1] picks the behaviour.

info             print one JSON line: rank, argv, __name__, __file__, sys.path[0], whether
                 the parent is the fork server, a random number, stdin, signal handlers,
                 where ``import emucluster`` found the package
kill R SIG       rank R kills itself with signal SIG; the others wait forever
raise R          rank R raises an uncaught ValueError; the others wait forever
interrupt R      rank R raises KeyboardInterrupt; the others wait forever
unclosed DIR     write DIR/rank<R>.txt through a file never closed, keep a finalizable
                 cycle, then sys.exit("bye <R>"): the end must flush, finalize, say bye, exit 1
mpi              import MPI (mpi4py's name when EMUCLUSTER_MPI4PY=1), Barrier, print the rank
hang             say ready, then wait forever
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time

RANK = int(os.environ["EMU_RANK"])
TIMEOUT_S = 60.0


def emucluster_file() -> str:
    """Where ``import emucluster`` finds the package in this process."""
    import emucluster  # asked only here: the other commands must not import it

    return str(emucluster.__file__)


def parent_cmdline() -> str:
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


def wait_forever() -> None:
    time.sleep(TIMEOUT_S)
    sys.exit(9)


KEEP: object = None


class Cycle:
    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        print(f"cycle of {RANK} finalized", flush=True)


def main() -> None:
    what = sys.argv[1]
    if what == "info":
        doc = {
            "rank": RANK,
            "argv": sys.argv,
            "name": __name__,
            "file": __file__,
            "path0": sys.path[0],
            "forked": "launcher.forkserver" in parent_cmdline(),
            "random": random.random(),
            "stdin": sys.stdin.read(),
            "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
            "sigchld": signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL,
            "pgid": os.getpgid(0) == os.getpid(),
            "executable": sys.executable,
            "emucluster": emucluster_file(),
        }
        print(json.dumps(doc), flush=True)
        print(f"stderr of {RANK}", file=sys.stderr)
    elif what == "hang":
        print(f"ready {RANK} {os.getpid()}", flush=True)
        wait_forever()
    elif what in ("kill", "raise", "interrupt"):
        if int(sys.argv[2]) != RANK:
            wait_forever()
        if what == "kill":
            os.kill(os.getpid(), getattr(signal, sys.argv[3]))
            time.sleep(TIMEOUT_S)
        if what == "raise":
            raise ValueError("boom from the program")
        raise KeyboardInterrupt
    elif what == "unclosed":
        global KEEP
        f = open(os.path.join(sys.argv[2], f"rank{RANK}.txt"), "w")  # noqa: SIM115
        f.write("flushed at exit\n")
        KEEP = Cycle()
        sys.exit(f"bye {RANK}")
    elif what == "mpi":
        if os.environ.get("EMUCLUSTER_MPI4PY") == "1":
            from mpi4py import MPI
        else:
            from emucluster import MPI
        MPI.COMM_WORLD.Barrier()
        via = "mpi4py" if "mpi4py" in sys.modules else "emucluster"
        print(f"rank {MPI.COMM_WORLD.Get_rank()} of {MPI.COMM_WORLD.Get_size()} via {via}")


if __name__ == "__main__":
    main()
