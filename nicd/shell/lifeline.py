"""The lifeline: a process started by a launcher notices that the launcher died, and stops.

The launcher keeps the write end of a pipe (close-on-exec: no child inherits it) and hands
every child the read end, kept open across exec, with ``EMU_LIFELINE=<fd>:<dev>:<inode>`` in
its environment. Nobody ever writes: the read end sees EOF when the launcher process is gone,
however it died (``kill -9`` included). The child's watch is one daemon thread blocked in
``read``; at EOF it stops the process: SIGTERM to itself (to its process group when it leads
one, so what a host started goes too), then SIGKILL after a grace period if still alive. A child
whose launcher died before the watch started reads EOF at once, so there is no race to close.
The device and inode identify the pipe: an fd number inherited without the pipe (a grandchild
started with ``close_fds``, which keeps the variable but not the fd) is ignored, never read.

Why not ``PR_SET_PDEATHSIG``: it fires when the *thread* that forked the child exits, not the
process. trio forks in a worker thread (``trio.lowlevel.open_process`` runs ``subprocess.Popen``
through ``trio.to_thread``), and an idle worker thread exits after 10 s: every child would be
killed about 10 s after its start. A pipe's EOF depends on the process alone, works whoever
launches (emurun, a per-host agent), and also reaches a child started after its launcher died.

Invariant: the watch reads, never writes, and acts only on EOF or a read error of *that* pipe.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["ENV_LIFELINE", "STOP_GRACE_S", "Lifeline", "parse", "stop_this_process", "watch"]

ENV_LIFELINE = "EMU_LIFELINE"
STOP_GRACE_S = 5.0  # SIGTERM, then SIGKILL after this long

_watching = False
_watch_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Lifeline:
    """The launcher's side: the pipe whose write end only the launcher holds."""

    read_fd: int
    """Passed to every child (``pass_fds``); the launcher never reads it."""
    write_fd: int
    """Held until the launcher exits; never written."""

    @classmethod
    def create(cls) -> Lifeline:
        """A new pipe; both ends close-on-exec (a child gets the read end via ``pass_fds``)."""
        read_fd, write_fd = os.pipe()
        return cls(read_fd, write_fd)

    def environ(self) -> dict[str, str]:
        """The variable that tells a child which inherited fd is its lifeline."""
        st = os.fstat(self.read_fd)
        return {ENV_LIFELINE: f"{self.read_fd}:{st.st_dev}:{st.st_ino}"}

    def close(self) -> None:
        """Close both ends (the children see EOF once the last write end is gone)."""
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def parse(value: str) -> tuple[int, int, int] | None:
    """``fd:dev:inode`` as numbers, or None when it does not parse."""
    parts = value.split(":")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    fd, dev, ino = (int(p) for p in parts)
    return fd, dev, ino


def _inherited_pipe(environ: Mapping[str, str]) -> int | None:
    """The lifeline fd named in ``environ`` if this process really holds that pipe."""
    spec = parse(environ.get(ENV_LIFELINE, ""))
    if spec is None:
        return None
    fd, dev, ino = spec
    try:
        st = os.fstat(fd)
    except (OSError, OverflowError):
        return None
    if not stat.S_ISFIFO(st.st_mode) or (st.st_dev, st.st_ino) != (dev, ino):
        return None
    return fd


def watch(
    on_death: Callable[[], None] | None = None, environ: Mapping[str, str] = os.environ
) -> bool:
    """Start watching the lifeline named in ``environ`` (once per process); call ``on_death``
    (default: `stop_this_process`) from the watch thread when the launcher is gone. Return
    whether a watch runs (False: no lifeline, e.g. not started by a launcher)."""
    global _watching
    with _watch_lock:
        if _watching:
            return True
        fd = _inherited_pipe(environ)
        if fd is None:
            return False
        os.set_inheritable(fd, False)  # our own children get their launcher's, not ours
        action = on_death or stop_this_process
        thread = threading.Thread(
            target=_wait_for_eof, args=(fd, action), name="lifeline", daemon=True
        )
        thread.start()
        _watching = True
        return True


def _wait_for_eof(fd: int, on_death: Callable[[], None]) -> None:
    while True:
        try:
            if not os.read(fd, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    on_death()


def stop_this_process(grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM this process (its whole group if it leads one), SIGKILL after ``grace_s``."""
    pid = os.getpid()
    leader = os.getpgid(0) == pid

    def send(signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if leader:
                os.killpg(pid, signum)
            else:
                os.kill(pid, signum)

    send(signal.SIGTERM)
    time.sleep(grace_s)
    send(signal.SIGKILL)
