"""The control protocol between emurun and its per-host agents (``emuproxy``): sans-IO.

A connection carries frames: a 4-byte big-endian length, then one msgpack map whose ``t``
names the message (:data:`MESSAGES`). The agent dials emurun; emurun speaks first:

    emurun -> agent   Challenge(version, nonce_e)
    agent  -> emurun  Hello(..., nonce_a, mac = HMAC(token, "hello" nonce_e nonce_a))
    emurun -> agent   Welcome(mac = HMAC(token, "welcome" nonce_a nonce_e))  or it hangs up

so both sides prove they hold the per-job token without sending it (:func:`hello_mac`,
:func:`welcome_mac`, checked with :func:`hmac.compare_digest`). Then emurun sends Launch,
collects one Ready per node, sends Routes, waits for RoutesOk, sends Start; the agent streams
Output and Exit, and on Stop (or a lost emurun) stops its processes, ships File frames
(statistics) and TraceFile frames (``emurun --trace``), Swept and Bye. Ping goes both ways as a
heartbeat. With ``--trace``, emurun sends a few ClockPing before Launch; each is answered at
once with ClockPong and the agent's CLOCK_MONOTONIC (emurun estimates the clock offset).

Invariants: ``decode_message_untrusted(encode_message(m)) == m`` for every message;
:func:`decode_message_untrusted` and :meth:`FrameDecoder.feed` raise ControlError and nothing
else, whatever bytes they are given; a frame longer than MAX_FRAME is refused before it is
buffered.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import msgpack

from launcher.errors import LaunchError

__all__ = [
    "MAX_FRAME",
    "MESSAGES",
    "NONCE_BYTES",
    "VERSION",
    "Bye",
    "Challenge",
    "ClockPing",
    "ClockPong",
    "ControlError",
    "Exit",
    "Failed",
    "File",
    "FrameDecoder",
    "Hello",
    "Kill",
    "Launch",
    "Message",
    "Output",
    "Ping",
    "Ready",
    "Routes",
    "RoutesOk",
    "Start",
    "Stop",
    "Swept",
    "TraceFile",
    "Welcome",
    "decode_message_untrusted",
    "encode_message",
    "hello_mac",
    "welcome_mac",
]

VERSION = 2
"""Bumped on any incompatible change; both sides refuse another version."""
MAX_FRAME = 4 << 20
"""Largest frame body in bytes (an output block is at most 64 KiB, a stats file small)."""
NONCE_BYTES = 16
_LENGTH = struct.Struct(">I")


class ControlError(LaunchError):
    """A control frame that is not a valid message (or a failed handshake): the connection
    is closed and its host is lost."""


# -- field checkers (value -> bool) -------------------------------------------------------

Check = Callable[[Any], bool]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)


def _nonneg(v: Any) -> bool:
    return _int(v) and v >= 0


def _float(v: Any) -> bool:
    return isinstance(v, float) and math.isfinite(v)


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _bytes(v: Any) -> bool:
    return isinstance(v, bytes)


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _list_of(check: Check) -> Check:
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


def _str_map(v: Any) -> bool:
    return isinstance(v, dict) and all(_str(k) and _str(x) for k, x in v.items())


def _num_map(v: Any) -> bool:
    return isinstance(v, dict) and all(_str(k) and (_int(x) or _float(x)) for k, x in v.items())


def _route(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 3 and _nonneg(v[0]) and _str(v[1]) and _nonneg(v[2])


def _opt_str(v: Any) -> bool:
    return v is None or _str(v)


def _opt_seconds(v: Any) -> bool:
    return v is None or (_float(v) and v >= 0)


# -- messages -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Base:
    TAG: ClassVar[str] = ""
    CHECKS: ClassVar[dict[str, Check]] = {}


@dataclass(frozen=True, slots=True)
class Challenge(_Base):
    """emurun's first frame: its protocol version and a fresh nonce."""

    TAG: ClassVar[str] = "challenge"
    CHECKS: ClassVar[dict[str, Check]] = {"version": _int, "nonce": _bytes}
    version: int
    nonce: bytes


