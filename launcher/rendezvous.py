"""The address exchange: nicd ready lines in, one routing table out.

Every nicd announces itself with one stdout line ``NICD_READY {"node": N, "udp": [host,
port], "socket": path}`` (the codec is nicd's own, :mod:`nicd.core.ready`). The launcher feeds the
first line of each nicd to :meth:`Rendezvous.on_line`; once every node has spoken,
:meth:`Rendezvous.routes` is the table (node -> UDP address) installed in every nicd.
Nothing assumes localhost: a node's address is whatever it advertised, so a hostfile or
containers reuse the same exchange.

Invariants: each node announces exactly once, from the process started as that node; a line
from a stranger, a duplicate or garbage raises RendezvousError and changes nothing; the table
exists only when it is complete.
"""

from __future__ import annotations

from launcher.errors import RendezvousError
from nicd.core.ready import Address, BadReadyLine, Ready, decode_ready_untrusted

__all__ = ["Rendezvous"]


class Rendezvous:
    """Collects the ready lines of ``size`` nodes."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._ready: dict[int, Ready] = {}

    def on_line(self, expected_node: int, line: bytes | str) -> bool:
        """Decode the ready line of the process started as ``expected_node`` and record it
        (:meth:`on_ready`); True once complete. A line that is not a valid ready line raises
        RendezvousError and changes nothing."""
        try:
            ready = decode_ready_untrusted(line)
        except BadReadyLine as exc:
            raise RendezvousError(str(exc)) from None
        return self.on_ready(expected_node, ready)

    def on_ready(self, expected_node: int, ready: Ready) -> bool:
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
