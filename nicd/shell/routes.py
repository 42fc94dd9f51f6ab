"""Routing tables from outside the process: read from a file, resolved through the resolver.

``nicd --routes FILE`` names a JSON table (its codec is :mod:`nicd.core.ready`); a table that
comes in a SET_ROUTES record is resolved numerically only, so no DNS lookup blocks the event
loop. The core keeps the resolved table (:mod:`nicd.core.routing`).
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from nicd.core.ready import decode_routes_untrusted
from nicd.errors import UsageError

if TYPE_CHECKING:
    from nicd.core.routing import Addr

__all__ = ["load_routes", "resolve_routes"]


def resolve_routes(
    table: dict[int, tuple[str, int]], *, numeric_only: bool = False
) -> dict[int, Addr]:
    """Resolve host names to IPv4 addresses as the link will see them in ``recvfrom``.

    ``numeric_only`` (the event loop's path) never asks DNS: a name that is no IPv4 address
    is refused at once. Raises UsageError, and only that, for an address that does not
    resolve.
    """
    flags = socket.AI_NUMERICHOST if numeric_only else 0
    resolved: dict[int, Addr] = {}
    for node, (host, port) in table.items():
        try:
            info = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM, 0, flags)
            resolved[int(node)] = (str(info[0][4][0]), int(port))
        except (OSError, UnicodeError, ValueError, OverflowError, IndexError) as exc:
            raise UsageError(f"route of node {node}: cannot resolve {host!r:.80}: {exc}") from None
    return resolved


def load_routes(path: str) -> dict[int, tuple[str, int]]:
    """Read a JSON routing table ``{"0": ["host", port], ...}``; UsageError naming ``path``
    for a file that cannot be read or is no table."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return decode_routes_untrusted(text)
    except (OSError, UnicodeError) as exc:
        raise UsageError(f"{path}: {exc}") from None
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None
