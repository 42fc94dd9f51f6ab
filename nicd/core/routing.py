"""The routing table of one NIC: node id <-> UDP address, and who may set it (the launcher,
once, before any port opens).

The table comes from ``nicd --routes FILE`` at start or from one SET_ROUTES record; either
way it is resolved to addresses by the shell (:mod:`nicd.shell.routes`) before it arrives
here. Sans-IO.

Invariants: once a table is installed no record replaces it, and an ADD_ROUTES record (nodes
started at run time, ``MPI.Comm.Spawn``) only adds node ids and addresses not in it, never
changes a route in force; ``by_addr`` is the inverse of ``by_node``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["SET_ONCE", "Addr", "RoutingTable"]

Addr = tuple[str, int]
"""A NIC's UDP address, as the link's ``recvfrom`` reports it."""

SET_ONCE = "routes are set once, by the launcher, before any port opens"
"""Why a SET_ROUTES record was refused."""


class RoutingTable:
    """Where every node of the job listens, and which node an address is."""

    __slots__ = ("by_addr", "by_node", "sealed")

    def __init__(self) -> None:
        self.by_node: dict[int, Addr] = {}
        self.by_addr: dict[Addr, int] = {}
        self.sealed = False
        """A table is in force: no record may replace it (see :meth:`may_set`)."""

    def install(self, routes: Mapping[int, Addr]) -> None:
        """Install ``routes`` (node id -> resolved UDP address) and seal the table."""
        self.sealed = True
        self.by_node = dict(routes)
        self.by_addr = {addr: node for node, addr in routes.items()}

    def extend(self, routes: Mapping[int, Addr]) -> str | None:
        """Add the routes of nodes that joined the running fabric; None if done, else why
        nothing was added (no table yet, a known node id or address)."""
        if not self.sealed:
            return "no routing table to extend: the launcher installs one first"
        for node, addr in routes.items():
            if self.by_node.get(node, addr) != addr:
                return f"node {node} has a route already"
            if self.by_addr.get(addr, node) != node:
                return f"address {addr[0]}:{addr[1]} is node {self.by_addr[addr]}'s"
        if len(set(routes.values())) != len(routes):
            return "two new nodes share an address"
        self.by_node.update(routes)
        self.by_addr.update((addr, node) for node, addr in routes.items())
        return None

    def may_set(self, *, ports_opened: bool) -> bool:
        """Whether a SET_ROUTES record may install a table now.

        Only the launcher sets routes: one table, before any port opens. Every launcher
        (emurun, its agents, NicCluster) installs the table once and only then starts hosts,
        so no host ever gets a turn; a host (or any same-uid process) that connects earlier
        and installs a table makes the launcher's own refused, and the job fails loudly at
        start instead of being rerouted quietly. A secret handed to nicd would travel in argv
        or the environment, both readable by the same uid in /proc, i.e. by exactly the hosts
        it would keep out: more protocol for no more protection."""
        return not self.sealed and not ports_opened
