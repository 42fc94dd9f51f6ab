"""The warden: one small process per launcher (emurun, or an agent) that outlives it, and ends
its part of the job the moment it dies, whatever the programs do.

The launcher starts it before its first nicd, in a process group of its own, with the read end
of a pipe as stdin; only the launcher holds the write end (close-on-exec: no child inherits it).
At a normal end the launcher, after its own sweep, writes one byte: the warden exits without
doing anything. If the launcher dies (``kill -9`` included) the pipe reads EOF without that
byte, and the warden at once SIGKILLs every process carrying the job's marks (the fork server,
nicds, hosts, what the hosts started: `strike`, straight from ``/proc``), then runs the sweep the
launcher would have run (`launcher.cleanup.sweep`, same job id, owner pid, agent marker and
nodes): the same processes waited for, the segments, the run directory.

Why a process of its own: the lifeline (`nicd.shell.lifeline`) needs the program's cooperation
(a host that never opened its NIC never watches it); ``PR_SET_PDEATHSIG`` of a directly started
child is tied to the thread that forked it (a trio worker thread, which exits when idle) and
reaches only that child, not the fork server's nor what a host started; and nothing else is
left to remove the run directory and the segments. The fork server also kills its children when
the launcher's end of its control socket closes (`launcher.forkserver.zygote`), without waiting
for the warden.

The warden's own environment carries none of the job's marks (no sweep counts it as a job's
process), it ignores SIGINT and SIGHUP (a terminal's Ctrl-C reaches the launcher, whose orderly
stop then stands the warden down), and it imports the sweep only when it has to run it.

Invariant: the warden acts only on EOF of its own pipe, and only on the processes that carry
all three of the job id, the owner pid and the agent marker (emurun's or an agent's) it was
started with.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    import trio

__all__ = [
    "STAND_DOWN",
    "Warden",
    "job_marks",
    "main",
    "parse_args",
    "strike",
    "warden_argv",
    "watch",
]

STAND_DOWN = b"."
"""The one byte a launcher writes at a normal end."""
_STOP_WAIT_S = 10.0
_ALL = "all"


def warden_argv(
    python: str,
    job_id: str,
    run_dir: str,
    owner: int,
    agent: str,
    nodes: Collection[int] | None,
    names: Sequence[str],
) -> list[str]:
    """The warden's command line (``nodes`` None: every segment of the job is ours; ``names``:
    the variables that carry the job id, the owner pid and the agent marker)."""
    which = _ALL if nodes is None else ",".join(str(n) for n in sorted(nodes))
    return [python, "-m", "launcher.warden", job_id, run_dir, str(owner), agent, which, *names]


def job_marks() -> tuple[str, str, str, str]:
    """The variables of the job id, owner pid, agent marker (what the sweep reads) and the
    lifeline: the warden's own environment carries none (it must not look like a job's
    process). Read in the launcher, which has imported them already."""
    from emucluster.config import ENV_JOB_ID  # late: never in the warden process (start-up)
    from launcher.cleanup import ENV_AGENT, ENV_JOB_OWNER  # late: as above
    from nicd.shell.lifeline import ENV_LIFELINE  # late: as above

    return ENV_JOB_ID, ENV_JOB_OWNER, ENV_AGENT, ENV_LIFELINE


class Warden:
    """The launcher's handle on its running warden."""

    def __init__(self, process: trio.Process, write_fd: int) -> None:
        self.process = process
        self._write_fd = write_fd

    @classmethod
    async def start(
        cls,
        job_id: str,
        run_dir: str,
        agent: str,
        nodes: Collection[int] | None,
        env: Mapping[str, str] = os.environ,
    ) -> Warden:
        """Start the warden of this process's part of ``job_id``. Raises OSError."""
        import trio  # late: the warden process itself never imports trio (start-up cost)

        read_fd, write_fd = os.pipe()  # both close-on-exec: only the warden gets read_fd
        marks = job_marks()
        clean = {k: v for k, v in env.items() if k not in marks}
        argv = warden_argv(sys.executable, job_id, run_dir, os.getpid(), agent, nodes, marks[:3])
        try:
            process = await trio.lowlevel.open_process(
                argv,
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                env=clean,
                process_group=0,
            )
        except OSError:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        return cls(process, write_fd)

    async def stand_down(self) -> None:
        """The job ended in order: tell the warden, wait for it to exit."""
        import trio  # late: as in start

        with contextlib.suppress(OSError):
            os.write(self._write_fd, STAND_DOWN)
        with contextlib.suppress(OSError):
            os.close(self._write_fd)
        with trio.move_on_after(_STOP_WAIT_S):
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


