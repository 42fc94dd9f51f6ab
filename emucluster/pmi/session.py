"""The client's side of a simple PMI-1 conversation, as a state machine with no I/O.

PMI-1 is lock-step: the client sends one request and reads its one reply before the next
(Flux RFC 13). `PmiSession` writes each request (a method returning the bytes to send), then
takes whatever bytes arrive (`PmiSession.feed`) and, once the reply's line is complete, checks
it against the request (the right ``cmd=``, ``rc`` zero, the fields it must carry) and returns
its value in a `Done`. Order: the PMI_PORT hand-shake (``initack``) if the launcher gave a port,
then ``init`` (PMI 1.1), then any of ``get_maxes``, ``get_my_kvsname``, ``put``,
``barrier_in``, ``get``, and last ``finalize`` (or ``abort``, which has no reply).

Errors: a request out of order or while another is outstanding is a caller's bug
(`PmiUsageError`); a reply that breaks the protocol (wrong command, missing field, unsolicited
line, an over-long line) is a `PmiProtocolError` and the session is failed; ``rc`` not zero is a
`PmiRefused` carrying the code and the manager's message, and the session goes on. Every buffer
is bounded: at most one line of `MAX_LINE_BYTES` waits for its newline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, NoReturn, TypeVar

from emucluster.errors import EmuclusterError
from emucluster.pmi.wire import (
    MAX_LINE_BYTES,
    Message,
    PmiProtocolError,
    check_word,
    format_line,
    parse_line,
)

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "Done",
    "Maxes",
    "PmiRefused",
    "PmiSession",
    "PmiUsageError",
    "PortPlacement",
    "State",
]

T = TypeVar("T")
State = Literal["new", "handshaken", "ready", "finalized", "aborted", "failed"]


class PmiRefused(EmuclusterError):
    """The process manager answered a request with a non-zero ``rc`` (a ``get`` of a key
    nobody put, a ``put`` it would not store). The session may go on."""

    def __init__(self, cmd: str, rc: int, msg: str) -> None:
        super().__init__(f"PMI {cmd} refused: rc={rc}" + (f" ({msg})" if msg else ""))
        self.rc = rc
        """The reply's ``rc``."""
        self.msg = msg
        """The reply's ``msg`` (empty when it had none)."""


class PmiUsageError(EmuclusterError):
    """A request the session cannot send now: before ``init``, after ``finalize``, while
    another awaits its reply, or with a key or value the manager's limits refuse."""


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """A request's reply arrived and was checked: its value."""

    value: T


@dataclass(frozen=True, slots=True)
class Maxes:
    """``get_maxes``: the longest KVS name, key and value the manager takes (NUL included)."""

    kvsname_max: int
    keylen_max: int
    vallen_max: int


@dataclass(frozen=True, slots=True)
class PortPlacement:
    """What the PMI_PORT hand-shake tells: the job's size, this rank, the debug flag."""

    size: int
    rank: int
    debug: int


@dataclass(slots=True)
class _Pending(Generic[T]):
    request: str
    expect: tuple[str, ...]  # the replies' commands, in order (several for initack)
    convert: Callable[[list[Message]], T]
    got: list[Message]


