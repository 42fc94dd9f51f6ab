"""emurun's one job driver: hosts join, each is handed its nodes, the rendezvous and the routing
table are exchanged, the hosts started, the first failure stops everything, and the job is
reported, whether its nodes run on this machine alone or on several hosts.

A job is a list of hosts (`launcher.hosts.Agent`), each reached through a link with one
method, ``send(control.Message)``, and each answering with control messages
(:meth:`Job.on_message`). How hosts join is the job's gate: `launcher.localhost` attaches
this machine's nodes in-process (the same `launcher.agent.nodes.LocalNodes` an agent runs,
fed the same messages as objects, no socket, no extra process); `launcher.multihost.gate`
starts agents (or waits for them) and speaks to them over TCP. A gate sees the job as a
`launcher.hosts.JobView`.

Phases: hosts join -> Launch -> one Ready per node -> Routes to every host -> RoutesOk from
all -> Start(priority) -> Output/Exit until every rank exited or the first failure -> Stop ->
Swept, Bye (with ``--with-ft ulfm`` a failure is recorded and the others go on until every
rank exited). The exit table: the first failing rank's code (128+N when killed by signal N),
124 on --timeout, 125 when the emulated cluster fails (a nicd death is blamed before the rank
it takes down), 128+N after a signal, 123 when a remote host is lost (naming it).

Invariants: a message about a node that is not its host's is counted and dropped; every wait
has a limit (a remote host's stop included; this machine's stop is bounded by itself);
whatever ends the job, the shielded stop runs: Stop to every host, wait for their Bye, close
the gate.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import signal
import time
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import trio

from launcher import control, tuning
from launcher import plan as planmod
from launcher.agent.nodes import STATS_FILE
from launcher.children import describe_exit, exit_code_of, job_signals, tag_lines, write_all
from launcher.errors import EXIT_INTERNAL, EXIT_LOST_HOST, EXIT_TIMEOUT, RendezvousError
from launcher.forkserver.client import ENV_FORKSERVER
from launcher.liveline import LiveLine
from launcher.localhost import LocalGate
from launcher.multihost.gate import AgentGate
from launcher.rendezvous import Rendezvous
from launcher.report import ProcessUsage, gauge_verdict, job_json, render
from launcher.startup import REFRESH_S, StartupCount, live_wanted, ready_line
from launcher.tracing import CLOCK_PINGS, TraceSink, host_folder, offset_from_samples, write_clocks
from nicd.core.ready import LOG_TAG_START, decode_ready_untrusted, log_tag

if TYPE_CHECKING:
    from launcher.hosts import Agent, Gate
    from launcher.plan import LaunchPlan

__all__ = ["Job", "Outcome", "run_job"]

ROUTES_TIMEOUT_S = 60.0
BYE_MARGIN_S = 30.0
"""A remote host gets ``--stop-grace`` plus this to stop its nodes and say Bye."""
ROOT_CAUSE_WAIT_S = 0.2
"""A rank failing because its nicd died: let the nicd be blamed."""
_PONG_WAIT_S = 2.0
"""--trace across hosts: how long one ClockPing waits for its ClockPong."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the job ended, if not by every rank exiting 0."""

    code: int
    """emurun's exit status."""
    message: str
    """Said on stderr, once."""


