"""The launcher's side of the fork server: start the zygote, ask it for processes, learn
their exits (`launcher.forkserver.records` has the protocol).

`ForkServer.spawn` returns a `ForkedProcess` with the surface `launcher.children.Child` uses
of a directly started one: pid, stdout/stderr streams, ``wait_exit``. If the zygote dies, its
children die with it (``PR_SET_PDEATHSIG``): their status sockets close without an exit
record, and they are reported killed by SIGKILL once their pid is gone.
"""

from __future__ import annotations

import array
import contextlib
import os
import signal
import socket
import subprocess
from typing import TYPE_CHECKING

import trio

from launcher.forkserver.launch import (
    env_blockers,
    first_path_entry,
    python_launch,
    same_interpreter,
)
from launcher.forkserver.records import (
    MAX_RECORD,
    BadRecord,
    Exited,
    Hello,
    Refused,
    Request,
    Started,
    decode_hello_untrusted,
    decode_report_untrusted,
    encode_request,
)

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

__all__ = ["ENV_FORKSERVER", "ForkServer", "ForkServerError", "ForkedProcess", "enabled"]

ENV_FORKSERVER = "EMU_FORKSERVER"
"""``0`` in emurun's environment: spawn every process directly (as ``--no-forkserver``)."""
START_TIMEOUT_S = 60.0  # the zygote imports nicd and the host library first
REPLY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
CMDLINE_ROOM = 4096  # bytes of argument area each child rewrites with its own argv (ps)
# ``-c`` puts the working directory first on sys.path (unless -P or PYTHONSAFEPATH): drop it
# before anything is imported, the zygote's own code included
_ZYGOTE_CODE = (
    "import sys; sys.flags.safe_path or sys.path.pop(0); "
    "from launcher.forkserver.zygote import main; main()"
)


class ForkServerError(Exception):
    """The zygote could not start or answered nonsense; the caller spawns directly."""


def enabled(env: Mapping[str, str]) -> bool:
    """Whether ``env`` (emurun's environment) leaves the fork server on."""
    return env.get(ENV_FORKSERVER, "1") != "0"


