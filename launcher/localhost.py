"""A job on this machine alone: one local host whose nodes run in emurun's own process.

The host is `launcher.agent.nodes.LocalNodes`, the very code an agent runs on a remote host,
driven in-process: the job's control messages reach it as objects (no codec, no socket, no
token, no extra process to start), and its messages reach the job the same way. A local
agent over a socketpair would run the same code but cost a Python process (~0.2 s of CPU
for the interpreter and the agent's imports, measured on this 2-core VM) before the first
nicd starts, and encode every output block twice; nothing else would differ.

What only the local host does: it starts processes at run time (``MPI.Comm.Spawn``,
`launcher.dynamic`), its run directory is ``<tmp>/emurun-<job>-*`` and names its
owner (so a later emurun sweeps what a killed one left, `cleanup.sweep_stale`), every child
holds the job's lifeline (they stop on their own if emurun is killed; so does all of the job
through `launcher.warden`, which `LocalNodes` starts), emurun is the subreaper of their
orphans, and statistics are written straight into ``--stats DIR``.

Invariants: the host's stop (hosts, nicds, drain, sweep) runs once, shielded, whatever ends
the job; nothing here blocks the job's task (every action is started in the job's nursery).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from launcher import cleanup, control
from launcher.agent.nodes import LocalNodes
from launcher.children import write_all
from launcher.dynamic.server import DynamicHost
from launcher.errors import EXIT_INTERNAL
from launcher.hosts import Agent
from nicd.core.ready import socket_path
from nicd.shell.lifeline import Lifeline

if TYPE_CHECKING:
    from launcher.hosts import JobView
    from launcher.plan import LaunchPlan

__all__ = ["InProcessHost", "LocalGate"]

SOCKET_PATH_MAX = 107
"""sun_path holds 108 bytes with the terminating NUL."""


class InProcessHost:
    """The link to this machine's nodes: ``send`` hands each message to LocalNodes."""

    def __init__(
        self, job: JobView, agent: Agent, run_dir: str, lifeline: Lifeline | None,
        nursery: trio.Nursery,
    ) -> None:  # fmt: skip
        self.job = job
        self.agent = agent
        self.nursery = nursery
        marker = f"{job.plan.job_id}.{os.getpid()}"
        self.nodes = LocalNodes(job.plan, list(agent.nodes), run_dir, marker, self.report,
                                self._say, lifeline)  # fmt: skip
        self.dynamic = DynamicHost(job, agent, self.nodes)
        """The launcher socket: processes started at run time (`launcher.dynamic`)."""
        self._finishing = False

    async def send(self, message: control.Message) -> bool:
        """Obey one message of the job (never blocks)."""
        if isinstance(message, control.Launch):  # the plan LocalNodes holds says the rest
            self.nursery.start_soon(self.nodes.start_nicds, self.nursery)
            return True
        if isinstance(message, control.Routes):
            self.dynamic.set_routes(message.table)
        elif isinstance(message, control.Start):
            self.nursery.start_soon(self.dynamic.serve, self.nursery)
        if self.nodes.obey(self.nursery, message) and not self._finishing:
            self._finishing = True
            self.nursery.start_soon(self._finish)
        return True

    async def report(self, message: control.Message) -> bool:
        """LocalNodes' side: one message to the job."""
        self.job.on_message(self.agent, message)
        return True

    def _say(self, text: str, always: bool) -> None:
        self.job.say(text, always=always)

    async def _finish(self) -> None:
        with trio.CancelScope(shield=True):
            swept = await self.nodes.finish(ship=False)  # --stats DIR is written in place
            self.job.on_message(self.agent, swept)
            self.job.on_message(self.agent, control.Bye())
            self.agent.gone.set()


class LocalGate:
    """The hosts of a job on this machine: exactly one, in-process."""

    remote = False

    def __init__(self, plan: LaunchPlan) -> None:
        self.plan = plan
        self.agents: list[Agent] = []
        self.run_dir = ""
        self.lifeline: Lifeline | None = None

    def prepare(self) -> int | None:
        """Sweep stale jobs, make and claim the run directory, create the lifeline."""
        plan = self.plan
        _sweep_stale_jobs(plan)
        self.run_dir = tempfile.mkdtemp(prefix=f"{cleanup.RUN_DIR_PREFIX}{plan.job_id}-")
        cleanup.claim_run_dir(self.run_dir, plan.job_id)
        self.lifeline = Lifeline.create()
        if len(socket_path(self.run_dir, plan.np - 1)) > SOCKET_PATH_MAX:
            self.release()
            write_all(2, f"emurun: run directory {self.run_dir} is too long for a socket "
                      "path: shorten TMPDIR\n".encode())  # fmt: skip
            return EXIT_INTERNAL
        cleanup.adopt_orphans()
        return None

    def release(self) -> None:
        """The last sweep (whatever is left of the job), then the lifeline."""
        cleanup.sweep(self.plan.job_id, self.run_dir, owner=os.getpid())
        cleanup.reap_orphans()
        if self.lifeline is not None:
            self.lifeline.close()

    async def open(self, job: JobView, nursery: trio.Nursery) -> None:
        """Attach the local host, with every node."""
        agent = Agent(0, "localhost", list(range(self.plan.np)), self.plan.np)
        agent.link = InProcessHost(job, agent, self.run_dir, self.lifeline, nursery)
        self.agents.append(agent)
        agent.connected.set()
        job.all_connected.set()

    def missing(self) -> str:
        """Nobody: the local host joins at once."""
        return ""

    async def close(self) -> None:
        """Nothing to close."""

    async def ended_by(self) -> tuple[int, str] | None:
        """Nothing outside ends a one-machine job but signals, which the job sees itself."""
        return None

    def setup(self) -> str:
        """Nothing to add: the nodes run here."""
        return ""


def _sweep_stale_jobs(plan: LaunchPlan) -> None:
    """Sweep what killed launchers left in our TMPDIR (their processes, segments, dirs)."""
    for job_id, report in cleanup.sweep_stale(Path(tempfile.gettempdir())):
        if plan.quiet:
            continue
        what = [f"killed {', '.join(report.killed)}"] if report.killed else []
        what += [f"removed {', '.join(report.segments)}"] if report.segments else []
        what.append("removed its run directory")
        write_all(2, f"emurun: swept stale job {job_id} (its emurun died): "
                  f"{'; '.join(what)}\n".encode())  # fmt: skip