def _wait_for_launcher(fd: int) -> bool:
    """Block until the launcher stands us down (True) or dies (False: EOF or a read error)."""
    while True:
        try:
            data = os.read(fd, 1)
        except InterruptedError:
            continue
        except OSError:
            return False
        return data == STAND_DOWN


def strike(marks: Mapping[str, str]) -> list[int]:
    """SIGKILL every process of this user whose environment carries all of ``marks`` (read
    from ``/proc``, without psutil: the first thing the warden does); return their pids. The
    sweep that follows finds the same processes (`launcher.cleanup.job_processes`) and waits
    for them."""
    wanted = [f"{name}={value}".encode() for name, value in marks.items()]
    me, killed = os.getpid(), []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    environ = set(f.read().split(b"\0"))
            except OSError:  # gone, or not ours to read
                continue
            if all(w in environ for w in wanted):
                with contextlib.suppress(OSError):
                    os.kill(int(entry.name), signal.SIGKILL)
                    killed.append(int(entry.name))
    return killed


def watch(fd: int, job_id: str, run_dir: str, owner: int, agent: str,
          nodes: list[int] | None, names: Sequence[str]) -> int:  # fmt: skip
    """Wait on the launcher's pipe ``fd``; if it dies, strike (``names``: the variables of the
    job id, owner and agent marker) and sweep. The exit status: 0, or 1 when a process would
    not die."""
    if _wait_for_launcher(fd):
        return 0
    strike(
        dict(zip(names, (job_id, str(owner), agent), strict=True))
    )  # at once: importing the sweep takes a while on a loaded machine
    from launcher import cleanup  # late: only now (psutil and the plan), most never need it

    report = cleanup.sweep(job_id, run_dir, owner=owner, agent=agent, nodes=nodes)
    if report.survivors:
        print(f"warden: job {job_id}: pids {report.survivors} would not die", file=sys.stderr)
        return 1
    return 0


_Args = tuple[str, str, int, str, list[int] | None, list[str]]


def parse_args(args: list[str]) -> _Args | None:
    """``JOB RUN_DIR OWNER AGENT NODES JOBVAR OWNERVAR AGENTVAR`` (NODES ``all`` or ``1,3``),
    or None if malformed."""
    if len(args) != 8 or not args[2].isdigit():
        return None
    job_id, run_dir, owner, agent, which, *names = args
    if which == _ALL:
        return job_id, run_dir, int(owner), agent, None, names
    nodes = which.split(",")
    if not all(n.isdigit() for n in nodes):
        return None
    return job_id, run_dir, int(owner), agent, [int(n) for n in nodes], names


def main() -> int:
    """``python -m launcher.warden JOB RUN_DIR OWNER AGENT NODES JOBVAR OWNERVAR AGENTVAR``,
    the launcher's pipe as stdin."""
    parsed = parse_args(sys.argv[1:])
    if parsed is None:
        print("usage: python -m launcher.warden JOB RUN_DIR OWNER AGENT all|N,N... "
              "JOBVAR OWNERVAR AGENTVAR", file=sys.stderr)  # fmt: skip
        return 2
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    return watch(0, *parsed)


if __name__ == "__main__":
    sys.exit(main())
