"""The exceptions of a port's bookkeeping and of the progress engine, kept out of the compiled
`state` and `progress` modules.

`emucluster.port.state` and `emucluster.port.progress` are compiled with mypyc where a C
compiler works (docs/dev/build.md), and a compiled class has no docstring: the exceptions a
caller catches live here, interpreted, so ``help()`` still says who raises them. `state` and
`progress` re-export them.
"""

from __future__ import annotations

from emucluster.errors import EmuclusterError

__all__ = ["DeadlockError", "RecordRefused", "UnexpectedRecord"]


class DeadlockError(RuntimeError, EmuclusterError):
    """A wait that nothing can ever satisfy (a singleton rank without a NIC waits for a
    message from nobody). The MPI layer turns it into MPI.Exception."""


class RecordRefused(Exception):
    """The NIC answered a request of this port with REFUSED; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnexpectedRecord(Exception):
    """The NIC sent a record type this port has no sink for."""