class PmiSession:
    """One client connection's protocol state (see the module docstring)."""

    def __init__(self) -> None:
        self.state: State = "new"
        self.maxes: Maxes | None = None
        """The limits `get_maxes` returned (None before): `put` checks against them."""
        self._pending: _Pending[object] | None = None
        self._buffer = bytearray()

    @property
    def busy(self) -> bool:
        """A request awaits its reply."""
        return self._pending is not None

    # -- requests --------------------------------------------------------------------------

    def initack(self, pmi_id: int) -> bytes:
        """MPICH's PMI_PORT hand-shake (``PMI_ID``): first, before ``init``."""
        self._require("new", "initack")
        return self._send(
            Message("initack", {"pmiid": str(pmi_id)}),
            ("initack", "set", "set", "set"),
            _placement,
        )

    def init(self) -> bytes:
        """``cmd=init pmi_version=1 pmi_subversion=1``: the first request (after initack)."""
        if self.state not in ("new", "handshaken"):
            raise PmiUsageError(f"PMI init when {self.state}")
        self._check_idle("init")
        return self._send(
            Message("init", {"pmi_version": "1", "pmi_subversion": "1"}),
            ("response_to_init",),
            self._initialised,
        )

    def get_maxes(self) -> bytes:
        """The manager's length limits (a `Maxes`)."""
        self._require("ready", "get_maxes")
        return self._send(Message("get_maxes"), ("maxes",), self._got_maxes)

    def get_my_kvsname(self) -> bytes:
        """This job's key-value space name (a str)."""
        self._require("ready", "get_my_kvsname")
        return self._send(
            Message("get_my_kvsname"), ("my_kvsname",), lambda m: _field(m[0], "kvsname")
        )

    def put(self, kvsname: str, key: str, value: str) -> bytes:
        """Store ``key`` = ``value`` (words: visible ASCII; no ``=`` in the key); None."""
        self._require("ready", "put")
        check_word("key", key, allow_equals=False)
        check_word("value", value, empty=True)
        if self.maxes is not None:
            if len(key) >= self.maxes.keylen_max:
                raise PmiUsageError(f"key {key!r} longer than the manager's {self.maxes}")
            if len(value) >= self.maxes.vallen_max:
                raise PmiUsageError(f"value of {key!r} longer than the manager's {self.maxes}")
        fields = {"kvsname": kvsname, "key": key, "value": value}
        return self._send(Message("put", fields), ("put_result",), lambda m: None)

    def barrier_in(self) -> bytes:
        """Wait for every rank (``barrier_out``); what each put before is then visible."""
        self._require("ready", "barrier_in")
        return self._send(Message("barrier_in"), ("barrier_out",), lambda m: None)

    def get(self, kvsname: str, key: str) -> bytes:
        """The value stored under ``key`` (a str); PmiRefused when there is none."""
        self._require("ready", "get")
        fields = {"kvsname": kvsname, "key": key}
        return self._send(
            Message("get", fields), ("get_result",), lambda m: m[0].get("value") or ""
        )

    def finalize(self) -> bytes:
        """The last request: the manager's ``finalize_ack``; the session is then finalized."""
        self._require("ready", "finalize")
        return self._send(Message("finalize"), ("finalize_ack",), self._finalized)

    def abort(self, exitcode: int, message: str = "") -> bytes:
        """Ask the manager to end the whole job with ``exitcode``: no reply comes."""
        if self.state != "ready":
            raise PmiUsageError(f"PMI abort when {self.state}")
        fields = {"exitcode": str(int(exitcode))}
        words = "_".join(message.split())
        if words:
            fields["msg"] = "".join(ch for ch in words if "!" <= ch <= "~")[:200]
        self._pending = None
        self.state = "aborted"
        return format_line(Message("abort", fields))

    # -- replies ---------------------------------------------------------------------------

    def feed(self, data: bytes) -> Done[object] | None:
        """Bytes from the manager; the outstanding request's value once its reply is whole,
        else None. PmiProtocolError (session failed) or PmiRefused as the module says."""
        if self.state == "failed":
            raise PmiProtocolError("PMI session already failed")
        self._buffer += data
        result: Done[object] | None = None
        while (end := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[: end + 1])
            del self._buffer[: end + 1]
            if result is not None:
                self._fail(f"unsolicited line after the reply: {line!r:.120}")
            result = self._line(line)
        if len(self._buffer) >= MAX_LINE_BYTES:
            self._fail(f"reply line longer than {MAX_LINE_BYTES} bytes")
        return result

    def _line(self, line: bytes) -> Done[object] | None:
        pending = self._pending
        if pending is None:
            self._fail(f"unsolicited line: {line!r:.120}")
        try:
            message = parse_line(line)
        except PmiProtocolError as exc:
            self._fail(f"reply to {pending.request}: {exc}")
        expected = pending.expect[len(pending.got)]
        if message.cmd != expected:
            self._fail(f"reply to {pending.request}: expected cmd={expected}, got {line!r:.120}")
        try:
            rc = _rc(message)
        except PmiProtocolError as exc:
            self._fail(str(exc))
        if rc:
            self._pending = None
            raise PmiRefused(pending.request, rc, message.get("msg") or "")
        pending.got.append(message)
        if len(pending.got) < len(pending.expect):
            return None
        self._pending = None
        try:
            return Done(pending.convert(pending.got))
        except PmiProtocolError as exc:
            self._fail(str(exc))

    # -- helpers ---------------------------------------------------------------------------

    def _send(
        self, message: Message, expect: tuple[str, ...], convert: Callable[[list[Message]], T]
    ) -> bytes:
        line = format_line(message)
        self._pending = _Pending(message.cmd, expect, convert, [])
        return line

    def _require(self, state: State, request: str) -> None:
        if self.state != state:
            raise PmiUsageError(f"PMI {request} when {self.state} (needs {state})")
        self._check_idle(request)

    def _check_idle(self, request: str) -> None:
        if self._pending is not None:
            raise PmiUsageError(f"PMI {request} while {self._pending.request} awaits its reply")

    def _fail(self, why: str) -> NoReturn:
        self.state = "failed"
        self._pending = None
        raise PmiProtocolError(why)

    def _initialised(self, replies: list[Message]) -> tuple[int, int]:
        reply = replies[0]
        version = (_int(reply, "pmi_version", 1), _int(reply, "pmi_subversion", 1))
        if version[0] != 1:
            raise PmiProtocolError(f"the manager answered init with PMI version {version}")
        self.state = "ready"
        return version

    def _got_maxes(self, replies: list[Message]) -> Maxes:
        reply = replies[0]
        self.maxes = Maxes(
            _int(reply, "kvsname_max"), _int(reply, "keylen_max"), _int(reply, "vallen_max")
        )
        return self.maxes

    def _finalized(self, replies: list[Message]) -> None:
        self.state = "finalized"


def _placement(replies: list[Message]) -> PortPlacement:
    values: dict[str, str] = {}
    for reply in replies[1:]:
        values.update(reply.fields)
    holder = Message("set", values)
    return PortPlacement(_int(holder, "size"), _int(holder, "rank"), _int(holder, "debug", 0))


def _field(message: Message, key: str) -> str:
    value = message.get(key)
    if value is None:
        raise PmiProtocolError(f"cmd={message.cmd} without {key}=")
    return value


def _int(message: Message, key: str, default: int | None = None) -> int:
    text = message.get(key)
    if text is None:
        if default is None:
            raise PmiProtocolError(f"cmd={message.cmd} without {key}=")
        return default
    try:
        return int(text)
    except ValueError:
        raise PmiProtocolError(f"cmd={message.cmd}: {key}={text!r:.40} is not a number") from None


def _rc(message: Message) -> int:
    return _int(message, "rc", 0)
