"""The hosts of a job as emurun's job driver sees them: each host (`Agent`: an agent over TCP,
or this machine's nodes in-process), the link the job speaks to it through (`Link`), how hosts
join a job (`Gate`: `launcher.localhost.LocalGate` or `launcher.multihost.gate.AgentGate`), and
what a gate sees of the job (`JobView`, which `launcher.job.Job` is).

A gate needs the job only through `JobView`, so the job driver imports the gates and no gate
imports the driver.

Invariants: an Agent is obeyed only once ``connected`` (after the handshake, for a remote
one); ``gone`` is set exactly once, when its link ends, with ``bye`` telling whether it
finished cleanly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import trio

if TYPE_CHECKING:
    from launcher import control
    from launcher.plan import LaunchPlan
    from launcher.report import ProcessUsage

__all__ = ["Agent", "Gate", "JobView", "Link"]


class Link(Protocol):
    """How the job speaks to one host: `launcher.multihost.channel.Channel` (an agent over TCP) or
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


class JobView(Protocol):
    """What a gate and its hosts see of the job (`launcher.job.Job`)."""

    plan: LaunchPlan
    stopping: bool
    """The job is stopping its hosts: a host that never joined is no longer a failure."""
    all_connected: trio.Event
    """Set by the gate once every host has joined and knows its nodes."""

    def on_message(self, agent: Agent, m: control.Message) -> None:
        """Act on one message from ``agent`` (never blocks)."""

    def say(self, text: str, *, always: bool = False) -> None:
        """One ``emurun: ...`` line on stderr (failures even with --quiet)."""

    def relay(self, data: bytes) -> None:
        """Whole lines for emurun's stderr from elsewhere (an agent launcher's output)."""

    def fail(self, code: int, message: str) -> None:
        """Record the first failure, say it, stop the job; later ones are ignored."""


class Gate(Protocol):
    """How a job's hosts join it, and what they need torn down after."""

    remote: bool
    """Hosts are agents over TCP (messages name them; their stop has a time limit)."""
    agents: list[Agent]
    """The hosts, in the order they are reported (may grow while they join)."""

    def prepare(self) -> int | None:
        """Before the job's event loop: take what the job needs (run directory, token...);
        an exit status if the job cannot start (said on stderr)."""

    def release(self) -> None:
        """After the job's event loop, whatever ended it: give back what ``prepare`` took."""

    async def open(self, job: JobView, nursery: trio.Nursery) -> None:
        """Start (or accept) the hosts; set ``job.all_connected`` once every one has joined
        and knows its nodes."""

    def missing(self) -> str:
        """Who has not joined yet (for the failure message)."""

    async def close(self) -> None:
        """After every host said Bye (or its limit passed): release what ``open`` took."""

    def setup(self) -> str:
        """Where the nodes run, for the line that says they are ready (``""``: here)."""

    async def ended_by(self) -> tuple[int, str] | None:
        """After a failure: a cause outside the job that ended it (the scheduler cancelled
        the allocation, its time ran out), as (exit status, message), to report instead of
        the first failure the job saw; None if there is none."""
