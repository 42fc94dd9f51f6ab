"""The fork server (zygote): one process per machine that has imported nicd and the host
library once, and forks every nicd and host process of the job on request.

Protocol (Unix SOCK_SEQPACKET, one message per record, msgpack lists):
* zygote -> launcher, once on the control socket: ``Hello`` (its pid, interpreter, the
  start-up-sensitive environment it was started with, the top-level packages it imported).
* launcher -> zygote on the control socket: ``Request`` (argv, env, cwd, target fd numbers)
  with SCM_RIGHTS fds: first the request's *status socket*, then one fd per target
  (``0, 1, 2`` and inherited ones such as the lifeline).
* zygote -> launcher on that status socket: ``Started(pid)`` or ``Refused(reason)``, then
  ``Exited(returncode, user_s, system_s)`` once it has reaped the child (``wait4`` rusage:
  the child and its reaped descendants, as psutil read them from a zombie before).

The zygote is single-threaded: a poll loop over the control socket and a SIGCHLD wakeup
pipe. It exits when the control socket is closed (the launcher finished or died) and its last
child has been reaped; a forked child gets ``PR_SET_PDEATHSIG`` SIGKILL, so if the zygote
itself dies its children die too (the lifeline covers the launcher's death).

Python start-up state a fork shares: the hash seed (``PYTHONHASHSEED`` / the random secret) is
the zygote's, the same for every process of the job; ``random``'s global generator is
re-seeded in every child by CPython's own fork hook. `python_launch` and `env_blockers` say
which requests a fork can serve exactly like a fresh interpreter; the launcher spawns the rest
directly.
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
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgpack

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from launcher.forkchild import ChildJob

__all__ = [
    "MAX_FDS",
    "MAX_RECORD",
    "PRELOAD_ALL",
    "PRELOAD_TOP",
    "BadRecord",
    "Exited",
    "Hello",
    "PyLaunch",
    "Refused",
    "Request",
    "Started",
    "decode_hello_untrusted",
    "decode_report_untrusted",
    "decode_request_untrusted",
    "encode_hello",
    "encode_report",
    "encode_request",
    "env_blockers",
    "main",
    "python_launch",
    "same_interpreter",
]

MAX_FDS = 16  # fds one request may carry (status socket + targets)
MAX_RECORD = 1 << 20  # bytes of one record (argv + env)
MAX_TARGET_FD = 1 << 16
PRELOAD_ALL = ("nicd.__main__",)
"""Stage 1, before Hello: modules all of whose imports (function bodies too) the zygote runs;
``-m nicd`` then executes only ``nicd/__main__.py`` itself."""
PRELOAD_TOP = ("emucluster.MPI",)
"""Stage 2, once no request came for ``IDLE_S`` (the launcher waits for its nicds and routes)
or before the first request that is not ``-m nicd``: modules whose top-level imports the
zygote runs (not the modules: importing ``emucluster.MPI`` initialises MPI)."""
IDLE_S = 0.05
_ALWAYS_FREE = frozenset({"PYTHONPATH", "PYTHONUNBUFFERED"})  # a fork applies these itself
_SENSITIVE_PREFIXES = ("PYTHON", "LC_")
_SENSITIVE_NAMES = frozenset({"LANG"})
_HELLO, _REQUEST, _STARTED, _REFUSED, _EXITED = "hello", "req", "started", "refused", "exited"


class BadRecord(Exception):
    """A record that does not decode; raised only by the ``*_untrusted`` decoders. The
    zygote counts and drops it (refusing the request when it can still answer)."""


@dataclass(frozen=True, slots=True)
class Hello:
    """What the zygote says once it has imported everything."""

    pid: int
    executable: str
    """``sys.executable``: argv[0] of a request it can run in-process."""
    env: dict[str, str]
    """Its start-up-sensitive variables (``PYTHON*``, ``LC_*``, ``LANG``)."""
    path: list[str]
    """Its ``sys.path`` without entry 0 and without its own PYTHONPATH entries."""
    tops: list[str]
    """Top-level packages it imported (a child's PYTHONPATH must not shadow them)."""
    pythonpath: list[str]
    """Its own PYTHONPATH entries (where it imported them from)."""


@dataclass(frozen=True, slots=True)
class Request:
    """Fork a child running ``argv`` (a Python command line, see `python_launch`)."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    targets: list[int]
    """The fd number in the child of each fd carried after the status socket."""


@dataclass(frozen=True, slots=True)
class Started:
    """The child runs, with this pid (and process group)."""

    pid: int


@dataclass(frozen=True, slots=True)
class Refused:
    """The zygote could not fork it (the launcher reports it like a failed spawn)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Exited:
    """The child was reaped."""

    returncode: int
    """As subprocess reports it: negative for a signal."""
    user_s: float
    system_s: float


Report = Started | Refused | Exited


@dataclass(frozen=True, slots=True)
class PyLaunch:
    """A Python command line, parsed as the interpreter would."""

    mode: str
    """``file``, ``module`` or ``command``."""
    target: str
    """The script path, module name or command text."""
    args: list[str]
    """``sys.argv[1:]``."""
    unbuffered: bool
    """``-u`` was given."""


# -- codec ----------------------------------------------------------------------------------


def _pack(*fields: object) -> bytes:
    return msgpack.packb(list(fields), use_bin_type=True)  # type: ignore[no-any-return]


def _unpack(data: bytes, tag: str, count: int) -> list[object]:
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise BadRecord(f"not msgpack: {exc}") from None
    if not isinstance(obj, list) or len(obj) != count or obj[0] != tag:
        raise BadRecord(f"not a {tag} record")
    return obj[1:]


def _str_list(value: object, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRecord(f"{what} is not a list of strings")
    return list(value)


def _str_map(value: object, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise BadRecord(f"{what} is not a map of strings")
    return dict(value)


def encode_hello(hello: Hello) -> bytes:
    """The zygote's greeting."""
    return _pack(
        _HELLO, hello.pid, hello.executable, hello.env, hello.path, hello.tops, hello.pythonpath
    )


def decode_hello_untrusted(data: bytes) -> Hello:
    """A greeting, or BadRecord."""
    pid, exe, env, path, tops, pythonpath = _unpack(data, _HELLO, 7)
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or not isinstance(exe, str):
        raise BadRecord("bad pid or executable")
    return Hello(
        pid,
        exe,
        _str_map(env, "env"),
        _str_list(path, "path"),
        _str_list(tops, "tops"),
        _str_list(pythonpath, "pythonpath"),
    )


def encode_request(req: Request) -> bytes:
    """A request record (its fds travel beside it)."""
    return _pack(_REQUEST, req.argv, req.env, req.cwd, req.targets)


def decode_request_untrusted(data: bytes, nfds: int) -> Request:
    """A request that arrived with ``nfds`` fds (status socket included), or BadRecord."""
    argv, env, cwd, targets = _unpack(data, _REQUEST, 5)
    argv = _str_list(argv, "argv")
    if not argv:
        raise BadRecord("empty argv")
    if not isinstance(cwd, str) or not cwd:
        raise BadRecord("bad cwd")
    if not isinstance(targets, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and 0 <= t < MAX_TARGET_FD for t in targets
    ):
        raise BadRecord("bad target fds")
    if len(set(targets)) != len(targets):
        raise BadRecord("duplicate target fds")
    if len(targets) + 1 != nfds:
        raise BadRecord(f"{len(targets)} targets but {nfds} fds")
    return Request(argv, _str_map(env, "env"), cwd, list(targets))


def encode_report(report: Report) -> bytes:
    """A status-socket record."""
    if isinstance(report, Started):
        return _pack(_STARTED, report.pid)
    if isinstance(report, Refused):
        return _pack(_REFUSED, report.reason)
    return _pack(_EXITED, report.returncode, report.user_s, report.system_s)


def decode_report_untrusted(data: bytes) -> Report:
    """A status-socket record, or BadRecord."""
    try:
        tag = msgpack.unpackb(data, raw=False)[0]
    except Exception:
        raise BadRecord("not a report") from None
    if tag == _STARTED:
        (pid,) = _unpack(data, _STARTED, 2)
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            raise BadRecord("bad pid")
        return Started(pid)
    if tag == _REFUSED:
        (reason,) = _unpack(data, _REFUSED, 2)
        if not isinstance(reason, str):
            raise BadRecord("bad reason")
        return Refused(reason)
    if tag == _EXITED:
        code, user, system = _unpack(data, _EXITED, 4)
        if not isinstance(code, int) or isinstance(code, bool) or not -256 < code < 256:
            raise BadRecord("bad returncode")
        if not all(isinstance(t, float | int) and t >= 0 for t in (user, system)):
            raise BadRecord("bad times")
        return Exited(code, float(user), float(system))  # type: ignore[arg-type]
    raise BadRecord(f"unknown report {tag!r:.40}")


# -- what a fork can run --------------------------------------------------------------------


def python_launch(argv: Sequence[str], executable: str) -> PyLaunch | None:
    """``argv`` as the interpreter ``executable`` would read it, if a fork of it can run it
    alike: ``PYTHON [-u] (SCRIPT | -m MODULE | -c COMMAND) [ARGS]``; None otherwise (other
    programs, other interpreters, other interpreter options, a script on stdin)."""
    if not argv or argv[0] != executable:
        return None
    i, unbuffered = 1, False
    while i < len(argv) and argv[i] == "-u":
        unbuffered, i = True, i + 1
    if i >= len(argv):
        return None
    word = argv[i]
    if word in ("-m", "-c"):
        if i + 1 >= len(argv) or not argv[i + 1]:
            return None
        mode = "module" if word == "-m" else "command"
        return PyLaunch(mode, argv[i + 1], list(argv[i + 2 :]), unbuffered)
    if word.startswith("-") or not word:
        return None
    return PyLaunch("file", word, list(argv[i + 1 :]), unbuffered)


def same_interpreter(path: str, executable: str) -> bool:
    """Whether ``path`` starts the interpreter ``executable`` is, with the same prefix: the
    same file in the same directory (``venv/bin/python`` and ``venv/bin/python3``; not the
    base interpreter a venv links to, whose site-packages differ)."""
    if path == executable:
        return True
    if not os.path.isabs(path) or os.path.dirname(path) != os.path.dirname(executable):
        return False
    try:
        return os.path.samefile(path, executable)
    except OSError:
        return False


def sensitive_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that shape an interpreter's start-up (a fork inherits them)."""
    return {
        k: v
        for k, v in env.items()
        if (k.startswith(_SENSITIVE_PREFIXES) or k in _SENSITIVE_NAMES) and k not in _ALWAYS_FREE
    }


def env_blockers(child_env: Mapping[str, str], zygote_env: Mapping[str, str]) -> list[str]:
    """The start-up-sensitive variables whose value differs between a request and the zygote
    (any one means: spawn directly)."""
    mine = sensitive_env(child_env)
    return sorted(k for k in mine.keys() | zygote_env.keys() if mine.get(k) != zygote_env.get(k))


# -- the zygote -----------------------------------------------------------------------------


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
        from launcher.forkchild import ChildJob

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

    def _reap(self) -> None:
        while True:
            try:
                pid, wstatus, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            status = self.children.pop(pid, None)
            if status is not None:
                code = os.waitstatus_to_exitcode(wstatus)
                _send(status, Exited(code, usage.ru_utime, usage.ru_stime))
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
    """The zygote's entry: ``python -c 'from launcher.forkserver import main; main()' FD``
    where FD is its end of the control socket (inherited)."""
    from launcher import forkchild

    ctl = socket.socket(fileno=int(sys.argv[1]))
    zygote_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base_path = [p for p in sys.path[1:] if p not in zygote_paths]
    forkchild.record_startup(base_path)
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
        forkchild.run(job)
