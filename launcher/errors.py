"""The launcher's exception tree and the exit codes emurun reports them with."""

from __future__ import annotations

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_LOST_HOST",
    "EXIT_NOT_EXECUTABLE",
    "EXIT_NOT_FOUND",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "LaunchError",
    "ProgramNotFound",
    "RendezvousError",
    "UsageError",
]

# Exit codes of emurun itself, in the style of timeout(1) and the shells; a failing rank's own
# code (or 128 + signal) is passed on unchanged.
EXIT_USAGE = 2
"""A bad command line (argparse's code)."""
EXIT_LOST_HOST = 123
"""A host of a multi-host job was lost: its agent's connection closed, it fell silent, or it
never connected (the message names the host and its nodes)."""
EXIT_TIMEOUT = 124
"""``--timeout`` expired; the job was stopped (timeout(1) uses the same code)."""
EXIT_INTERNAL = 125
"""The emulated cluster failed: a nicd died or never became ready, routes not installed."""
EXIT_NOT_EXECUTABLE = 126
"""PROGRAM exists but cannot be run."""
EXIT_NOT_FOUND = 127
"""PROGRAM does not exist."""


class LaunchError(Exception):
    """Base of every error the launcher raises on purpose; ``exit_code`` is emurun's status."""

    exit_code: int = EXIT_INTERNAL


class UsageError(LaunchError):
    """A bad command line or environment value. Raised by the CLI and the plan; fix the call."""

    exit_code = EXIT_USAGE


class ProgramNotFound(LaunchError):
    """PROGRAM is neither a file nor a command on PATH, or cannot be executed."""

    def __init__(self, message: str, exit_code: int = EXIT_NOT_FOUND) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class RendezvousError(LaunchError):
    """A nicd announced itself wrongly (unreadable ready line, wrong or duplicate node).

    Raised by the rendezvous codec; the supervisor stops the job with EXIT_INTERNAL.
    """
