"""The nodes of one host: start the nicds, forward their ready lines, install the routing
table, start the host processes, forward output and exits (as control messages), stop
everything, ship the statistics, sweep.

Every job runs its nodes through this class: a remote host's agent (``emuproxy``) feeds it
the control messages it reads from emurun's connection, and a job on this machine alone
drives it in-process (`launcher.localhost`), with the same messages as plain objects.
It decides nothing about the job: every exit goes to the job, which applies the
first-failure rule and says Stop. Only what cannot start is reported as Failed.

Invariants: every process started here carries EMU_JOB_ID and this host's EMU_AGENT marker,
and the sweep touches only processes with both and segments of this host's nodes (of the
whole job when it runs every node); with a lifeline, a warden (`launcher.warden`) runs before
the first nicd and until our own sweep, ready to run that sweep if this process dies; every
Output message holds whole lines of one stream of one process.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from launcher import cleanup, control, tuning
from launcher import plan as planmod
from launcher.children import Child, LineReader, spawn, stop_children
from launcher.errors import EXIT_INTERNAL, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND
from launcher.forkserver.client import ForkServer, ForkServerError
from launcher.warden import Warden
from nicd.core.ready import decode_ready_untrusted, socket_path
from nicd.shell import manage

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from launcher.plan import LaunchPlan
    from nicd.core.ready import Address
    from nicd.shell.lifeline import Lifeline

    Say = Callable[[str, bool], None]
    """Report a line (``always``: even with --quiet)."""

__all__ = ["STATS_FILE", "LocalNodes"]

STATS_FILE = re.compile(r"(nic|rank)[0-9]{1,5}\.json")
"""Names of the statistics files shipped to emurun (and the only ones it accepts)."""
_ROUTES_TIMEOUT_S = 30.0
_DRAIN_S = 2.0
_STATS_MAX = 1 << 20


class LocalNodes:
    """The processes of ``nodes`` on this host."""

    def __init__(
        self,
        plan: LaunchPlan,
        nodes: list[int],
        run_dir: str,
        marker: str,
        send: Callable[[control.Message], Awaitable[bool]],
        say: Say,
        lifeline: Lifeline | None = None,
    ) -> None:
        self.plan = plan
        self.nodes = nodes
        self.run_dir = run_dir
        self.marker = marker
        self.send = send
        self.say = say
        self.lifeline = lifeline
        """Given to every child (they stop when its holder dies), with our pid as their
        owner (``EMU_JOB_OWNER``): what a later launcher's stale sweep looks for."""
        self.nicds: list[Child] = []
        self.hosts: list[Child] = []
        self.forkserver: ForkServer | None = None
        """The zygote this host's nicds and hosts are forked from (`launcher.forkserver`)."""
        self.warden: Warden | None = None
        """Runs our sweep if this process dies (`launcher.warden`); with a lifeline only."""
        self.stats_dir = plan.stats_dir
        """Where nicds and hosts write statistics (inside the run directory), or None."""
        self._open_streams = 0
        self._drained = trio.Event()
        self._drained.set()
        cpus = tuning.allowed_cpus()
        self._placements = dict(
            zip(nodes, planmod.placements(_local(plan, len(nodes)), cpus), strict=True)
        ) if nodes else {}  # fmt: skip

    # -- environment policy -------------------------------------------------------------

    def _base_env(self) -> dict[str, str]:
        """This host's own environment (never emurun's), marked as the agent's."""
        env = dict(os.environ)
        env.pop("EMU_TOKEN_FILE", None)
        env[cleanup.ENV_AGENT] = self.marker
        return env

    # -- phases -------------------------------------------------------------------------

    async def start_nicds(self, nursery: trio.Nursery) -> bool:
        """Start every local nicd; each ready line is forwarded as it comes."""
        env = planmod.nicd_env(self.plan, self._base_env())
        if self.stats_dir is not None:
            os.makedirs(self.stats_dir, exist_ok=True)
        if self.lifeline is not None and self.nodes:
            try:
                self.warden = await Warden.start(
                    self.plan.job_id, self.run_dir, self.marker, self._segment_nodes()
                )
            except OSError as exc:  # the lifeline still stops what watches it
                self.say(f"cannot start the warden: {exc}", True)
        if self.plan.forkserver and self.nodes:
            zygote_env = dict(env)  # what the sweep sees of every process forked from it
            if self.lifeline is not None:
                zygote_env[cleanup.ENV_JOB_OWNER] = str(os.getpid())
            try:
                self.forkserver = await ForkServer.start(self.plan.python, zygote_env)
            except (OSError, ForkServerError) as exc:
                self.say(f"{exc}; starting every process directly", False)
        for node in self.nodes:
            argv = planmod.nicd_argv(self.plan, node, self.run_dir)
            cpus = self._placements[node].nicd_cpus
            try:
                child = await spawn(
                    "nicd",
                    node,
                    argv,
                    env,
                    lifeline=self.lifeline,
                    forkserver=self.forkserver,
                    cpus=cpus,
                )
            except OSError as exc:
                text = f"cannot start the nicd of node {node}: {exc}"
                await self.send(control.Failed(EXIT_INTERNAL, text))
                return False
            self.nicds.append(child)
            self._track(nursery, child)
            if cpus is not None and (why := tuning.bind(child.pid, cpus)):  # reports a failure
                self.say(why, False)
            assert child.process.stdout is not None
            assert child.process.stderr is not None
            nursery.start_soon(self._read_ready, child, child.process.stdout)
            nursery.start_soon(self._forward, LineReader(child.process.stderr), 2, child)
        return True

    async def install_routes(self, table: dict[int, Address]) -> bool:
        """Give every local nicd the job's table; False (and Failed sent) if one refuses."""
        failures: list[str] = []

        async def install(node: int) -> None:
            path = socket_path(self.run_dir, node)
            try:
                await trio.to_thread.run_sync(manage.set_routes, path, table, _ROUTES_TIMEOUT_S)
            except Exception as exc:  # NicdError, OSError: the cluster cannot start
                failures.append(f"cannot install routes in nicd of node {node}: {exc}")

        async with trio.open_nursery() as installs:
            for node in self.nodes:
                installs.start_soon(install, node)
        if failures:
            await self.send(control.Failed(EXIT_INTERNAL, failures[0]))
            return False
        return True

    async def start_hosts(self, nursery: trio.Nursery, priority: str) -> bool:
        """Start the host processes of the local nodes."""
        for rank in self.nodes:
            sock = socket_path(self.run_dir, rank)
            env = planmod.host_env(self.plan, rank, self.run_dir, sock, self._base_env())
            cpus = self._placements[rank].host_cpus
            try:
                child = await spawn(
                    "host",
                    rank,
                    self.plan.program.argv,
                    env,
                    lifeline=self.lifeline,
                    forkserver=self.forkserver,
                    cpus=cpus,
                )
            except OSError as exc:
                code = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
                text = f"cannot start {self.plan.program.display} as rank {rank}: {exc}"
                await self.send(control.Failed(code, text))
                return False
            self.hosts.append(child)
            self._track(nursery, child)
            if cpus is not None and (why := tuning.bind(child.pid, cpus)):  # reports a failure
                self.say(why, False)
            if priority == "nice":
                tuning.make_nice(child.pid)
            assert child.process.stdout is not None
            assert child.process.stderr is not None
            nursery.start_soon(self._forward, LineReader(child.process.stdout), 1, child)
            nursery.start_soon(self._forward, LineReader(child.process.stderr), 2, child)
        return True

    def adopt(self, nursery: trio.Nursery, child: Child, stdout: LineReader | None = None) -> None:
        """A process started for this host while the job runs (``launcher.dynamic``: nodes
        started at run time): its exit is reported, its output forwarded (``stdout``: a reader
        that already took the nicd's ready line), and it is stopped and swept with the
        others."""
        (self.nicds if child.role == "nicd" else self.hosts).append(child)
        self._track(nursery, child)
        assert child.process.stdout is not None
        assert child.process.stderr is not None
        stdout = stdout or LineReader(child.process.stdout)
        nursery.start_soon(self._forward, stdout, 1, child)
        nursery.start_soon(self._forward, LineReader(child.process.stderr), 2, child)

    # -- watchers -----------------------------------------------------------------------

    def _track(self, nursery: trio.Nursery, child: Child) -> None:
        if self._open_streams == 0:
            self._drained = trio.Event()
        self._open_streams += 2
        nursery.start_soon(self._watch, child)

    async def _watch(self, child: Child) -> None:
        await child.wait()
        usage = child.usage
        assert usage is not None
        assert child.returncode is not None
        exit_ = control.Exit(child.role, child.node, child.pid, child.returncode, child.stopping,
                             usage.user_s, usage.system_s, usage.wall_s,
                             usage.run_delay_s)  # fmt: skip
        await self.send(exit_)

    async def _read_ready(self, child: Child, stream: trio.abc.ReceiveStream) -> None:
        reader = LineReader(stream)
        block = await reader.read_lines()
        if block is not None:
            first, _, rest = block.partition(b"\n")
            realtime = False
            if self.plan.nic_priority == "rt":
                realtime = tuning.make_realtime(child.pid)
            if self.plan.listen_host != "127.0.0.1":
                self._check_announce(child.node, first)
            await self.send(control.Ready(child.node, first, realtime))
            if rest:
                await self.send(control.Output("nicd", child.node, 1, rest))
        await self._forward(reader, 1, child)

    def _check_announce(self, node: int, line: bytes) -> None:
        try:
            host = decode_ready_untrusted(line).udp[0]
        except Exception:  # emurun decodes it again and reports it
            return
        if host != self.plan.listen_host:
            self.say(f"nicd {node} announced {host}, not {self.plan.listen_host}", True)

    async def _forward(self, reader: LineReader, fd: int, child: Child) -> None:
        while (block := await reader.read_lines()) is not None:
            await self.send(control.Output(child.role, child.node, fd, block))
        self._open_streams -= 1
        if self._open_streams == 0:
            self._drained.set()

    # -- what the job says -----------------------------------------------------------------

    def obey(self, nursery: trio.Nursery, message: control.Message) -> bool:
        """Act on Routes, Start or Kill from the job (never blocks); True if ``message``
        ends this host's part (Stop, Kill): the caller then runs :meth:`finish`."""
        if isinstance(message, control.Routes):
            table: dict[int, Address] = {int(n): (str(h), int(p)) for n, h, p in message.table}
            nursery.start_soon(self._install, table)
        elif isinstance(message, control.Start):
            nursery.start_soon(self.start_hosts, nursery, message.priority)
        elif isinstance(message, control.Kill):
            self.kill()
        return isinstance(message, control.Stop | control.Kill)

    async def _install(self, table: dict[int, Address]) -> None:
        if await self.install_routes(table):
            await self.send(control.RoutesOk())

    async def finish(
        self, *, ship: bool, then: Callable[[], Awaitable[None]] | None = None
    ) -> control.Swept:
        """Stop everything; if ``ship``, send the statistics files and run ``then`` (the
        agent ships its trace recordings there); sweep; what the sweep found."""
        await self.stop()
        if ship:
            await self.ship_stats()
            if then is not None:
                await then()
        return await self.sweep()

    # -- stopping -----------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL everything now."""
        for child in self.hosts:
            child.signal(signal.SIGKILL, group=True)
        for child in self.nicds:
            child.signal(signal.SIGKILL, group=False)

    async def stop(self) -> None:
        """Hosts (group SIGTERM, then SIGKILL), then nicds (they write stats on SIGTERM)."""
        await self._stop(self.hosts, group=True)
        await self._stop(self.nicds, group=False)
        if self.forkserver is not None:
            await self.forkserver.aclose()
        with trio.move_on_after(_DRAIN_S):
            await self._drained.wait()

    async def _stop(self, children: list[Child], *, group: bool) -> None:
        for child in await stop_children(children, group=group, grace_s=self.plan.stop_grace):
            self.say(f"{child.name} (pid {child.pid}) would not die", True)

    async def ship_stats(self) -> None:
        """Send every statistics file written here to emurun."""
        if self.stats_dir is None:
            return
        for name, data in await trio.to_thread.run_sync(_stats_files, self.stats_dir):
            await self.send(control.File(name, data))

    async def sweep(self) -> control.Swept:
        """Kill what is left of this host's processes, unlink its segments."""
        owner = os.getpid() if self.lifeline is not None else None
        nodes = self._segment_nodes()
        report = await trio.to_thread.run_sync(
            lambda: cleanup.sweep(
                self.plan.job_id, self.run_dir, owner=owner, agent=self.marker, nodes=nodes
            )
        )
        if self.warden is not None:  # swept: nothing left for it to do
            await self.warden.stand_down()
        cleanup.reap_orphans()
        return control.Swept(report.killed, report.segments, report.survivors)

    def _segment_nodes(self) -> list[int] | None:
        """The nodes whose segments our sweep unlinks (None: every segment of the job)."""
        # a host running every node owns all of the job's segments, whatever a program named
        # them; otherwise only those of its own nodes (another host may share this kernel)
        return None if len(self.nodes) == self.plan.np else self.nodes


def _stats_files(directory: str) -> list[tuple[str, bytes]]:
    """(name, content) of every statistics file in ``directory``."""
    if not os.path.isdir(directory):
        return []
    return [
        (path.name, path.read_bytes())
        for path in sorted(Path(directory).iterdir())
        if STATS_FILE.fullmatch(path.name) and path.stat().st_size <= _STATS_MAX
    ]


def _local(plan: LaunchPlan, count: int) -> LaunchPlan:
    """The plan as seen for placements: ``count`` local nodes (CPU i mod ncpu of this host)."""
    return replace(plan, np=count)
