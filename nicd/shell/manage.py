"""Management client for a running nicd: install its routing table, read its counters.

Used by the launcher (and by people poking at a nicd); blocking, one request per connection.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from nicd import hostlink as hl
from nicd.errors import NicdError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["add_routes", "read_stats", "set_routes"]


def _request(socket_path: str, request: hl.HostRecord, timeout: float) -> hl.HostRecord:
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(socket_path)
            for record in hl.encode_record(request):
                sock.send(record)
            reply = hl.Assembler().feed(sock.recv(hl.MAX_RECORD_BYTES))
        except OSError as exc:
            raise NicdError(f"nicd at {socket_path}: {exc}") from exc
    if reply is None:
        raise NicdError(f"nicd at {socket_path}: incomplete reply")
    if isinstance(reply, hl.Refused):
        raise NicdError(f"nicd at {socket_path} refused: {reply.reason}")
    return reply


def set_routes(
    socket_path: str, routes: Mapping[int, tuple[str, int]], timeout: float = 10.0
) -> None:
    """Install ``routes`` (node id -> (host, UDP port)) in the nicd at ``socket_path``. A nicd
    takes one table, before any port opens (the launcher's); it refuses any later one."""
    table = {int(node): (str(host), int(port)) for node, (host, port) in routes.items()}
    reply = _request(socket_path, hl.SetRoutesReq(table), timeout)
    if not isinstance(reply, hl.RoutesOk):
        raise NicdError(f"nicd at {socket_path}: unexpected reply {reply!r}")


def add_routes(
    socket_path: str, routes: Mapping[int, tuple[str, int]], timeout: float = 10.0
) -> None:
    """Add the routes of nodes started at run time to the running nicd at ``socket_path``
    (only new node ids; a nicd refuses a change of a route in force)."""
    table = {int(node): (str(host), int(port)) for node, (host, port) in routes.items()}
    reply = _request(socket_path, hl.AddRoutesReq(table), timeout)
    if not isinstance(reply, hl.RoutesOk):
        raise NicdError(f"nicd at {socket_path}: unexpected reply {reply!r}")


def read_stats(socket_path: str, timeout: float = 10.0) -> dict[str, object]:
    """The counters of the nicd at ``socket_path``."""
    reply = _request(socket_path, hl.StatsReq(), timeout)
    if not isinstance(reply, hl.StatsReply):
        raise NicdError(f"nicd at {socket_path}: unexpected reply {reply!r}")
    return reply.stats
