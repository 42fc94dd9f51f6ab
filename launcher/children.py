"""One started process as the supervisor sees it: spawn, wait, signal, measure, forward output.

Each child gets its own process group (so a Ctrl-C on the terminal reaches emurun alone, and
stopping a host also stops what it started). A direct child is watched through a pidfd:
exactly one watcher task waits on it, reads the CPU times and the run delay of the zombie
(which still holds them, `launcher.cpugauge`), then reaps it and sets ``exited``; a child forked
by the fork server (`launcher.forkserver.client`) is reaped by the zygote, which reports the
same status, times and run delay.
With a lifeline (`nicd.shell.lifeline`) the child also gets its read end and learns the launcher's
pid (``EMU_JOB_OWNER``): it stops itself when the launcher dies, and a later sweep can tell
which launcher it belonged to."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import psutil  # type: ignore[import-untyped,unused-ignore]
import trio

from launcher.cleanup import ENV_JOB_OWNER
from launcher.cpugauge import read_run_delay
from launcher.report import ProcessUsage

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from launcher.forkserver.client import ForkServer
    from nicd.shell.lifeline import Lifeline

__all__ = [
    "Child",
    "DirectProcess",
    "LineReader",
    "Spawned",
    "describe_exit",
    "exit_code_of",
    "spawn",
    "tag_lines",
    "write_all",
]

_CHUNK = 65536
_LINE_LIMIT = 65536  # a longer line is forwarded in pieces


class Spawned(Protocol):
    """A started process as `Child` sees it: direct (`DirectProcess`) or forked by the
    fork server (`launcher.forkserver.client.ForkedProcess`)."""

    @property
    def pid(self) -> int:
        """Its process id."""
        ...

    @property
    def returncode(self) -> int | None:
        """Negative for a signal; None while running."""
        ...

    @property
    def stdout(self) -> trio.abc.ReceiveStream | None:
        """Its piped stdout."""
        ...

    @property
    def stderr(self) -> trio.abc.ReceiveStream | None:
        """Its piped stderr (None when not piped)."""
        ...

    async def wait_exit(self) -> tuple[int, float, float, float | None]:
        """Wait for the exit and reap: (returncode, user s, system s, run delay s or None)."""
        ...

    def kill(self) -> None:
        """SIGKILL it."""
        ...


class DirectProcess:
    """A child of this process, watched through its pidfd: exactly one task waits on it,
    reads the CPU times of the zombie (which still holds them), then reaps it."""

    def __init__(self, process: trio.Process, pidfd: int) -> None:
        self.process = process
        self.pid = process.pid
        self.stdout = process.stdout
        self.stderr = process.stderr
        self._pidfd = pidfd

    @property
    def returncode(self) -> int | None:
        """As subprocess reports it: negative for a signal; None while running."""
        return self.process.returncode

    async def wait_exit(self) -> tuple[int, float, float, float | None]:
        """Wait for the exit, measure, reap."""
        await trio.lowlevel.wait_readable(self._pidfd)
        delay = read_run_delay(self.pid)  # the zombie still has it
        user = system = 0.0
        with contextlib.suppress(psutil.Error, OSError):
            times = psutil.Process(self.pid).cpu_times()  # the zombie still has them
            user = times.user + times.children_user
            system = times.system + times.children_system
        code = await self.process.wait()
        os.close(self._pidfd)
        return code, user, system, delay

    def kill(self) -> None:
        """SIGKILL it."""
        self.process.kill()


@dataclass(eq=False, slots=True)
class Child:
    """A started nicd or host process."""

    role: str
    """``nicd`` or ``host``."""
    node: int
    """Its node id (the host's rank)."""
    process: Spawned
    started: float = field(default_factory=time.monotonic)
    exited: trio.Event = field(default_factory=trio.Event)
    """Set when the process is reaped; ``returncode`` and ``usage`` are final then."""
    stopping: bool = False
    """The supervisor asked it to stop: its exit is not a failure."""
    usage: ProcessUsage | None = None

    @property
    def pid(self) -> int:
        """Its process id (also its process group id)."""
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """As subprocess reports it: negative for a signal; None while running."""
        return self.process.returncode

    @property
    def name(self) -> str:
        """How messages name it: ``rank 3`` or ``nicd of node 3``."""
        return f"rank {self.node}" if self.role == "host" else f"nicd of node {self.node}"

    async def wait(self) -> None:
        """Wait for the exit, measure, reap. Only one task may call this, once."""
        code, user, system, delay = await self.process.wait_exit()
        ended = time.monotonic()
        self.usage = ProcessUsage(
            self.role, self.node, self.pid, user, system, ended - self.started, code, delay
        )
        self.exited.set()

    def signal(self, signum: int, *, group: bool) -> None:
        """Send ``signum`` to the process (or its whole process group) if it still runs."""
        if self.exited.is_set() and not group:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if group:
                os.killpg(self.pid, signum)
            else:
                os.kill(self.pid, signum)


async def spawn(
    role: str,
    node: int,
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    pipe_stderr: bool = True,
    lifeline: Lifeline | None = None,
    forkserver: ForkServer | None = None,
    cpus: frozenset[int] | None = None,
) -> Child:
    """Start one process (stdout and stderr piped, stdin from /dev/null, its own group), with
    ``lifeline``'s read end and the launcher's pid when given, bound to ``cpus`` from its
    first instruction when given; forked by ``forkserver`` when it can run ``argv`` exactly
    as a fresh interpreter would, else started directly.

    The one place a node's process (nicd or host) is started, for every job, local or on an
    agent (`launcher.agent.nodes.LocalNodes`)."""
    child_env = dict(env)
    pass_fds: tuple[int, ...] = ()
    if lifeline is not None:
        child_env.update(lifeline.environ())
        child_env[ENV_JOB_OWNER] = str(os.getpid())
        pass_fds = (lifeline.read_fd,)
    if forkserver is not None and forkserver.can_run(argv, child_env):
        forked = await forkserver.spawn(
            argv, child_env, pipe_stderr=pipe_stderr, pass_fds=pass_fds, cpus=cpus or ()
        )
        return Child(role, node, forked)
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if pipe_stderr else None,
        env=child_env,
        process_group=0,
        pass_fds=pass_fds,
        preexec_fn=None if cpus is None else functools.partial(_bind_self, cpus),
    )
    try:
        pidfd = os.pidfd_open(process.pid)
    except OSError:
        process.kill()
        await process.wait()
        raise
    return Child(role, node, DirectProcess(process, pidfd))