class ForkedProcess:
    """A process the zygote forked (a grandchild of the launcher)."""

    def __init__(
        self,
        pid: int,
        status: trio.socket.SocketType,
        stdout: trio.lowlevel.FdStream,
        stderr: trio.lowlevel.FdStream | None,
    ) -> None:
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._status = status

    async def wait_exit(self) -> tuple[int, float, float, float | None]:
        """Wait for the zygote's exit record: (returncode, user s, system s, run delay s or
        None)."""
        try:
            data = await self._status.recv(MAX_RECORD)
            report = decode_report_untrusted(data) if data else None
        except (OSError, BadRecord):
            report = None
        self._status.close()
        if isinstance(report, Exited):
            self.returncode = report.returncode
            return report.returncode, report.user_s, report.system_s, report.run_delay_s
        await _wait_gone(self.pid)  # the zygote died: PR_SET_PDEATHSIG killed it
        self.returncode = -signal.SIGKILL
        return self.returncode, 0.0, 0.0, None

    def kill(self) -> None:
        """SIGKILL it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)


class ForkServer:
    """A running zygote and the control socket to it."""

    def __init__(self, process: trio.Process, ctl: trio.socket.SocketType, hello: Hello) -> None:
        self.process = process
        self.hello = hello
        self._ctl = ctl
        self._lock = trio.Lock()

    @classmethod
    async def start(cls, python: str, env: Mapping[str, str]) -> ForkServer:
        """Start a zygote under ``python`` with environment ``env`` (what the sweep and
        ``/proc/<pid>/environ`` of every forked child show) and wait for its Hello."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = await trio.lowlevel.open_process(
                [python, "-c", _ZYGOTE_CODE, str(theirs.fileno()), " " * CMDLINE_ROOM],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=dict(env),
                process_group=0,
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        ctl = trio.socket.from_stdlib_socket(mine)
        data = b""
        try:
            with trio.fail_after(START_TIMEOUT_S):
                data = await ctl.recv(MAX_RECORD)
            hello = decode_hello_untrusted(data)
        except (OSError, BadRecord, trio.TooSlowError) as exc:
            ctl.close()
            process.kill()
            await process.wait()
            why = "it exited" if not data else (str(exc) or type(exc).__name__)
            raise ForkServerError(f"the fork server did not start: {why}") from None
        return cls(process, ctl, hello)

    def can_run(self, argv: Sequence[str], env: Mapping[str, str]) -> bool:
        """Whether a fork runs ``argv`` with ``env`` exactly as a fresh interpreter would."""
        if not argv or not same_interpreter(argv[0], self.hello.executable):
            return False
        launch = python_launch([self.hello.executable, *argv[1:]], self.hello.executable)
        if launch is None:
            return False
        if env_blockers(env, self.hello.env):
            return False
        tops = set(self.hello.tops)
        zygote_paths = {*self.hello.path, *self.hello.pythonpath}
        # what a fresh interpreter puts before the zygote's path: the child's first entry (its
        # working directory or its script's) and its PYTHONPATH; one that holds a module the
        # zygote already imported would shadow it
        first = first_path_entry(launch, os.getcwd(), env)
        entries = [first, *env.get("PYTHONPATH", "").split(os.pathsep)]
        return not any(
            entry and entry not in zygote_paths and _holds_any(entry, tops) for entry in entries
        )

    async def spawn(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        pipe_stderr: bool = True,
        pass_fds: Sequence[int] = (),
        cpus: Collection[int] = (),
    ) -> ForkedProcess:
        """Fork a child running ``argv`` (stdin /dev/null, stdout and stderr piped unless
        ``pipe_stderr`` is false, ``pass_fds`` at their own numbers, bound to ``cpus`` before
        it runs anything when given). Raises OSError."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe() if pipe_stderr else (-1, 2)
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        req = Request(list(argv), dict(env), os.getcwd(), [0, 1, 2, *pass_fds], sorted(cpus))
        fds = [theirs.fileno(), devnull, out_w, err_w, *pass_fds]
        status = trio.socket.from_stdlib_socket(mine)
        try:
            async with self._lock:
                await self._ctl.sendmsg(
                    [encode_request(req)],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))],
                )
        except OSError:
            status.close()
            _close(out_r, err_r)
            raise
        finally:
            theirs.close()
            _close(devnull, out_w, err_w if pipe_stderr else -1)
        try:
            with trio.fail_after(REPLY_TIMEOUT_S):
                data = await status.recv(MAX_RECORD)
            report = decode_report_untrusted(data)
        except (OSError, BadRecord, trio.TooSlowError) as exc:
            status.close()
            _close(out_r, err_r)
            raise OSError(f"the fork server did not answer: {exc}") from None
        if not isinstance(report, Started):
            status.close()
            _close(out_r, err_r)
            reason = report.reason if isinstance(report, Refused) else "exit before start"
            raise OSError(f"the fork server refused: {reason}")
        stdout = trio.lowlevel.FdStream(out_r)
        stderr = trio.lowlevel.FdStream(err_r) if pipe_stderr else None
        return ForkedProcess(report.pid, status, stdout, stderr)

    async def aclose(self) -> None:
        """Close the control socket; the zygote exits once its children are reaped (killed
        after ``STOP_TIMEOUT_S`` if not)."""
        self._ctl.close()
        with trio.move_on_after(STOP_TIMEOUT_S):
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


async def _wait_gone(pid: int) -> None:
    """Wait until ``pid`` no longer runs (a pidfd works for non-children too)."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        with trio.move_on_after(STOP_TIMEOUT_S):
            await trio.lowlevel.wait_readable(pidfd)
    finally:
        os.close(pidfd)


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def _holds_any(entry: str, names: set[str]) -> bool:
    """Whether directory ``entry`` of a search path holds a top-level module or package named in
    ``names`` (``x.py``, ``x/``, ``x.cpython-311-....so``); an unreadable one holds nothing."""
    try:
        found = os.listdir(entry)
    except OSError:
        return False
    return any(name.partition(".")[0] in names for name in found if name[:2] != "__")
