"""Host-side NICVM API: validate a module before it is uploaded (thesis §5.1).

``check`` runs nicd's own compiler on the host, so a module that passes here compiles on the
NIC; errors carry ``.line``, ``.column`` and a caret snippet. Uploading, purging and delegating
are added on top of the port once nicd serves NICVM packets.
"""

from __future__ import annotations

from nicd.nicvm import NicvmError, compile_module

__all__ = ["NicvmError", "check"]


def check(source: str) -> None:
    """Raise ``NicvmError`` (with ``.line``, ``.column``, ``.snippet``) if ``source`` would
    not compile on the NIC: a syntax error, a semantic error or an exceeded limit."""
    compile_module(source)