def _bind_self(cpus: frozenset[int]) -> None:
    """Run between fork and exec (a system call, no lock taken): the program starts bound.
    A failure stays silent here; the launcher binds again and reports it."""
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, cpus)


class LineReader:
    """Whole lines from a byte stream, as many as have arrived, for forwarding."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buf = bytearray()
        self._eof = False

    async def read_lines(self) -> bytes | None:
        """One or more complete lines; at EOF (or past the line limit) whatever is left
        without its newline; None once everything has been read."""
        while True:
            end = self._buf.rfind(b"\n")
            if end >= 0:
                block = bytes(self._buf[: end + 1])
                del self._buf[: end + 1]
                return block
            if self._eof or len(self._buf) >= _LINE_LIMIT:
                if not self._buf:
                    return None
                block = bytes(self._buf)
                self._buf.clear()
                return block
            try:
                chunk = await self._stream.receive_some(_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if chunk:
                self._buf += chunk
            else:
                self._eof = True


def tag_lines(block: bytes, prefix: bytes, keep: bytes = b"") -> bytes:
    """Put ``prefix`` before every line of ``block`` except those already starting with
    ``keep`` (if given); a last line without newline gets one."""
    lines = block.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return b"".join(
        (line if keep and line.startswith(keep) else prefix + line) + b"\n" for line in lines
    )


def write_all(fd: int, data: bytes) -> None:
    """Write everything (blocking); a closed reader (EPIPE) discards the output."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BrokenPipeError:
            return
        except InterruptedError:
            continue
        view = view[n:]


def exit_code_of(returncode: int) -> int:
    """emurun's status for a rank's returncode: itself, or 128 + N when killed by signal N."""
    return returncode if returncode >= 0 else 128 - returncode


def describe_exit(returncode: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL``."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        return f"was killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"was killed by signal {-returncode}"


KILL_WAIT_S = 10.0
"""How long to wait for a SIGKILLed child to be reaped before calling it unkillable."""


async def stop_children(children: list[Child], *, group: bool, grace_s: float) -> list[Child]:
    """SIGTERM every live child (its process group if ``group``), SIGKILL what is left after
    ``grace_s``, and return the children still alive ``KILL_WAIT_S`` after that."""
    live = [c for c in children if not c.exited.is_set()]
    for child in live:
        child.stopping = True
        child.signal(signal.SIGTERM, group=group)
    for signum, wait_s in ((signal.SIGKILL, grace_s), (None, KILL_WAIT_S)):
        with trio.move_on_after(wait_s):
            for child in live:
                await child.exited.wait()
        live = [c for c in live if not c.exited.is_set()]
        if not live:
            return []
        for child in live:
            if signum is not None:
                child.signal(signum, group=group)
    return live


def job_signals() -> list[int]:
    """The signals a launcher stops its job on: SIGTERM, and SIGINT and SIGHUP unless they
    were ignored when it started (nohup, '&' in a script): those stay ignored."""
    caught: list[int] = [signal.SIGTERM]
    caught += [s for s in (signal.SIGINT, signal.SIGHUP) if signal.getsignal(s) != signal.SIG_IGN]
    return caught
