"""The fork server's wire records and their codec: what the launcher and the zygote say to
each other (Unix SOCK_SEQPACKET, one record per message, msgpack lists), and nothing else.

* zygote -> launcher, once on the control socket: ``Hello`` (its pid, interpreter, the
  start-up-sensitive environment it was started with, the top-level packages it imported).
* launcher -> zygote on the control socket: ``Request`` (argv, env, cwd, target fd numbers,
  the CPUs the child must run on) with SCM_RIGHTS fds: first the request's *status socket*,
  then one fd per target (``0, 1, 2`` and inherited ones such as the lifeline).
* zygote -> launcher on that status socket: ``Started(pid)`` or ``Refused(reason)``, then
  ``Exited(returncode, user_s, system_s, run_delay_s)`` once it has reaped the child (``wait4``
  rusage: the child and its reaped descendants, as psutil read them from a zombie before; the
  run delay read from the zombie before reaping, `launcher.cpugauge`, nil if unknown).

Invariants: pure (no I/O); each ``decode_*_untrusted`` raises only BadRecord.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack

__all__ = [
    "MAX_CPU",
    "MAX_FDS",
    "MAX_RECORD",
    "MAX_TARGET_FD",
    "BadRecord",
    "Exited",
    "Hello",
    "Refused",
    "Report",
    "Request",
    "Started",
    "decode_hello_untrusted",
    "decode_report_untrusted",
    "decode_request_untrusted",
    "encode_hello",
    "encode_report",
    "encode_request",
]

MAX_FDS = 16  # fds one request may carry (status socket + targets)
MAX_RECORD = 1 << 20  # bytes of one record (argv + env)
MAX_TARGET_FD = 1 << 16
MAX_CPU = 1 << 16  # a CPU number beyond any kernel's NR_CPUS
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
    cpus: list[int]
    """The CPUs the child binds itself to before it runs anything (empty: the zygote's)."""


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
    run_delay_s: float | None
    """Seconds it waited for a CPU (`launcher.cpugauge.read_run_delay`); None if unknown."""


Report = Started | Refused | Exited


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


def _seconds(value: object) -> bool:
    """A finite non-negative number of seconds."""
    return (
        isinstance(value, float | int) and not isinstance(value, bool) and 0 <= value < float("inf")
    )


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
    return _pack(_REQUEST, req.argv, req.env, req.cwd, req.targets, req.cpus)


def decode_request_untrusted(data: bytes, nfds: int) -> Request:
    """A request that arrived with ``nfds`` fds (status socket included), or BadRecord."""
    argv, env, cwd, targets, cpus = _unpack(data, _REQUEST, 6)
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
    if not isinstance(cpus, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) and 0 <= c < MAX_CPU for c in cpus
    ):
        raise BadRecord("bad cpus")
    return Request(argv, _str_map(env, "env"), cwd, list(targets), list(cpus))


def encode_report(report: Report) -> bytes:
    """A status-socket record."""
    if isinstance(report, Started):
        return _pack(_STARTED, report.pid)
    if isinstance(report, Refused):
        return _pack(_REFUSED, report.reason)
    return _pack(_EXITED, report.returncode, report.user_s, report.system_s, report.run_delay_s)


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
        code, user, system, delay = _unpack(data, _EXITED, 5)
        if not isinstance(code, int) or isinstance(code, bool) or not -256 < code < 256:
            raise BadRecord("bad returncode")
        times = (user, system) if delay is None else (user, system, delay)
        if not all(_seconds(t) for t in times):
            raise BadRecord("bad times")
        run_delay = None if delay is None else float(delay)  # type: ignore[arg-type]
        return Exited(code, float(user), float(system), run_delay)  # type: ignore[arg-type]
    raise BadRecord(f"unknown report {tag!r:.40}")
