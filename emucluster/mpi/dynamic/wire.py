"""The requests a rank makes of its launcher for processes started at run time, and the
answers: one JSON object a line, over the job's launcher socket (``<run dir>/launcher.sock``).

Requests: ``spawn`` (start the commands as new nodes joined to the fabric), ``publish``,
``lookup`` and ``unpublish`` (the job's name service for ``MPI.Publish_name``). Every answer
is ``{"ok": true, ...}`` or ``{"ok": false, "error": why}``. The launcher's side is
``launcher.dynamic``; the rank's side ``emucluster.mpi.dynamic.client``. Sans-IO.

Invariants: a decoded message has exactly the fields of its kind, each of the right type and
within its bound; anything else raises `BadMessage` (the launcher counts it and answers with
an error, never crashes).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

__all__ = [
    "MAX_LINE",
    "MAX_PROCS",
    "SOCKET_NAME",
    "BadMessage",
    "Command",
    "Lookup",
    "Publish",
    "Reply",
    "Request",
    "Spawn",
    "Unpublish",
    "decode_reply",
    "decode_request",
    "encode",
]

SOCKET_NAME = "launcher.sock"
"""The launcher's socket in the job's run directory (``EMU_RUN_DIR``)."""
MAX_LINE = 1 << 20
"""Longest message in bytes (a command line and its environment fit many times)."""
MAX_PROCS = 4096
"""Most processes one spawn request may start."""


class BadMessage(ValueError):
    """A line that is not a valid message (said back to the sender, counted)."""


@dataclass(frozen=True, slots=True)
class Command:
    """One command of a spawn: ``argv`` started ``maxprocs`` times."""

    argv: tuple[str, ...]
    maxprocs: int
    wdir: str | None = None
    """``info`` key ``wdir``: the working directory (None: the launcher's)."""
    env: tuple[tuple[str, str], ...] = ()
    """``info`` key ``env``: extra ``NAME=VALUE`` variables of these processes."""


@dataclass(frozen=True, slots=True)
class Spawn:
    """Start ``commands`` as new nodes (one COMM_WORLD of them); asked by node ``node``."""

    node: int
    commands: tuple[Command, ...]


@dataclass(frozen=True, slots=True)
class Publish:
    """``MPI.Publish_name``: ``service`` is reachable at ``port``."""

    service: str
    port: str


@dataclass(frozen=True, slots=True)
class Lookup:
    """``MPI.Lookup_name``."""

    service: str


@dataclass(frozen=True, slots=True)
class Unpublish:
    """``MPI.Unpublish_name``."""

    service: str
    port: str


Request = Spawn | Publish | Lookup | Unpublish

_KINDS: dict[str, type[Spawn | Publish | Lookup | Unpublish]] = {
    "spawn": Spawn, "publish": Publish, "lookup": Lookup, "unpublish": Unpublish,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Reply:
    """The launcher's answer: ``error`` empty when it succeeded."""

    error: str = ""
    spawn: int = 0
    """The spawn's id (the tag its intercommunicator is agreed under)."""
    nodes: tuple[int, ...] = ()
    """The new nodes, COMM_WORLD rank order of the started processes."""
    port: str = ""
    """``lookup``: the port published under the name."""


def encode(message: Request | Reply) -> bytes:
    """One line of JSON (``kind`` names a request)."""
    doc = asdict(message)
    if not isinstance(message, Reply):
        doc["kind"] = next(k for k, cls in _KINDS.items() if isinstance(message, cls))
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def _load(line: bytes) -> dict[str, object]:
    if len(line) > MAX_LINE:
        raise BadMessage(f"a message of {len(line)} bytes (at most {MAX_LINE})")
    try:
        doc = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadMessage(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadMessage("not a JSON object")
    return doc


def _text(doc: dict[str, object], key: str, limit: int = 4096) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or len(value) > limit:
        raise BadMessage(f"{key!r} is not a string of at most {limit} characters")
    return value


def _int(doc: dict[str, object], key: str, low: int, high: int) -> int:
    value = doc.get(key)
    if type(value) is not int or not low <= value <= high:
        raise BadMessage(f"{key!r} is not an integer in {low}..{high}")
    return value


def _strings(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadMessage(f"{what} is not a list of strings")
    return tuple(value)


def _command(value: object) -> Command:
    if not isinstance(value, dict) or set(value) != {"argv", "maxprocs", "wdir", "env"}:
        raise BadMessage("a command is not {argv, maxprocs, wdir, env}")
    argv = _strings(value["argv"], "argv")
    if not argv or not argv[0]:
        raise BadMessage("a command without a program")
    wdir = value["wdir"]
    if wdir is not None and not isinstance(wdir, str):
        raise BadMessage("wdir is not a string")
    pairs = value["env"]
    if not isinstance(pairs, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs
    ):
        raise BadMessage("env is not a list of [name, value]")
    return Command(argv, _int(value, "maxprocs", 1, MAX_PROCS), wdir,
                   tuple((name, text) for name, text in pairs))  # fmt: skip


def decode_request(line: bytes) -> Request:
    """The request on ``line``; BadMessage if it is not one."""
    doc = _load(line)
    kind = _KINDS.get(str(doc.pop("kind", "")))
    if kind is None:
        raise BadMessage("no known 'kind'")
    if kind is Spawn:
        commands = doc.get("commands")
        if not isinstance(commands, list) or not commands:
            raise BadMessage("'commands' is not a non-empty list")
        found = Spawn(_int(doc, "node", 0, 0xFFFF), tuple(_command(c) for c in commands))
        if sum(c.maxprocs for c in found.commands) > MAX_PROCS:
            raise BadMessage(f"more than {MAX_PROCS} processes in one spawn")
        return found
    if kind is Lookup:
        return Lookup(_text(doc, "service"))
    if kind is Publish:
        return Publish(_text(doc, "service"), _text(doc, "port"))
    return Unpublish(_text(doc, "service"), _text(doc, "port"))


def decode_reply(line: bytes) -> Reply:
    """The reply on ``line``; BadMessage if it is not one."""
    doc = _load(line)
    nodes = doc.get("nodes", [])
    if not isinstance(nodes, list) or not all(type(n) is int for n in nodes):
        raise BadMessage("'nodes' is not a list of integers")
    return Reply(_text(doc, "error"), _int(doc, "spawn", 0, 0x7FFFFFFF), tuple(nodes),
                 _text(doc, "port"))  # fmt: skip
