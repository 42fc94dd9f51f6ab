"""Errors a module's source can cause at compile time, each with a position and a caret snippet.

Run-time problems (faults, exhausted fuel) are never exceptions: the VM returns them as outcomes
(STYLE §5). Everything here is raised by ``compile_module`` (and so by ``emucluster.nicvm.check``)
to the one who wrote the module, who should fix the source.
"""

from __future__ import annotations

__all__ = [
    "NicvmError",
    "NicvmLimitError",
    "NicvmSemanticError",
    "NicvmSyntaxError",
    "caret_snippet",
]


def caret_snippet(source: str, line: int, column: int) -> str:
    """The source line ``line`` (1-based) with a caret under ``column`` (1-based)."""
    lines = source.split("\n")
    if not 1 <= line <= len(lines):
        return ""
    text = lines[line - 1].expandtabs(1)
    return f"{text}\n{' ' * (max(column, 1) - 1)}^"


class NicvmError(Exception):
    """Base of every NICVM compile error: the module source is not acceptable.

    ``line`` and ``column`` are 1-based; ``snippet`` is the offending line with a caret;
    ``message`` is the bare explanation. ``str(error)`` gives all three.
    """

    def __init__(self, message: str, *, line: int, column: int, source: str = "") -> None:
        self.message = message
        """What is wrong, without the position."""
        self.line = line
        """1-based line of the offending token or construct."""
        self.column = column
        """1-based column of the offending token or construct."""
        self.snippet = caret_snippet(source, line, column)
        """The offending source line with a caret under the column ('' if unknown)."""
        text = f"line {line}, column {column}: {message}"
        super().__init__(f"{text}\n{self.snippet}" if self.snippet else text)


class NicvmSyntaxError(NicvmError):
    """The source does not parse (raised from lark's position); fix the text at the caret."""


class NicvmSemanticError(NicvmError):
    """The source parses but is wrong: undeclared or duplicate name, wrong argument count or
    type, missing ``main``. Fix the construct at the caret."""


class NicvmLimitError(NicvmError):
    """The module exceeds a bound of ``nicd.nicvm.limits`` (source size, variables, nesting,
    code length, ...). Make the module smaller."""