@dataclass(frozen=True, slots=True)
class Hello(_Base):
    """The agent introduces itself and proves it holds the token."""

    TAG: ClassVar[str] = "hello"
    CHECKS: ClassVar[dict[str, Check]] = {
        "version": _int, "agent_id": _int, "name": _str, "hostname": _str, "pid": _int,
        "cpus": _int, "slots": _int, "bind_addr": _str, "nonce": _bytes, "mac": _bytes,
    }  # fmt: skip
    version: int
    agent_id: int
    """The id emurun gave it on its command line (``--agent-id``), -1 when started by hand."""
    name: str
    """How messages name this host (``--name``, default the host name)."""
    hostname: str
    pid: int
    cpus: int
    """CPUs the agent may use."""
    slots: int
    """Nodes it offers (``--slots``)."""
    bind_addr: str
    """The address its nicds bind and announce."""
    nonce: bytes
    mac: bytes


@dataclass(frozen=True, slots=True)
class Welcome(_Base):
    """emurun proves it holds the token too; the agent obeys nothing before it."""

    TAG: ClassVar[str] = "welcome"
    CHECKS: ClassVar[dict[str, Check]] = {"mac": _bytes}
    mac: bytes


@dataclass(frozen=True, slots=True)
class Launch(_Base):
    """What the agent runs: its nodes of the job, and how."""

    TAG: ClassVar[str] = "launch"
    CHECKS: ClassVar[dict[str, Check]] = {
        "job_id": _str, "np": _int, "nodes": _list_of(_nonneg), "program": _list_of(_str),
        "module": _opt_str, "cwd": _str, "env": _str_map, "faults": _num_map,
        "nicd_args": _list_of(_str), "stats": _bool, "bind_to": _str, "nic_priority": _str,
        "stop_grace": _float, "ready_timeout": _float, "multi_host": _bool, "trace": _bool,
    }  # fmt: skip
    job_id: str
    np: int
    nodes: list[int]
    """Node ids (= ranks) this host runs."""
    program: list[str]
    """PROGRAM [ARGS] as typed (resolved on the agent's host), or the module's ARGS."""
    module: str | None
    cwd: str
    env: dict[str, str]
    """Variables forwarded to the hosts (``-x``, collective choices): nothing else."""
    faults: dict[str, float | int]
    """FaultConfig fields."""
    nicd_args: list[str]
    stats: bool
    bind_to: str
    nic_priority: str
    stop_grace: float
    ready_timeout: float
    multi_host: bool
    """The job's agents are on different hosts: a loopback bind address is refused."""
    trace: bool = False
    """``emurun --trace``: record events; ship them back as TraceFile frames."""


@dataclass(frozen=True, slots=True)
class Ready(_Base):
    """A nicd's ready line, forwarded raw (emurun decodes it), and whether it got SCHED_FIFO."""

    TAG: ClassVar[str] = "ready"
    CHECKS: ClassVar[dict[str, Check]] = {"node": _nonneg, "line": _bytes, "realtime": _bool}
    node: int
    line: bytes
    realtime: bool


@dataclass(frozen=True, slots=True)
class Routes(_Base):
    """The job's routing table, ``[node, host, port]`` rows."""

    TAG: ClassVar[str] = "routes"
    CHECKS: ClassVar[dict[str, Check]] = {"table": _list_of(_route)}
    table: list[list[Any]]


@dataclass(frozen=True, slots=True)
class RoutesOk(_Base):
    """Every local nicd has the table."""

    TAG: ClassVar[str] = "routes_ok"


@dataclass(frozen=True, slots=True)
class Start(_Base):
    """Start the hosts, with the job's priority scheme (``rt``, ``nice`` or ``none``)."""

    TAG: ClassVar[str] = "start"
    CHECKS: ClassVar[dict[str, Check]] = {"priority": _str}
    priority: str