class Job:
    """One run of a plan over the hosts of ``gate``."""

    def __init__(self, plan: LaunchPlan, gate: Gate) -> None:
        self.plan = plan
        self.gate = gate
        self.agents = gate.agents
        self.rendezvous = Rendezvous(plan.np)
        self.outcome: Outcome | None = None
        self.priority = plan.nic_priority
        self.run_scope = trio.CancelScope()
        self.multi_host = False
        self.stopping = False
        self.all_connected = trio.Event()
        self._all_ready = trio.Event()
        self._routes_done = trio.Event()
        self._hosts_done = trio.Event()
        self._nicd_died = trio.Event()
        self._exited: set[int] = set()
        self._blaming = 0
        """Failed ranks still waiting to see whether their nicd is to blame."""
        self._signals = 0
        self.nursery: trio.Nursery
        self.traces = TraceSink(plan.trace_dir) if plan.trace_dir and gate.remote else None
        """--trace across hosts: where the agents' shipped recordings land."""
        self.clocks: dict[str, dict[str, object]] = {}
        """--trace across hosts: each host's clock offset from ours (`offset_from_samples`)."""
        self._pong: tuple[int, int, trio.Event, list[int]] | None = None
        hosts = plan.hosts
        expected = (hosts.agents or len(gate.agents)) if gate.remote and hosts else 0
        self.startup = StartupCount(plan.np, expected, time.monotonic())
        self._live: LiveLine | None = None
        """The live count while the job starts, on a terminal."""

    # -- the job --------------------------------------------------------------------------

    def fail(self, code: int, message: str) -> None:
        """Record the first failure, say it, stop the job; later ones are ignored."""
        if self.outcome is not None:
            return
        self.outcome = Outcome(code, message)
        verb = "stopping the job" if not self._hosts_done.is_set() else "job stopped"
        self.say(f"{message}; {verb}", always=True)
        self.run_scope.cancel()

    def record(self, code: int, message: str) -> None:
        """``--with-ft ulfm``: record a failure as the job's outcome (the first one stands) and
        say it, but let the other ranks go on."""
        if self.outcome is None:
            self.outcome = Outcome(code, message)
        self.say(f"{message}; the job goes on (--with-ft ulfm)", always=True)

    def say(self, text: str, *, always: bool = False) -> None:
        """One ``emurun: ...`` line on stderr (failures even with --quiet)."""
        if always or not self.plan.quiet:
            self.relay(f"emurun: {text}\n".encode())

    def relay(self, data: bytes) -> None:
        """Whole lines for stderr (above the live count while it shows)."""
        if self._live is not None:
            self._live.print(data)
        else:
            write_all(2, data)

    async def run(self) -> int:
        """Run the job to its end; emurun's exit status."""
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            await nursery.start(self._watch_signals)
            if live_wanted(os.isatty(2), self.plan.quiet, os.environ.get("TERM")):
                nursery.start_soon(self._show_startup)
            if self.plan.timeout is not None:
                self.run_scope.deadline = trio.current_time() + self.plan.timeout
            try:
                with self.run_scope:
                    await self.gate.open(self, nursery)
                    await self._phases()
                if self.run_scope.cancelled_caught and self.outcome is None:
                    self.fail(EXIT_TIMEOUT, f"timed out after {self.plan.timeout:g} s")
                if self.outcome is not None and (cause := await self.gate.ended_by()):
                    self.outcome = Outcome(*cause)
                    self.say(cause[1], always=True)
            finally:
                with trio.CancelScope(shield=True):
                    await self._stop_all()
                    nursery.cancel_scope.cancel()
        return 0 if self.outcome is None else self.outcome.code

    async def _phases(self) -> None:
        if await self._wait(self.all_connected, self._join_limit(), "connect"):
            await self._launch()
            if self.traces is not None:  # nodes are placed; nicds are starting
                await self._measure_clocks()
        if await self._wait(self._all_ready, self.plan.ready_timeout, "ready"):
            table = [[n, h, p] for n, (h, p) in self.rendezvous.routes().items()]
            await self._send_all(control.Routes(table))
        if await self._wait(self._routes_done, ROUTES_TIMEOUT_S, "routes"):
            self._end_live()
            self.say(self._describe_setup())
            await self._send_all(control.Start(self.priority))
            await self._hosts_done.wait()

    async def _show_startup(self) -> None:
        """The live count (agents connected, nodes ready) until every node is ready."""
        count = self.startup
        try:
            while not self._routes_done.is_set() and self.outcome is None:
                connected = sum(a.connected.is_set() for a in self.agents)
                count.observe(connected, self.rendezvous.size - len(self.rendezvous.missing()))
                if (line := count.due(time.monotonic())) is not None:
                    if self._live is None:
                        self._live = LiveLine()
                    self._live.show(line)
                await trio.sleep(REFRESH_S)
        finally:
            self._end_live()

    def _end_live(self) -> None:
        if self._live is not None:
            self._live.close()
            self._live = None

    def _join_limit(self) -> float:
        hosts = self.plan.hosts
        return hosts.agent_timeout if hosts is not None else math.inf

    async def _wait(self, event: trio.Event, limit_s: float, phase: str) -> bool:
        if self.outcome is not None:
            return False
        with trio.move_on_after(limit_s):
            await event.wait()
        if event.is_set():
            return self.outcome is None
        if phase == "connect":
            self.fail(EXIT_LOST_HOST, f"{self.gate.missing()} never connected within "
                      f"{limit_s:g} s")  # fmt: skip
        elif phase == "ready":
            nodes = ", ".join(map(str, self.rendezvous.missing()))
            self.fail(EXIT_INTERNAL, f"no NICD_READY from nodes {nodes} within {limit_s:g} s")
        else:
            late = [a.describe() for a in self.agents if not a.routes_ok]
            self.fail(EXIT_INTERNAL, f"routes not installed on {'; '.join(late)}")
        return False

    async def _launch(self) -> None:
        addrs = [ipaddress.ip_address(a.hello.bind_addr) for a in self.agents if a.hello]
        self.multi_host = not all(ip.is_loopback for ip in addrs)
        hosts = self.plan.hosts
        words = list(hosts.program_words) if hosts is not None else list(self.plan.program.argv)
        f = self.plan.faults
        faults: dict[str, float | int] = {x.name: getattr(f, x.name) for x in fields(f)}
        for agent in self.agents:
            assert agent.link is not None
            await agent.link.send(control.Launch(
                self.plan.job_id, self.plan.np, agent.nodes, words,
                hosts.module if hosts is not None else None, os.getcwd(), self._host_env(),
                faults, list(self.plan.nicd_args), self.plan.stats_dir is not None,
                self.plan.bind_to, self.plan.nic_priority, float(self.plan.stop_grace),
                float(self.plan.ready_timeout), self.multi_host, self.traces is not None,
            ))  # fmt: skip

    def _host_env(self) -> dict[str, str]:
        """The hosts' variables; ``EMU_FORKSERVER=0`` also tells agents to spawn directly."""
        env = dict(self.plan.env)
        if not self.plan.forkserver:
            env[ENV_FORKSERVER] = "0"
        return env

    async def _send_all(self, message: control.Message) -> None:
        for agent in self.agents:
            if agent.link is not None and not agent.gone.is_set():
                await agent.link.send(message)

    # -- what hosts say -------------------------------------------------------------------

    def on_message(self, agent: Agent, m: control.Message) -> None:
        """Act on one message from ``agent`` (never blocks)."""
        mine = getattr(m, "node", agent.nodes[0] if agent.nodes else 0) in agent.nodes
        if isinstance(m, control.Output) and mine:
            self._output(m)
        elif isinstance(m, control.Exit) and mine:
            self._on_exit(agent, m)
        elif isinstance(m, control.Ready) and mine:
            self._on_ready(agent, m)
        elif isinstance(m, control.RoutesOk):
            agent.routes_ok = True
            if all(a.routes_ok for a in self.agents):
                self._routes_done.set()
        elif isinstance(m, control.Failed):
            self.fail(m.code, f"on host {agent.name}: {m.message}" if self.gate.remote
                      else m.message)  # fmt: skip
        elif isinstance(m, control.File):
            self._on_file(agent, m)
        elif isinstance(m, control.Swept):
            self._on_swept(agent, m)
        elif isinstance(m, control.Bye):
            agent.bye = True
        elif isinstance(m, control.TraceFile) and self.traces is not None:
            if not self.traces.write(host_folder(agent.index, agent.name), m.name, m.offset,
                                     m.data):  # fmt: skip
                agent.dropped += 1
        elif isinstance(m, control.ClockPong) and self._pong is not None:
            index, seq, answered, reading = self._pong
            if (index, seq) == (agent.index, m.seq):
                reading.append(m.agent_ns)
                answered.set()
        elif not isinstance(m, control.Ping):
            agent.dropped += 1

    async def _measure_clocks(self) -> None:
        """--trace across hosts: a few ClockPing exchanges with each agent, one at a time."""
        for agent in self.agents:
            samples: list[tuple[int, int, int]] = []
            for seq in range(CLOCK_PINGS):
                if agent.link is None:
                    break
                reading: list[int] = []
                self._pong = (agent.index, seq, trio.Event(), reading)
                sent = time.monotonic_ns()
                await agent.link.send(control.ClockPing(seq))
                with trio.move_on_after(_PONG_WAIT_S):
                    await self._pong[2].wait()
                if not reading:
                    break  # no answer in time: do not hold the job up any longer
                samples.append((sent, reading[0], time.monotonic_ns()))
            self._pong = None
            if samples:
                offset, rtt = offset_from_samples(samples)
                self.clocks[host_folder(agent.index, agent.name)] = {
                    "host": agent.name, "offset_ns": offset, "rtt_ns": rtt,
                    "samples": len(samples), "nodes": agent.nodes,
                }  # fmt: skip
            else:
                self.say(f"no clock reading from {agent.describe()}: its trace is not aligned")

    def _where(self, agent: Agent) -> str:
        return f" on host {agent.name}" if self.gate.remote else ""

    def _on_ready(self, agent: Agent, m: control.Ready) -> None:
        try:
            if self.multi_host:
                host = decode_ready_untrusted(m.line).udp[0]
                if ipaddress.ip_address(host).is_loopback:
                    raise RendezvousError(f"announced loopback {host} in a job across hosts")
            if self.rendezvous.on_line(m.node, m.line):
                self._all_ready.set()
        except (RendezvousError, ValueError) as exc:
            self.fail(EXIT_INTERNAL, f"nicd of node {m.node}{self._where(agent)}: {exc}")
            return
        if not m.realtime and self.priority == "rt":
            self.priority = "nice"  # decided before any host starts: all hosts get niced

    def _output(self, m: control.Output) -> None:
        if m.role == "host" and m.fd in (1, 2):
            prefix = f"[{m.node}] ".encode() if self.plan.tag_output else None
            write_all(m.fd, m.data if prefix is None else tag_lines(m.data, prefix))
        elif m.role == "nicd":
            tag = f"{log_tag(m.node)} " if m.fd == 2 else f"{log_tag(m.node)} stdout: "
            keep = LOG_TAG_START.encode() if m.fd == 2 else b""
            self.relay(tag_lines(m.data, tag.encode(), keep))

    def _on_exit(self, agent: Agent, m: control.Exit) -> None:
        agent.usages.append(ProcessUsage(m.role, m.node, m.pid, m.user_s, m.system_s, m.wall_s,
                                         m.returncode, m.run_delay_s))  # fmt: skip
        what = f"{'rank' if m.role == 'host' else 'nicd of node'} {m.node}{self._where(agent)}"
        text = f"{what} (pid {m.pid}) {describe_exit(m.returncode)}"
        if m.role == "nicd":
            if not m.stopping:
                self._nicd_died.set()
                (self.record if self.plan.fault_tolerant else self.fail)(EXIT_INTERNAL, text)
            return
        self._exited.add(m.node)
        if m.returncode != 0 and not m.stopping:
            self._blaming += 1
            self.nursery.start_soon(self._blame, exit_code_of(m.returncode), text)
        self._check_done()

    async def _blame(self, code: int, text: str) -> None:
        with trio.move_on_after(ROOT_CAUSE_WAIT_S):
            await self._nicd_died.wait()
        (self.record if self.plan.fault_tolerant else self.fail)(code, text)
        self._blaming -= 1
        self._check_done()

    def _check_done(self) -> None:
        # not before every failure is recorded: ending the job cancels a pending _blame
        # every node's host: the job's and those started at run time (`launcher.dynamic`)
        if self._blaming == 0 and all(n in self._exited for a in self.agents for n in a.nodes):
            self._hosts_done.set()

    def _on_file(self, agent: Agent, m: control.File) -> None:
        if self.plan.stats_dir is None or not STATS_FILE.fullmatch(m.name):
            agent.dropped += 1
            return
        with open(os.path.join(self.plan.stats_dir, m.name), "wb") as f:
            f.write(m.data)

    def _on_swept(self, agent: Agent, m: control.Swept) -> None:
        where = self._where(agent)
        if m.killed:
            self.say(f"cleanup{where} killed leftover processes: {', '.join(m.killed)}")
        if m.segments:
            self.say(f"cleanup{where} removed shared-memory segments: {', '.join(m.segments)}")
        for pid in m.survivors:
            self.say(f"process {pid}{where or ' of the job'} survived SIGKILL", always=True)

    # -- signals and stopping ---------------------------------------------------------------

    async def _watch_signals(self, task_status: trio.TaskStatus[None]) -> None:
        with trio.open_signal_receiver(*job_signals()) as signals:
            task_status.started()
            async for signum in signals:
                self._signals += 1
                name = signal.Signals(signum).name
                if self._signals == 1:
                    self.fail(128 + signum, f"got {name}")
                else:
                    self.say(f"got {name} again: killing everything", always=True)
                    await self._send_all(control.Kill())

    async def _stop_all(self) -> None:
        self.stopping = True
        await self._send_all(control.Stop())
        limit = self.plan.stop_grace + BYE_MARGIN_S if self.gate.remote else math.inf
        with trio.move_on_after(limit):
            for agent in self.agents:
                if agent.link is not None:
                    await agent.gone.wait()
        for agent in self.agents:
            if agent.link is not None and not agent.gone.is_set():
                self.say(f"{agent.describe()} did not finish its cleanup", always=True)
        await self.gate.close()

    def _describe_setup(self) -> str:
        if self.priority == "rt":
            prio = f"nicd at SCHED_FIFO {tuning.NICD_RT_PRIORITY}"
        elif self.priority == "nice":
            why = "" if self.plan.nic_priority == "nice" else " (SCHED_FIFO not permitted)"
            prio = f"hosts at nice {tuning.HOST_NICE}{why}"
        else:
            prio = "no priorities"
        setup = f"{prio}; bind-to {self.plan.bind_to}; {planmod.describe_profile(self.plan)}"
        took = time.monotonic() - self.startup.started
        return ready_line(self.plan.job_id, self.plan.np, self.gate.setup(), setup, took)

    def usages(self) -> list[ProcessUsage]:
        """CPU and wall time of every process that has exited: nicds, then hosts, by node."""
        return sorted((u for a in self.agents for u in a.usages),
                      key=lambda u: (u.role != "nicd", u.node))  # fmt: skip


