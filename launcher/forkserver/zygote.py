"""The fork server (zygote): one process per machine that has imported nicd and the host
library once, and forks every nicd and host process of the job on request.

The records it exchanges with the launcher are `launcher.forkserver.records`; what a fork can
run, `launcher.forkserver.launch`; what a forked child does to become its program,
`launcher.forkserver.child`.

The zygote is single-threaded: a poll loop over the control socket and a SIGCHLD wakeup
pipe. When the control socket closes (the launcher finished, having stopped every child, or
died: only the launcher holds the other end, so ``kill -9`` of it closes it too) it SIGKILLs
the process group of every child still running, then exits once its last child has been
reaped; a forked child gets ``PR_SET_PDEATHSIG`` SIGKILL, so if the zygote itself dies its
children die too. What a host started outside its process group is the warden's
(`launcher.warden`).
"""

from __future__ import annotations

import array
import ast
import contextlib
import gc
import importlib
import importlib.util
import os
import select
import signal
import socket
import sys
from typing import TYPE_CHECKING

from launcher.cpugauge import read_run_delay
from launcher.forkserver.child import ChildJob, record_startup
from launcher.forkserver.child import run as run_child
from launcher.forkserver.launch import python_launch, sensitive_env
from launcher.forkserver.records import (
    MAX_FDS,
    MAX_RECORD,
    BadRecord,
    Exited,
    Hello,
    Refused,
    Report,
    Request,
    Started,
    decode_request_untrusted,
    encode_hello,
    encode_report,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["IDLE_S", "PRELOAD_ALL", "PRELOAD_TOP", "Zygote", "main", "preload"]

PRELOAD_ALL = ("nicd.__main__",)
"""Stage 1, before Hello: modules all of whose imports (function bodies too) the zygote runs;
``-m nicd`` then executes only ``nicd/__main__.py`` itself."""
PRELOAD_TOP = ("emucluster.MPI",)
"""Stage 2, once no request came for ``IDLE_S`` (the launcher waits for its nicds and routes)
or before the first request that is not ``-m nicd``: modules whose top-level imports the
zygote runs (not the modules: importing ``emucluster.MPI`` initialises MPI)."""
IDLE_S = 0.05


def _module_imports(name: str, *, nested: bool) -> list[str]:
    """Absolute module names imported by module ``name`` (top level only unless ``nested``;
    never under ``if TYPE_CHECKING``), read from its source without executing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return []
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), spec.origin)
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.dump(child.test):
                continue
            if isinstance(child, ast.Import):
                found.extend(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append(child.module)
                found.extend(f"{child.module}.{alias.name}" for alias in child.names)
            elif nested or isinstance(child, ast.If | ast.Try):
                visit(child)

    visit(tree)
    return list(dict.fromkeys(found))


def preload(*, nested: tuple[str, ...] = (), top: tuple[str, ...] = ()) -> list[str]:
    """Import what the modules ``nested`` and ``top`` import (`_module_imports`), not those
    modules; return what failed."""
    failed = []
    names = [m for n in top for m in _module_imports(n, nested=False)]
    names += [m for n in nested for m in _module_imports(n, nested=True)]
    for name in dict.fromkeys(names):
        if name in top or name in sys.modules:
            continue
        parent = sys.modules.get(name.rpartition(".")[0])
        if parent is not None and not hasattr(parent, "__path__"):
            continue  # "from module import function": not a module
        try:
            if importlib.util.find_spec(name) is not None:
                importlib.import_module(name)
        except Exception:  # "from pkg import function" also lands here: not a module
            failed.append(name)
    return failed


class Zygote:
    """The poll loop: fork on request, reap on SIGCHLD, report on each status socket."""

    def __init__(self, ctl: socket.socket, later: Callable[[], object] | None = None) -> None:
        self.ctl = ctl
        self.later = later
        """Preloading still to do (stage 2): when idle, or before forking a host."""
        self.children: dict[int, socket.socket] = {}
        """pid -> its status socket."""
        self.dropped = 0
        """Requests that did not decode."""
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def serve(self) -> ChildJob | None:
        """Run until the control socket closes and every child is reaped (return None), or
        return the job in a freshly forked child."""
        signal.signal(signal.SIGCHLD, _on_sigchld)
        signal.set_wakeup_fd(self._wake_w)
        poller = select.poll()
        poller.register(self.ctl, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        accepting = True
        while accepting or self.children:
            events = poller.poll(None if self.later is None else IDLE_S * 1000)
            if not events:
                self._run_later()
            for fd, _ in events:
                if fd == self._wake_r:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(self._wake_r, 512):
                            pass
                elif accepting:
                    job = self._on_request()
                    if job is not None:
                        return job
                    if self.ctl.fileno() < 0:
                        accepting = False
                        poller.unregister(fd)
                        self._kill_children()
            self._reap()
        return None

    def _on_request(self) -> ChildJob | None:
        fds: list[int] = []
        try:
            data, anc, flags, _ = self.ctl.recvmsg(MAX_RECORD, socket.CMSG_SPACE(MAX_FDS * 4))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            data, anc, flags = b"", [], 0
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                arr = array.array("i")
                arr.frombytes(payload[: len(payload) - len(payload) % arr.itemsize])
                fds.extend(arr)
        if not data and not fds:  # EOF: the launcher is done (or dead)
            self.ctl.close()
            return None
        status = socket.socket(fileno=fds[0]) if fds else None
        try:
            if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
                raise BadRecord("truncated request")
            req = decode_request_untrusted(data, len(fds))
        except BadRecord as exc:
            self.dropped += 1
            _close_fds(fds[1:])
            if status is not None:
                _send(status, Refused(f"bad request: {exc}"))
                status.close()
            return None
        assert status is not None
        launch = python_launch(req.argv, sys.executable)
        if launch is None or (launch.mode, launch.target) != ("module", "nicd"):
            self._run_later()
        return self._fork(req, status, fds[1:])

    def _run_later(self) -> None:
        if self.later is not None:
            later, self.later = self.later, None
            later()
            gc.freeze()

    def _fork(self, req: Request, status: socket.socket, fds: list[int]) -> ChildJob | None:
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            _close_fds(fds)
            _send(status, Refused(f"fork failed: {exc}"))
            status.close()
            return None
        if pid == 0:  # the child: drop every zygote resource, become the program
            signal.set_wakeup_fd(-1)
            for sock in (self.ctl, status, *self.children.values()):
                sock.close()
            os.close(self._wake_r)
            os.close(self._wake_w)
            return ChildJob(req, fds, parent)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also done by the child: whoever runs first
        _close_fds(fds)
        self.children[pid] = status
        _send(status, Started(pid))
        return None

    def _kill_children(self) -> None:
        """SIGKILL the process group of every child still running: the launcher closed the
        control socket after stopping them all, or died (``kill -9``) without stopping any."""
        for pid in self.children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)  # it may have left its group (setsid)

    def _reap(self) -> None:
        """Reap every exited child; each one's run delay is read from it as a zombie first
        (``waitid`` with ``WNOWAIT`` leaves it unreaped)."""
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            delay = read_run_delay(info.si_pid)
            pid, wstatus, usage = os.wait4(info.si_pid, 0)  # exited: returns at once
            status = self.children.pop(pid, None)
            if status is not None:
                code = os.waitstatus_to_exitcode(wstatus)
                _send(status, Exited(code, usage.ru_utime, usage.ru_stime, delay))
                status.close()


def _on_sigchld(signum: int, frame: object) -> None:
    """Nothing: the wakeup fd wakes the poll loop, which reaps."""


def _send(sock: socket.socket, report: Report) -> None:
    with contextlib.suppress(OSError):
        sock.send(encode_report(report))


def _close_fds(fds: Sequence[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _say_missed(names: list[str]) -> None:
    if names and os.environ.get("EMU_FORKSERVER_DEBUG"):
        print(f"forkserver: not preloaded: {', '.join(names)}", file=sys.stderr)


def main() -> None:
    """The zygote's entry: ``python -c CODE FD`` (`client._ZYGOTE_CODE`: drop the working
    directory ``-c`` put first on ``sys.path``, import this module, call this) where FD is its
    end of the control socket (inherited). What the zygote imports, itself included, comes from
    where every child finds it (``PYTHONPATH`` and the interpreter's own path), never from one
    child's first entry (`client.ForkServer.can_run` refuses a child whose first entry would
    shadow a module imported here)."""

    ctl = socket.socket(fileno=int(sys.argv[1]))
    zygote_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base_path = [p for p in sys.path if p not in zygote_paths]
    record_startup(base_path)
    _say_missed(preload(nested=PRELOAD_ALL))
    gc.freeze()  # the collector never scans (so never writes to) what every fork shares
    later = {m.partition(".")[0] for n in PRELOAD_TOP for m in _module_imports(n, nested=False)}
    tops = sorted({name.partition(".")[0] for name in sys.modules} | later)
    env = sensitive_env(os.environ)
    hello = Hello(os.getpid(), sys.executable, env, base_path, tops, zygote_paths)
    ctl.send(encode_hello(hello))

    def stage2() -> None:
        _say_missed(preload(top=PRELOAD_TOP))

    job = Zygote(ctl, stage2).serve()
    if job is not None:
        run_child(job)
