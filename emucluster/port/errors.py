"""The exceptions of a port's bookkeeping, kept out of the compiled `state` module.

`emucluster.port.state` is compiled with mypyc where a C compiler works (docs/dev/build.md),
and a compiled class has no docstring: the exceptions a caller catches live here, interpreted,
so ``help()`` still says who raises them. `state` re-exports them.
"""

from __future__ import annotations

__all__ = ["RecordRefused", "UnexpectedRecord"]


class RecordRefused(Exception):
    """The NIC answered a request of this port with REFUSED; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnexpectedRecord(Exception):
    """The NIC sent a record type this port has no sink for."""
