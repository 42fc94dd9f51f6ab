"""A forked child of the fork server becoming the program it was asked to run.

In order: its own process group; death with the zygote (``PR_SET_PDEATHSIG``); the requested
CPUs (so not one instruction of the program runs elsewhere); the signal
dispositions and mask a fresh interpreter has; the requested fds at their numbers and nothing
else open; the requested environment and working directory; fresh ``sys.std*``, ``sys.argv``,
``sys.path`` and ``__main__``; then the script, ``-m`` module or ``-c`` command runs as
``__main__``. It ends the way ``python`` would (the status of ``SystemExit``, an uncaught
exception printed by ``sys.excepthook`` then status 1, an uncaught KeyboardInterrupt as death by
SIGINT; non-daemon threads joined, atexit handlers run, the program's objects finalized, stdio
flushed) except that the zygote's modules are not torn down: `_finish` ends with ``os._exit``.
Tracebacks start at the user's code.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import ctypes
import fcntl
import gc
import io
import os
import runpy
import signal
import sys
import types
from dataclasses import dataclass
from importlib.machinery import BuiltinImporter, SourceFileLoader
from typing import TYPE_CHECKING, NoReturn

from launcher.forkserver.launch import PyLaunch, first_path_entry, python_launch

if TYPE_CHECKING:
    from launcher.forkserver.records import Request

__all__ = ["ChildJob", "record_startup", "run"]

_PR_SET_PDEATHSIG = 1
_FD_SCAN_LIMIT = 65536
_STAT_ARG_START = 47 - 2  # /proc/self/stat field 48 (arg_start), counted after "pid (comm)"
_startup_handlers: dict[int, signal._HANDLER] = {}
_base_path: list[str] = []


@dataclass(slots=True)
class ChildJob:
    """What a freshly forked child must become."""

    request: Request
    fds: list[int]
    """Received fds, one per ``request.targets`` entry."""
    zygote_pid: int


def record_startup(base_path: list[str]) -> None:
    """Remember the interpreter's start-up signal handlers and base ``sys.path`` (the zygote
    calls this before it changes either)."""
    for sig in signal.valid_signals():
        with contextlib.suppress(ValueError, OSError):
            _startup_handlers[sig] = signal.getsignal(sig)
    _base_path[:] = base_path


def run(job: ChildJob) -> NoReturn:
    """Become the requested program, run it, exit with its status."""
    req = job.request
    launch = python_launch([sys.executable, *req.argv[1:]], sys.executable)
    if launch is None:  # the launcher checks first; this is a bug, not a user error
        _die(f"forkserver: cannot run {req.argv[:3]!r} in-process", 126)
    os.setpgid(0, 0)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != job.zygote_pid:  # the zygote died before the prctl
        os._exit(128 + signal.SIGKILL)
    if req.cpus:  # a failure stays silent here: the launcher binds again and reports it
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, req.cpus)
    _reset_signals()
    _show_cmdline(req.argv)
    _place_fds(job.fds, req.targets)
    try:
        os.chdir(req.cwd)
    except OSError as exc:
        _die(f"forkserver: cannot enter {req.cwd}: {exc}", 126)
    os.environ.clear()
    os.environ.update(req.env)
    unbuffered = launch.unbuffered or bool(req.env.get("PYTHONUNBUFFERED"))
    _fresh_stdio(unbuffered)
    inherited = set(sys.modules)
    try:
        _run_main(launch, req)
        code = 0
    except SystemExit as exc:
        code = _exit_status(exc)
    _finish(code, inherited)


def _exit_status(exc: SystemExit) -> int:
    """The status ``python`` exits with for an uncaught SystemExit (printing a message)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    with contextlib.suppress(Exception):
        print(exc.code, file=sys.stderr)
    return 1


def _finish(code: int, inherited: set[str]) -> NoReturn:
    """End as ``python`` would, minus tearing down the zygote's modules: that writes to every
    page the fork shares (reference counts) and costs ~0.1-1 s per process. Non-daemon threads
    are joined, atexit handlers run, the program's own modules are dropped and collected (their
    objects' finalizers run: unclosed files are flushed), stdio flushed."""
    if "threading" in sys.modules:
        with contextlib.suppress(Exception):
            sys.modules["threading"]._shutdown()
    atexit._run_exitfuncs()
    for name in [n for n in sys.modules if n not in inherited or n == "__main__"]:
        del sys.modules[name]  # unreachable now: the collector finalizes all their objects
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _die(message: str, code: int) -> NoReturn:
    with contextlib.suppress(OSError):
        os.write(2, (message + "\n").encode())
    os._exit(code)