@dataclass(frozen=True, slots=True)
class Output(_Base):
    """Whole lines a process wrote (``fd`` 1 or 2)."""

    TAG: ClassVar[str] = "output"
    CHECKS: ClassVar[dict[str, Check]] = {"role": _str, "node": _nonneg, "fd": _int, "data": _bytes}
    role: str
    node: int
    fd: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Exit(_Base):
    """A process ended (returncode as subprocess reports it), and what it cost."""

    TAG: ClassVar[str] = "exit"
    CHECKS: ClassVar[dict[str, Check]] = {
        "role": _str, "node": _nonneg, "pid": _int, "returncode": _int, "stopping": _bool,
        "user_s": _float, "system_s": _float, "wall_s": _float, "run_delay_s": _opt_seconds,
    }  # fmt: skip
    role: str
    node: int
    pid: int
    returncode: int
    stopping: bool
    """The agent was stopping it: not a failure."""
    user_s: float
    system_s: float
    wall_s: float
    run_delay_s: float | None
    """Seconds it waited for a CPU (`launcher.cpugauge`); None if unknown."""


@dataclass(frozen=True, slots=True)
class Failed(_Base):
    """The agent cannot go on (program not found, nicd not ready, ...): emurun's exit code."""

    TAG: ClassVar[str] = "failed"
    CHECKS: ClassVar[dict[str, Check]] = {"code": _int, "message": _str}
    code: int
    message: str


@dataclass(frozen=True, slots=True)
class File(_Base):
    """A statistics file (``nic<N>.json``, ``rank<N>.json``) for emurun's --stats DIR."""

    TAG: ClassVar[str] = "file"
    CHECKS: ClassVar[dict[str, Check]] = {"name": _str, "data": _bytes}
    name: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Swept(_Base):
    """What the agent's cleanup found left over."""

    TAG: ClassVar[str] = "swept"
    CHECKS: ClassVar[dict[str, Check]] = {
        "killed": _list_of(_str),
        "segments": _list_of(_str),
        "survivors": _list_of(_int),
    }
    killed: list[str]
    segments: list[str]
    survivors: list[int]


@dataclass(frozen=True, slots=True)
class Stop(_Base):
    """Stop every process (SIGTERM, SIGKILL after the grace), clean up, report, say Bye."""

    TAG: ClassVar[str] = "stop"


@dataclass(frozen=True, slots=True)
class Kill(_Base):
    """SIGKILL every process now (a second Ctrl-C)."""

    TAG: ClassVar[str] = "kill"


@dataclass(frozen=True, slots=True)
class Ping(_Base):
    """Heartbeat."""

    TAG: ClassVar[str] = "ping"


@dataclass(frozen=True, slots=True)
class ClockPing(_Base):
    """emurun asks for the agent's clock (``--trace``: offset estimation)."""

    TAG: ClassVar[str] = "clock_ping"
    CHECKS: ClassVar[dict[str, Check]] = {"seq": _nonneg}
    seq: int


@dataclass(frozen=True, slots=True)
class ClockPong(_Base):
    """The agent's CLOCK_MONOTONIC in ns when it answered ClockPing ``seq``."""

    TAG: ClassVar[str] = "clock_pong"
    CHECKS: ClassVar[dict[str, Check]] = {"seq": _nonneg, "agent_ns": _int}
    seq: int
    agent_ns: int


@dataclass(frozen=True, slots=True)
class TraceFile(_Base):
    """A piece of one process's trace recording: ``data`` goes at ``offset`` of ``name``."""

    TAG: ClassVar[str] = "trace_file"
    CHECKS: ClassVar[dict[str, Check]] = {"name": _str, "offset": _nonneg, "data": _bytes}
    name: str
    offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Bye(_Base):
    """The agent is done; it closes the connection after this."""

    TAG: ClassVar[str] = "bye"


