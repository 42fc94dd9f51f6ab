"""The point-to-point engine's exception, kept out of the compiled `protocol` module.

`emucluster.p2p.protocol` is compiled with mypyc where a C compiler works (docs/dev/build.md),
and a compiled class has no docstring: the exception a caller catches lives here, interpreted,
so ``help()`` still says who raises it. `protocol` re-exports it.
"""

from __future__ import annotations

from emucluster.errors import EmuclusterError

__all__ = ["ProtocolError"]


class ProtocolError(EmuclusterError):
    """Local misuse of the core (an illegal move of an operation): a bug in the caller."""
