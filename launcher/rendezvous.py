"""The address exchange: nicd ready lines in, one routing table out.

Every nicd announces itself with one stdout line ``NICD_READY {"node": N, "udp": [host,
port], "socket": path}``. The launcher feeds each line it reads to :class:`Rendezvous`; once
every node has spoken, :meth:`Rendezvous.routes` is the table (node -> UDP address) installed
in every nicd. Nothing assumes localhost: a node's address is whatever it advertised, so a
hostfile or containers reuse the same exchange.

Invariants: each node announces exactly once, from the process started as that node; a line
from a stranger, a duplicate or garbage raises RendezvousError and changes nothing; the table
exists only when it is complete.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.errors import RendezvousError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "READY_PREFIX",
    "NicReady",
    "Rendezvous",
    "decode_ready_untrusted",
    "decode_routes_untrusted",
    "encode_routes",
]

READY_PREFIX = "NICD_READY "
Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class NicReady:
    """One nicd's announcement."""

    node: int
    """The node id it was started as."""
    udp: Address
    """Where its link receives datagrams, as peers must address it."""
    socket: str
    """Path of its PCI (host) socket."""


def decode_ready_untrusted(line: bytes | str) -> NicReady:
    """Parse one ready line; raise RendezvousError, and only that, for anything else."""
    try:
        text = line.decode() if isinstance(line, bytes) else line
    except UnicodeDecodeError:
        raise RendezvousError(f"not a ready line: {line!r:.200}") from None
    text = text.strip()
    if not text.startswith(READY_PREFIX):
        raise RendezvousError(f"not a ready line: {text!r:.200}")
    try:
        obj = json.loads(text[len(READY_PREFIX) :])
        node, udp, sock = obj["node"], obj["udp"], obj["socket"]
        host, port = udp
    except (ValueError, TypeError, KeyError) as exc:
        raise RendezvousError(f"malformed ready line {text!r:.200}: {exc}") from None
    if not isinstance(node, int) or isinstance(node, bool) or not 0 <= node <= 0xFFFF:
        raise RendezvousError(f"ready line: bad node {node!r}")
    if not isinstance(host, str) or not host:
        raise RendezvousError(f"ready line of node {node}: bad host {host!r}")
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 0xFFFF:
        raise RendezvousError(f"ready line of node {node}: bad port {port!r}")
    if not isinstance(sock, str) or not sock:
        raise RendezvousError(f"ready line of node {node}: bad socket {sock!r}")
    return NicReady(node, (host, port), sock)


class Rendezvous:
    """Collects the ready lines of ``size`` nodes."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._ready: dict[int, NicReady] = {}

    def on_ready(self, expected_node: int, ready: NicReady) -> bool:
        """Record what the process started as ``expected_node`` announced; True once complete."""
        if ready.node != expected_node:
            raise RendezvousError(
                f"nicd started as node {expected_node} announced itself as node {ready.node}"
            )
        if not 0 <= ready.node < self.size:
            raise RendezvousError(f"node {ready.node} is not in a job of {self.size}")
        if ready.node in self._ready:
            raise RendezvousError(f"node {ready.node} announced itself twice")
        self._ready[ready.node] = ready
        return self.complete

    @property
    def complete(self) -> bool:
        """Every node has announced itself."""
        return len(self._ready) == self.size

    def missing(self) -> list[int]:
        """Nodes not heard from yet, ascending."""
        return [n for n in range(self.size) if n not in self._ready]

    def socket(self, node: int) -> str:
        """Node ``node``'s PCI socket path (it must have announced itself)."""
        return self._ready[node].socket

    def routes(self) -> dict[int, Address]:
        """The routing table of the job; RendezvousError until every node announced itself."""
        if not self.complete:
            raise RendezvousError(f"no table yet: nodes {self.missing()} are missing")
        return {n: self._ready[n].udp for n in range(self.size)}


def encode_routes(routes: Mapping[int, Address]) -> str:
    """A routing table as the JSON ``nicd --routes FILE`` reads: ``{"0": [host, port]}``."""
    return json.dumps({str(n): [h, p] for n, (h, p) in sorted(routes.items())})


def decode_routes_untrusted(text: str) -> dict[int, Address]:
    """Inverse of :func:`encode_routes`; RendezvousError for anything else."""
    try:
        raw = json.loads(text)
        table = {int(n): (str(a[0]), int(a[1])) for n, a in raw.items()}
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise RendezvousError(f"not a routing table: {exc}") from None
    for node, (_, port) in table.items():
        if not 0 <= node <= 0xFFFF or not 1 <= port <= 0xFFFF:
            raise RendezvousError(f"not a routing table: entry {node}: port {port}")
    return table