def _reset_signals() -> None:
    for sig, handler in _startup_handlers.items():
        if handler is None:
            continue
        with contextlib.suppress(ValueError, OSError, TypeError):
            if signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _show_cmdline(argv: list[str]) -> None:
    """Make ``/proc/self/cmdline`` (ps, psutil, the cleanup tests) show ``argv``: write it
    over the zygote's own argument area (padded for this at its start), truncated to fit."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        start, end = int(fields[_STAT_ARG_START]), int(fields[_STAT_ARG_START + 1])
        data = b"\0".join(os.fsencode(a) for a in argv)[: end - start - 1]
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            mem.write(data.ljust(end - start, b"\0"))


def _place_fds(fds: list[int], targets: list[int]) -> None:
    """Received fd i becomes fd ``targets[i]`` (inheritable); every other fd is closed."""
    floor = max([*fds, *targets, 2]) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor) for fd in fds]
    for fd in fds:
        os.close(fd)
    for src, dst in zip(moved, targets, strict=True):
        os.dup2(src, dst, inheritable=True)
        os.close(src)
    keep = sorted(set(targets))
    start = 0
    for fd in keep:
        if fd > start:  # closerange(n, n) closes everything on 3.11 (close_range(n, n - 1))
            os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, _FD_SCAN_LIMIT)


def _fresh_stdio(unbuffered: bool) -> None:
    """New ``sys.stdin/stdout/stderr`` over fds 0-2, built as the interpreter builds them."""
    encoding, errors = sys.stdout.encoding, sys.stdout.errors or "strict"

    def stream(fd: int, write: bool, err: str) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "w" if write else "r", closefd=False)
        buf = io.BufferedWriter(raw) if write else io.BufferedReader(raw)
        tty = raw.isatty()
        line = not unbuffered and (tty or fd == 2)
        return io.TextIOWrapper(
            buf,
            encoding=encoding,
            errors=err,
            line_buffering=line,
            write_through=unbuffered and write,
        )

    for name, fd, write, err in (
        ("stdin", 0, False, errors),
        ("stdout", 1, True, errors),
        ("stderr", 2, True, "backslashreplace"),
    ):
        new = stream(fd, write, err)
        setattr(sys, name, new)
        setattr(sys, f"__{name}__", new)


def _run_main(launch: PyLaunch, req: Request) -> None:
    sys.orig_argv[:] = req.argv
    sys.executable = req.argv[0]  # the launcher checked it is the same interpreter
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    code = _prepare(launch, req, main)
    sys.modules["__main__"] = main
    try:
        if code is None:
            runpy._run_module_as_main(launch.target, alter_argv=True)  # type: ignore[attr-defined]
        else:
            exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:
        tb = _user_frames(exc.__traceback__)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        if isinstance(exc, KeyboardInterrupt):
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1) from None


def _prepare(launch: PyLaunch, req: Request, main: types.ModuleType) -> types.CodeType | None:
    """Set ``sys.argv``, ``sys.path`` and ``main`` as the interpreter would; return the code
    to run in ``main`` (None for ``-m``, which runpy runs)."""
    extra = [p for p in req.env.get("PYTHONPATH", "").split(os.pathsep) if p]
    # the cwd (``-m``; ``""`` for ``-c``, as Python writes it) or the script's directory, or
    # nothing under -P (``sys.flags`` stay the zygote's: only the path can differ)
    first = first_path_entry(launch, req.cwd, req.env)
    head = [] if first is None else ["" if launch.mode == "command" else first]
    sys.path[:] = [*head, *extra, *_base_path]
    if launch.mode == "module":
        sys.argv[:] = ["-m", *launch.args]
        return None
    if launch.mode == "command":
        sys.argv[:] = ["-c", *launch.args]
        main.__dict__["__loader__"] = BuiltinImporter
        return compile(launch.target, "<string>", "exec", dont_inherit=True)
    path = launch.target
    sys.argv[:] = [path, *launch.args]
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as exc:
        err = exc.strerror or str(exc)
        _die(f"{req.argv[0]}: can't open file {path!r}: [Errno {exc.errno}] {err}", 2)
    full = os.path.abspath(path)
    main.__dict__.update(__file__=full, __cached__=None)
    main.__dict__["__loader__"] = SourceFileLoader("__main__", full)
    return compile(source, full, "exec", dont_inherit=True)


def _user_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without its leading frames in this module and runpy."""
    ours = {__file__, runpy.__file__, "<frozen runpy>"}
    while tb is not None and tb.tb_frame.f_code.co_filename in ours:
        tb = tb.tb_next
    return tb
