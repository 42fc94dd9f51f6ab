"""What a starting nicd tells the process that started it, where it listens, and the routing
table it may be given.

Once its link and its PCI socket listen, nicd prints one stdout line::

    NICD_READY {"node": 3, "udp": ["10.0.0.7", 40003], "socket": "/run/emurun-x/nic3.sock"}

:func:`encode_ready` writes it (the daemon), :func:`decode_ready_untrusted` reads it (emurun's
rendezvous, test clusters). :func:`socket_path` is where node N's PCI socket lives in a run
directory; :func:`log_tag` is how nicd's stderr lines begin, so a launcher forwarding them
need not tag them again. :func:`encode_routes` writes the JSON table ``nicd --routes FILE``
reads with :func:`decode_routes_untrusted` (``{"0": ["10.0.0.7", 40000], ...}``); without
that flag the launcher installs the table over the PCI socket (:mod:`nicd.shell.manage`).

Invariants: ``decode_ready_untrusted(encode_ready(r)) == r`` for every valid ``r``, and the
same for routes; the ready decoder raises BadReadyLine and nothing else, whatever it is given,
the routes decoder UsageError (the table is local input, not a peer's).
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nicd.errors import NicdError, UsageError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "LOG_TAG_START",
    "READY_PREFIX",
    "UNSPECIFIED_HOSTS",
    "BadReadyLine",
    "Ready",
    "announce_host",
    "decode_ready_untrusted",
    "decode_routes_untrusted",
    "encode_ready",
    "encode_routes",
    "log_tag",
    "socket_path",
]

READY_PREFIX = "NICD_READY "
"""How the ready line begins; a JSON object follows."""
LOG_TAG_START = "nicd["
"""How nicd's own log and error lines on stderr begin (:func:`log_tag`)."""
_MAX_NODE = 0xFFFF  # node ids are 16 bits on the wire
_MAX_PORT = 0xFFFF  # UDP; port 0 cannot be sent to
UNSPECIFIED_HOSTS = frozenset({"0.0.0.0", "::", "0", ""})
"""Addresses that mean "any interface": bound to, they leave peers nowhere to send."""
Address = tuple[str, int]
"""A UDP address as peers reach it: (host name or IP, port)."""


class BadReadyLine(NicdError):
    """Raised by :func:`decode_ready_untrusted` for anything that is not a valid ready line.

    The caller (a launcher) cannot use that nicd: it stops the job and shows the message.
    """

    def __init__(self, message: str, line: str) -> None:
        super().__init__(message)
        self.line = line
        """The offending line (as text, at most 200 characters)."""


@dataclass(frozen=True, slots=True)
class Ready:
    """One nicd's announcement."""

    node: int
    """The node id it was started as."""
    udp: Address
    """Where its link receives datagrams, as peers must address it."""
    socket: str
    """Path of its PCI (host) socket."""


def socket_path(run_dir: str, node: int) -> str:
    """Where node ``node``'s PCI socket lives in the run directory ``run_dir``."""
    return posixpath.join(run_dir, f"nic{node}.sock")


def log_tag(node: int) -> str:
    """How node ``node``'s nicd begins each stderr line: ``nicd[3]``."""
    return f"{LOG_TAG_START}{node}]"


def announce_host(advertise: str | None, listen_host: str) -> str:
    """The concrete address a nicd announces (``--advertise``, else the one it binds to);
    UsageError for an unspecified one (0.0.0.0): peers would send to themselves, and a
    multi-homed host would send from whichever interface routing picks."""
    host = advertise or listen_host
    if host in UNSPECIFIED_HOSTS:
        raise UsageError(
            f"nicd must bind or advertise a concrete address, not {host or 'nothing'!r}: "
            "use --listen IP:PORT (or --advertise IP)"
        )
    return host


def encode_ready(ready: Ready) -> str:
    """The ready line of ``ready``, without the newline."""
    host, port = ready.udp
    body = {"node": ready.node, "udp": [host, port], "socket": ready.socket}
    return READY_PREFIX + json.dumps(body)


def decode_ready_untrusted(line: bytes | str) -> Ready:
    """Parse one ready line (surrounding white space allowed); raise BadReadyLine, and only
    that, for anything else."""
    try:
        text = line.decode() if isinstance(line, bytes) else line
    except UnicodeDecodeError:
        raise BadReadyLine(f"not a ready line: {line!r:.200}", repr(line)[:200]) from None
    text = text.strip()
    if not text.startswith(READY_PREFIX):
        raise BadReadyLine(f"not a ready line: {text!r:.200}", text[:200])
    try:
        obj = json.loads(text[len(READY_PREFIX) :])
        node, udp, sock = obj["node"], obj["udp"], obj["socket"]
        host, port = udp
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        raise BadReadyLine(f"malformed ready line {text!r:.200}: {exc}", text[:200]) from None
    if not isinstance(node, int) or isinstance(node, bool) or not 0 <= node <= _MAX_NODE:
        raise BadReadyLine(f"ready line: bad node {node!r:.200}", text[:200])
    if not isinstance(host, str) or host in UNSPECIFIED_HOSTS:
        raise BadReadyLine(f"ready line of node {node}: bad host {host!r:.200}", text[:200])
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= _MAX_PORT:
        raise BadReadyLine(f"ready line of node {node}: bad port {port!r:.200}", text[:200])
    if not isinstance(sock, str) or not sock:
        raise BadReadyLine(f"ready line of node {node}: bad socket {sock!r:.200}", text[:200])
    return Ready(node, (host, port), sock)


def encode_routes(routes: Mapping[int, Address]) -> str:
    """A routing table as the JSON ``nicd --routes FILE`` reads: ``{"0": [host, port]}``."""
    return json.dumps({str(n): [h, p] for n, (h, p) in sorted(routes.items())})


def decode_routes_untrusted(text: str) -> dict[int, Address]:
    """Inverse of :func:`encode_routes`; UsageError, and only that, for anything else: each
    entry is ``"node": ["host", port]`` with a node id in 0..65535, a non-empty host and a
    port in 1..65535."""
    try:
        raw = json.loads(text)
        items = list(raw.items())
        table = {int(n): _route_entry(a) for n, a in items}
    except (
        ValueError,
        TypeError,
        LookupError,
        AttributeError,
        ArithmeticError,
        RecursionError,
    ) as exc:
        raise UsageError(f"not a routing table {{node: [host, port]}}: {exc}") from None
    for node, (_, port) in table.items():
        if not 0 <= node <= _MAX_NODE or not 1 <= port <= _MAX_PORT:
            raise UsageError(f"not a routing table: entry {node}: port {port}")
    return table


def _route_entry(entry: object) -> Address:
    if not isinstance(entry, list) or len(entry) != 2:
        raise ValueError(f"entry {entry!r:.80} is not [host, port]")
    host, port = entry
    if not isinstance(host, str) or not host:
        raise ValueError(f"bad host {host!r:.80}")
    if not isinstance(port, int) or isinstance(port, bool):
        raise ValueError(f"bad port {port!r:.80}")
    return host, port
