"""One line of the simple PMI-1 wire protocol: parsed from bytes, written from fields.

Flux RFC 13 (the PMI-1.1 wire protocol, whose reference is MPICH's Hydra) defines a message
as one newline-terminated line of ``key=value`` tuples separated by spaces, the first being
``cmd=NAME``; a parser should accept extra white space, extra keys and keys in any order.
A value runs to the next space (``value=`` in ``put`` and ``get_result`` is a *word*: visible
ASCII, ``!`` to ``~``) and may itself contain ``=``; a key may not. MPICH's PMI_PORT hand-shake
(``cmd=initack``, then ``cmd=set size=...``) uses the same lines.

Invariants: ``parse_line(format_line(m)) == m`` for every message `format_line` accepts; the
parser raises `PmiProtocolError`, and only that, for anything that is not such a line
(no ``cmd=`` first, a command with ``=``, a tuple without ``=``, an empty key, a repeated
key, bytes that are not visible ASCII, a line longer than `MAX_LINE_BYTES`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from emucluster.errors import EmuclusterError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "MAX_LINE_BYTES",
    "Message",
    "PmiProtocolError",
    "check_word",
    "format_line",
    "parse_line",
]

MAX_LINE_BYTES = 1024
"""Longest line either side writes, newline included (MPICH's PMIU_MAXLINE; Slurm's PMI-1
server reads one request per read of this many bytes)."""
_SEPARATORS = frozenset(" \t")


class PmiProtocolError(EmuclusterError):
    """A line that is not simple PMI-1 (or a reply that breaks the exchange): the process
    manager or the program is not speaking the protocol. The rank cannot join its job; the
    message says what was wrong and quotes the line."""


@dataclass(frozen=True, slots=True)
class Message:
    """One line: its command and its other fields, in the order they came."""

    cmd: str
    """The ``cmd=`` value (``init``, ``response_to_init``, ``get_result``, ...)."""
    fields: Mapping[str, str] = field(default_factory=dict)
    """Every other ``key=value`` of the line."""

    def get(self, key: str) -> str | None:
        """The value of ``key``, or None when the line has none."""
        return self.fields.get(key)


def check_word(what: str, text: str, *, allow_equals: bool = True, empty: bool = False) -> str:
    """``text`` if it is a PMI word (visible ASCII ``!``..``~``, no ``=`` unless allowed);
    PmiProtocolError naming ``what`` otherwise."""
    if not text and not empty:
        raise PmiProtocolError(f"{what} is empty")
    for ch in text:
        if not "!" <= ch <= "~" or (ch == "=" and not allow_equals):
            raise PmiProtocolError(f"{what} {text!r:.80}: {ch!r} is not allowed in PMI-1")
    return text


def format_line(message: Message) -> bytes:
    """``cmd=NAME k=v ...\\n`` as bytes; PmiProtocolError for a field that cannot be written
    (a key with ``=``, a value with a space, a line over `MAX_LINE_BYTES`)."""
    parts = [f"cmd={check_word('command', message.cmd, allow_equals=False)}"]
    for key, value in message.fields.items():
        check_word("key", key, allow_equals=False)
        if key == "cmd":
            raise PmiProtocolError("a field may not be named cmd")
        parts.append(f"{key}={check_word(f'value of {key}', value, empty=True)}")
    line = (" ".join(parts) + "\n").encode("ascii")
    if len(line) > MAX_LINE_BYTES:
        raise PmiProtocolError(f"line of {len(line)} bytes exceeds {MAX_LINE_BYTES}")
    return line


def parse_line(line: bytes) -> Message:
    """One line (its newline optional) as a Message; PmiProtocolError for anything else."""
    if len(line) > MAX_LINE_BYTES:
        raise PmiProtocolError(f"line of {len(line)} bytes exceeds {MAX_LINE_BYTES}")
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        raise PmiProtocolError(f"not an ASCII line: {line!r:.120}") from None
    if text.endswith("\n"):
        text = text[:-1]
    if any(not ("!" <= ch <= "~" or ch in _SEPARATORS) for ch in text):
        raise PmiProtocolError(f"control characters in line {text!r:.120}")
    tuples = text.split()
    if not tuples:
        raise PmiProtocolError("empty line")
    fields: dict[str, str] = {}
    for item in tuples:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PmiProtocolError(f"{item!r:.60} is not key=value in line {text!r:.120}")
        if key in fields:
            raise PmiProtocolError(f"key {key!r:.40} repeated in line {text!r:.120}")
        fields[key] = value
    first = tuples[0].partition("=")[0]
    if first != "cmd":
        raise PmiProtocolError(f"line does not begin with cmd=: {text!r:.120}")
    cmd = fields.pop("cmd")
    if not cmd or "=" in cmd:
        raise PmiProtocolError(f"empty command or one with '=' in line {text!r:.120}")
    return Message(cmd, fields)
