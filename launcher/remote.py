"""emurun's view of one host of a job (an agent over TCP, or this machine's nodes in-process),
and the job's token.

Invariants: an Agent is obeyed only once ``connected`` (after the handshake, for a remote
one); ``gone`` is set exactly once, when its link ends, with ``bye`` telling whether it
finished cleanly.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import trio

if TYPE_CHECKING:
    from launcher import control
    from launcher.report import ProcessUsage

__all__ = ["Agent", "Link", "read_token"]


class Link(Protocol):
    """How the job speaks to one host: `launcher.channel.Channel` (an agent over TCP) or
    `launcher.localhost.InProcessHost` (this machine's nodes)."""

    async def send(self, message: control.Message) -> bool:
        """Deliver one message; False if the host is unreachable."""


@dataclass(eq=False)
class Agent:
    """One host of the job as emurun sees it."""

    index: int
    name: str
    nodes: list[int] = field(default_factory=list)
    slots: int = 1
    link: Link | None = None
    """Set once the host has joined."""
    hello: control.Hello | None = None
    launcher: trio.Process | None = None
    connected: trio.Event = field(default_factory=trio.Event)
    gone: trio.Event = field(default_factory=trio.Event)
    """Its connection ended (after Bye or not)."""
    bye: bool = False
    routes_ok: bool = False
    usages: list[ProcessUsage] = field(default_factory=list)
    dropped: int = 0
    """Messages about nodes that are not its own, or otherwise unusable."""

    def describe(self) -> str:
        """``host h1 (agent for nodes 2-3)``."""
        if not self.nodes:
            return f"host {self.name} (agent with no nodes)"
        span = f"{self.nodes[0]}" if len(self.nodes) == 1 else f"{self.nodes[0]}-{self.nodes[-1]}"
        if self.nodes != list(range(self.nodes[0], self.nodes[-1] + 1)):
            span = ",".join(map(str, self.nodes))
        return f"host {self.name} (agent for node{'s' if len(self.nodes) > 1 else ''} {span})"


def read_token(path: str | None) -> bytes:
    """The job's token from ``path`` (stripped), or a fresh random one if None."""
    if path is None:
        return secrets.token_hex(16).encode()
    with open(path, "rb") as f:
        token = f.read(4096).strip()
    if not token:
        raise OSError(f"{path}: no token in it")
    return token