Message = (
    Challenge | Hello | Welcome | Launch | Ready | Routes | RoutesOk | Start | Output | Exit
    | Failed | File | Swept | Stop | Kill | Ping | ClockPing | ClockPong | TraceFile | Bye
)  # fmt: skip
_ALL: tuple[type[_Base], ...] = (
    Challenge, Hello, Welcome, Launch, Ready, Routes, RoutesOk, Start, Output, Exit,
    Failed, File, Swept, Stop, Kill, Ping, ClockPing, ClockPong, TraceFile, Bye,
)  # fmt: skip
MESSAGES: dict[str, type[_Base]] = {cls.TAG: cls for cls in _ALL}


def encode_message(message: Message) -> bytes:
    """One frame: length, then the msgpack map of the message."""
    cls = type(message)
    if MESSAGES.get(getattr(cls, "TAG", "")) is not cls:
        raise TypeError(f"not a control message: {message!r:.100}")
    body: dict[str, Any] = {"t": cls.TAG}
    for f in fields(cls):
        body[f.name] = getattr(message, f.name)
    raw: bytes = msgpack.packb(body, use_bin_type=True)
    if len(raw) > MAX_FRAME:
        raise ControlError(f"{cls.TAG} frame of {len(raw)} bytes exceeds {MAX_FRAME}")
    return _LENGTH.pack(len(raw)) + raw


def decode_message_untrusted(body: bytes) -> Message:
    """The message in one frame body; ControlError, and only that, for anything else."""
    try:
        obj = msgpack.unpackb(body, raw=False, use_list=True, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError, OverflowError) as e:
        raise ControlError(f"undecodable control frame: {type(e).__name__}: {e}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("t"), str):
        raise ControlError(f"control frame is not a message: {obj!r:.100}")
    cls = MESSAGES.get(obj["t"])
    if cls is None:
        raise ControlError(f"unknown control message {obj['t']!r:.40}")
    names = [f.name for f in fields(cls)]
    if set(obj) != {"t", *names}:
        raise ControlError(f"{cls.TAG}: fields {sorted(map(str, obj))!r:.200}, want {names}")
    for name in names:
        if not cls.CHECKS[name](obj[name]):
            raise ControlError(f"{cls.TAG}: bad {name} {obj[name]!r:.100}")
    message: Message = cls(**{n: obj[n] for n in names})  # type: ignore[assignment]
    return message


@dataclass(slots=True)
class FrameDecoder:
    """Bytes of one connection in, whole messages out."""

    _buf: bytearray = field(default_factory=bytearray)

    def feed(self, data: bytes) -> list[Message]:
        """Buffer ``data``; return the messages completed by it, in order. ControlError on
        a bad frame (the connection is unusable after it)."""
        self._buf += data
        out: list[Message] = []
        while len(self._buf) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(self._buf)
            if length > MAX_FRAME:
                raise ControlError(f"control frame of {length} bytes exceeds {MAX_FRAME}")
            end = _LENGTH.size + length
            if len(self._buf) < end:
                break
            body = bytes(self._buf[_LENGTH.size : end])
            del self._buf[:end]
            out.append(decode_message_untrusted(body))
        return out

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame waiting for more."""
        return len(self._buf)


def _mac(token: bytes, label: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.new(token, label + b"\0" + first + second, hashlib.sha256).digest()


def hello_mac(token: bytes, emurun_nonce: bytes, agent_nonce: bytes) -> bytes:
    """What the agent sends in Hello: proves it holds ``token``."""
    return _mac(token, b"emucluster hello v1", emurun_nonce, agent_nonce)


def welcome_mac(token: bytes, emurun_nonce: bytes, agent_nonce: bytes) -> bytes:
    """What emurun sends in Welcome: proves it holds ``token`` (another label and order, so
    a Hello mac can never be replayed as a Welcome)."""
    return _mac(token, b"emucluster welcome v1", agent_nonce, emurun_nonce)