def run_job(plan: LaunchPlan) -> int:
    """Run ``plan`` to its end (on this machine, or on its hosts), report; emurun's exit
    status."""
    started = time.monotonic()
    if plan.stats_dir is not None:
        os.makedirs(plan.stats_dir, exist_ok=True)
    gate: Gate = LocalGate(plan) if plan.hosts is None else AgentGate(plan, plan.hosts)
    refused = gate.prepare()
    if refused is not None:
        return refused
    job = Job(plan, gate)
    try:
        code = trio.run(job.run)
    except KeyboardInterrupt:  # before the signal handler was installed
        code = 128 + signal.SIGINT
    finally:
        gate.release()
    if job.traces is not None:
        assert plan.trace_dir is not None
        write_clocks(plan.trace_dir, job.clocks)
        if job.traces.dropped:
            write_all(2, f"emurun: {job.traces.dropped} trace frames refused\n".encode())
    _report(plan, job, code, time.monotonic() - started)
    return code


def _report(plan: LaunchPlan, job: Job, code: int, wall: float) -> None:
    if plan.cpu_report:
        if job.gate.remote:
            for agent in job.agents:
                write_all(2, f"host {agent.name}:\n{render(agent.usages, wall)}\n".encode())
        else:
            write_all(2, (render(job.usages(), wall) + "\n").encode())
    for line in gauge_verdict(plan, job.usages()):
        write_all(2, f"emurun: {line}\n".encode())
    if plan.stats_dir is None:
        return
    message = None if job.outcome is None else job.outcome.message
    doc = job_json(plan, code, message, job.priority, job.usages(), wall)
    if job.gate.remote:
        doc["hosts"] = [
            {"name": a.name, "hostname": a.hello.hostname if a.hello else None,
             "bind_addr": a.hello.bind_addr if a.hello else None, "nodes": a.nodes}
            for a in job.agents
        ]  # fmt: skip
    with open(os.path.join(plan.stats_dir, "job.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
