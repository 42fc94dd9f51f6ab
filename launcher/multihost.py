"""emurun over several hosts: start (or wait for) one agent per host, hand each its nodes,
run the same rendezvous and routing table as on one machine, and apply the same rules.

Phases (as supervise.Job): agents dial in and prove the token -> Launch -> one Ready per
node -> Routes to every agent -> RoutesOk from all -> Start(priority) -> Output/Exit until
every rank exited or the first failure -> Stop -> Swept, Bye. The exit table is today's
(the first failing rank's code, 124 on --timeout, 125 when the emulated cluster fails, a
nicd death blamed before its rank, 128+N after a signal) plus EXIT_LOST_HOST when an agent is
lost (connection closed, silent, or never came), naming the host and its nodes.

Invariants: an agent is obeyed only after the handshake; a message about a node that is not
the agent's is counted and dropped; every wait has a limit; whatever ends the job, the
shielded stop runs: Stop to every agent, wait for their Bye, stop the launchers.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import fields
from typing import TYPE_CHECKING

import trio

from launcher import control, hostfile
from launcher import plan as planmod
from launcher.agent.nodes import STATS_FILE
from launcher.channel import Channel, accept_agent
from launcher.children import (
    LineReader,
    describe_exit,
    exit_code_of,
    job_signals,
    tag_lines,
    write_all,
)
from launcher.control import ControlError
from launcher.errors import EXIT_INTERNAL, EXIT_LOST_HOST, EXIT_TIMEOUT, LaunchError
from launcher.forkclient import ENV_FORKSERVER
from launcher.remote import Agent, read_token
from launcher.rendezvous import Rendezvous
from launcher.report import ProcessUsage, job_json, render
from launcher.starters import Starter, agent_words, reach_address
from nicd.ready import LOG_TAG_START, decode_ready_untrusted, log_tag

if TYPE_CHECKING:
    from launcher.plan import HostsPlan, LaunchPlan

__all__ = ["run_multi"]

_HANDSHAKE_S = 30.0
_HEARTBEAT_S = 2.0
_HEARTBEAT_TIMEOUT_S = 60.0
_ROUTES_TIMEOUT_S = 60.0
_BYE_MARGIN_S = 30.0
_ROOT_CAUSE_WAIT_S = 0.2
_LAUNCHER_EXIT_S = 10.0


class MultiJob:
    """One run of a multi-host plan."""

    def __init__(self, plan: LaunchPlan, hosts: HostsPlan, token: bytes) -> None:
        self.plan = plan
        self.hp = hosts
        self.token = token
        self.rendezvous = Rendezvous(plan.np)
        self.agents: list[Agent] = []
        self.outcome: tuple[int, str] | None = None
        self.priority = plan.nic_priority
        self.run_scope = trio.CancelScope()
        self.multi_host = False
        self._all_connected = trio.Event()
        self._all_ready = trio.Event()
        self._routes_done = trio.Event()
        self._hosts_done = trio.Event()
        self._nicd_died = trio.Event()
        self._exited: set[int] = set()
        self._signals = 0
        self._stopping = False
        self._nursery: trio.Nursery
        if hosts.launcher != "none":
            ranks = hostfile.map_ranks(hosts.hosts, plan.np, hosts.map_by)
            for spec, nodes in zip(hosts.hosts, ranks, strict=True):
                if nodes:
                    self.agents.append(Agent(len(self.agents), spec.name, nodes, spec.slots))

    # -- the job --------------------------------------------------------------------------

    def fail(self, code: int, message: str) -> None:
        """Record the first failure, say it, stop the job; later ones are ignored."""
        if self.outcome is not None:
            return
        self.outcome = (code, message)
        verb = "stopping the job" if not self._hosts_done.is_set() else "job stopped"
        self.say(f"{message}; {verb}", always=True)
        self.run_scope.cancel()

    def say(self, text: str, *, always: bool = False) -> None:
        """One ``emurun: ...`` line on stderr."""
        if always or not self.plan.quiet:
            write_all(2, f"emurun: {text}\n".encode())

    async def run(self) -> int:
        """Run the job to its end; emurun's exit status."""
        listen_host, port = self._listen_address()
        listeners = await trio.open_tcp_listeners(port, host=listen_host)
        bound = listeners[0].socket.getsockname()
        reach = listen_host
        if reach in ("0.0.0.0", "") and self.agents:  # listening everywhere: tell agents one
            reach = reach_address(self.agents[0].name)
        connect = f"{reach}:{bound[1]}"
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self._watch_signals)
            if self.plan.timeout is not None:
                self.run_scope.deadline = trio.current_time() + self.plan.timeout
            try:
                with self.run_scope:
                    nursery.start_soon(self._serve, listeners, nursery)
                    nursery.start_soon(self._heartbeat)
                    self.say(f"job {self.plan.job_id}: waiting for agents at {connect}")
                    await self._start_launchers(nursery, connect)
                    if await self._wait(self._all_connected, self.hp.agent_timeout, "connect"):
                        await self._launch()
                    if await self._wait(self._all_ready, self.plan.ready_timeout, "ready"):
                        await self._send_all(
                            control.Routes(
                                [[n, h, p] for n, (h, p) in self.rendezvous.routes().items()]
                            )
                        )
                    if await self._wait(self._routes_done, _ROUTES_TIMEOUT_S, "routes"):
                        self.say(self._describe_setup())
                        await self._send_all(control.Start(self.priority))
                        await self._hosts_done.wait()
                if self.run_scope.cancelled_caught and self.outcome is None:
                    self.fail(EXIT_TIMEOUT, f"timed out after {self.plan.timeout:g} s")
            finally:
                with trio.CancelScope(shield=True):
                    await self._stop_all()
                    nursery.cancel_scope.cancel()
        return 0 if self.outcome is None else self.outcome[0]

    async def _wait(self, event: trio.Event, limit_s: float, phase: str) -> bool:
        if self.outcome is not None:
            return False
        with trio.move_on_after(limit_s):
            await event.wait()
        if event.is_set():
            return self.outcome is None
        if phase == "connect":
            missing = [a.describe() for a in self.agents if not a.connected.is_set()]
            if self.hp.launcher == "none":
                missing = [f"{self.hp.agents - len(self.agents)} of {self.hp.agents} agents"]
            self.fail(EXIT_LOST_HOST, f"{'; '.join(missing)} never connected within "
                      f"{limit_s:g} s")  # fmt: skip
        elif phase == "ready":
            nodes = ", ".join(map(str, self.rendezvous.missing()))
            self.fail(EXIT_INTERNAL, f"no NICD_READY from nodes {nodes} within {limit_s:g} s")
        else:
            late = [a.describe() for a in self.agents if not a.routes_ok]
            self.fail(EXIT_INTERNAL, f"routes not installed on {'; '.join(late)}")
        return False

    def _listen_address(self) -> tuple[str, int]:
        if self.hp.listen is not None:
            host, _, port = self.hp.listen.rpartition(":")
            return host.strip("[]"), int(port)
        return reach_address(self.agents[0].name), 0

    # -- agents ---------------------------------------------------------------------------

    async def _start_launchers(self, nursery: trio.Nursery, connect: str) -> None:
        if self.hp.launcher == "none":
            return
        starter = Starter(self.hp.launcher, self.hp.exec_cmd)
        for agent in self.agents:
            words = agent_words(self.hp.agent_cmd, connect, agent.index, agent.name,
                                self.plan.quiet)  # fmt: skip
            argv = starter.argv(agent.name, words)
            try:
                proc = await trio.lowlevel.open_process(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, process_group=0,
                )  # fmt: skip
            except OSError as exc:
                self.fail(EXIT_LOST_HOST, f"cannot start the agent of {agent.describe()}: {exc}")
                return
            agent.launcher = proc
            assert proc.stdin is not None
            assert proc.stdout is not None
            assert proc.stderr is not None
            try:
                await proc.stdin.send_all(self.token + b"\n")
                await proc.stdin.aclose()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            nursery.start_soon(self._relay, proc.stdout)
            nursery.start_soon(self._relay, proc.stderr)
            nursery.start_soon(self._watch_launcher, agent, proc)

    async def _relay(self, stream: trio.abc.ReceiveStream) -> None:
        reader = LineReader(stream)
        while (block := await reader.read_lines()) is not None:
            write_all(2, block)

    async def _watch_launcher(self, agent: Agent, proc: trio.Process) -> None:
        code = await proc.wait()
        if not agent.connected.is_set() and not self._stopping:
            self.fail(EXIT_LOST_HOST, f"the agent of {agent.describe()} never connected: "
                      f"its launcher {describe_exit(code)}")  # fmt: skip

    async def _serve(self, listeners: list[trio.SocketListener], nursery: trio.Nursery) -> None:
        await trio.serve_listeners(self._on_connect, listeners, handler_nursery=nursery)

    async def _on_connect(self, stream: trio.SocketStream) -> None:
        channel = Channel(stream)
        peer = stream.socket.getpeername()[0]
        try:
            hello = await accept_agent(channel, self.token, _HANDSHAKE_S)
        except ControlError as exc:
            self.say(f"refused a connection from {peer}: {exc}", always=True)
            await channel.aclose()
            return
        agent = self._adopt(hello)
        if agent is None:
            self.say(f"refused agent {hello.name!r} from {peer}: not expected", always=True)
            await channel.aclose()
            return
        agent.channel, agent.hello = channel, hello
        agent.connected.set()
        if all(a.connected.is_set() for a in self.agents) and (
            self.hp.launcher != "none" or len(self.agents) == self.hp.agents
        ):
            self._all_connected.set()
        try:
            await self._receive(agent, channel)
        finally:
            agent.gone.set()
            if not agent.bye:
                self.fail(EXIT_LOST_HOST, f"lost {agent.describe()}: connection closed")
            await channel.aclose()

    def _adopt(self, hello: control.Hello) -> Agent | None:
        if self.hp.launcher == "none":
            if len(self.agents) >= self.hp.agents or self._all_connected.is_set():
                return None
            agent = Agent(len(self.agents), hello.name or hello.hostname, [], hello.slots)
            self.agents.append(agent)
            return agent
        if 0 <= hello.agent_id < len(self.agents):
            agent = self.agents[hello.agent_id]
            if not agent.connected.is_set():
                return agent
        return None

    async def _launch(self) -> None:
        if self.hp.launcher == "none":  # map once every agent is in, in a stable order
            self.agents.sort(key=lambda a: (a.name, a.hello.pid if a.hello else 0))
            specs = [hostfile.HostSpec(a.name, a.slots) for a in self.agents]
            try:
                ranks = hostfile.map_ranks(specs, self.plan.np, self.hp.map_by)
            except Exception as exc:
                self.fail(EXIT_INTERNAL, str(exc))
                return
            for agent, nodes in zip(self.agents, ranks, strict=True):
                agent.nodes = nodes
        addrs = [ipaddress.ip_address(a.hello.bind_addr) for a in self.agents if a.hello]
        self.multi_host = not all(ip.is_loopback for ip in addrs)
        f = self.plan.faults
        faults: dict[str, float | int] = {x.name: getattr(f, x.name) for x in fields(f)}
        for agent in self.agents:
            assert agent.channel is not None
            await agent.channel.send(control.Launch(
                self.plan.job_id, self.plan.np, agent.nodes, list(self.hp.program_words),
                self.hp.module, os.getcwd(), self._host_env(), faults,
                list(self.plan.nicd_args), self.plan.stats_dir is not None, self.plan.bind_to,
                self.plan.nic_priority, float(self.plan.stop_grace),
                float(self.plan.ready_timeout), self.multi_host,
            ))  # fmt: skip

    def _host_env(self) -> dict[str, str]:
        """The hosts' variables; ``EMU_FORKSERVER=0`` also tells agents to spawn directly."""
        env = dict(self.plan.env)
        if not self.plan.forkserver:
            env[ENV_FORKSERVER] = "0"
        return env

    async def _send_all(self, message: control.Message) -> None:
        for agent in self.agents:
            if agent.channel is not None and not agent.gone.is_set():
                await agent.channel.send(message)

    async def _receive(self, agent: Agent, channel: Channel) -> None:
        while True:
            try:
                message = await channel.receive()
            except ControlError as exc:
                self.say(f"bad message from {agent.describe()}: {exc}", always=True)
                return
            if message is None:
                return
            self._dispatch(agent, message)
            if isinstance(message, control.Bye):
                return

    def _dispatch(self, agent: Agent, m: control.Message) -> None:
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
            self.fail(m.code, f"on host {agent.name}: {m.message}")
        elif isinstance(m, control.File):
            self._on_file(agent, m)
        elif isinstance(m, control.Swept):
            self._on_swept(agent, m)
        elif isinstance(m, control.Bye):
            agent.bye = True
        elif not isinstance(m, control.Ping):
            agent.dropped += 1

    def _on_ready(self, agent: Agent, m: control.Ready) -> None:
        from launcher.errors import RendezvousError

        try:
            if self.multi_host:
                host = decode_ready_untrusted(m.line).udp[0]
                if ipaddress.ip_address(host).is_loopback:
                    raise RendezvousError(f"announced loopback {host} in a job across hosts")
            if self.rendezvous.on_line(m.node, m.line):
                self._all_ready.set()
        except (RendezvousError, ValueError) as exc:
            self.fail(EXIT_INTERNAL, f"nicd of node {m.node} on host {agent.name}: {exc}")
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
            write_all(2, tag_lines(m.data, tag.encode(), keep))

    def _on_exit(self, agent: Agent, m: control.Exit) -> None:
        agent.usages.append(ProcessUsage(m.role, m.node, m.pid, m.user_s, m.system_s, m.wall_s,
                                         m.returncode))  # fmt: skip
        what = f"{'rank' if m.role == 'host' else 'nicd of node'} {m.node} on host {agent.name}"
        text = f"{what} (pid {m.pid}) {describe_exit(m.returncode)}"
        if m.role == "nicd":
            if not m.stopping:
                self._nicd_died.set()
                self.fail(EXIT_INTERNAL, text)
            return
        self._exited.add(m.node)
        if m.returncode != 0 and not m.stopping:
            self._nursery.start_soon(self._blame, exit_code_of(m.returncode), text)
        if len(self._exited) == self.plan.np:
            self._hosts_done.set()

    async def _blame(self, code: int, text: str) -> None:
        with trio.move_on_after(_ROOT_CAUSE_WAIT_S):
            await self._nicd_died.wait()
        self.fail(code, text)

    def _on_file(self, agent: Agent, m: control.File) -> None:
        if self.plan.stats_dir is None or not STATS_FILE.fullmatch(m.name):
            agent.dropped += 1
            return
        with open(os.path.join(self.plan.stats_dir, m.name), "wb") as f:
            f.write(m.data)

    def _on_swept(self, agent: Agent, m: control.Swept) -> None:
        if m.killed:
            self.say(f"cleanup on host {agent.name} killed leftover processes: "
                     f"{', '.join(m.killed)}")  # fmt: skip
        if m.segments:
            self.say(f"cleanup on host {agent.name} removed segments: {', '.join(m.segments)}")
        for pid in m.survivors:
            self.say(f"process {pid} on host {agent.name} survived SIGKILL", always=True)

    async def _heartbeat(self) -> None:
        while True:
            await trio.sleep(_HEARTBEAT_S)
            for agent in self.agents:
                channel = agent.channel
                if channel is None or agent.gone.is_set():
                    continue
                if trio.current_time() - channel.last_heard > _HEARTBEAT_TIMEOUT_S:
                    self.fail(EXIT_LOST_HOST, f"lost {agent.describe()}: silent for "
                              f"{_HEARTBEAT_TIMEOUT_S:g} s")  # fmt: skip
                    await channel.aclose()
                else:
                    await channel.send(control.Ping())

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
        self._stopping = True
        await self._send_all(control.Stop())
        with trio.move_on_after(self.plan.stop_grace + _BYE_MARGIN_S):
            for agent in self.agents:
                if agent.channel is not None:
                    await agent.gone.wait()
        for agent in self.agents:
            if agent.channel is not None and not agent.gone.is_set():
                self.say(f"{agent.describe()} did not finish its cleanup", always=True)
        launchers = [a.launcher for a in self.agents if a.launcher is not None]
        with trio.move_on_after(_LAUNCHER_EXIT_S):
            for proc in launchers:
                await proc.wait()
        for proc in launchers:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()

    def _describe_setup(self) -> str:
        prio = {"rt": "nicd at SCHED_FIFO", "nice": "hosts niced", "none": "no priorities"}
        where = ", ".join(f"{a.name}={a.hello.bind_addr if a.hello else '?'}:{len(a.nodes)}"
                          for a in self.agents)  # fmt: skip
        return (f"job {self.plan.job_id}: {self.plan.np} nodes ready on {len(self.agents)} "
                f"hosts ({where}); {prio.get(self.priority, self.priority)}; "
                f"{planmod.describe_profile(self.plan)}")  # fmt: skip


def run_multi(plan: LaunchPlan) -> int:
    """Run a multi-host ``plan`` to its end; report; emurun's exit status."""
    assert plan.hosts is not None
    started = time.monotonic()
    if plan.stats_dir is not None:
        os.makedirs(plan.stats_dir, exist_ok=True)
    try:
        token = read_token(plan.hosts.token_file)
    except OSError as exc:
        write_all(2, f"emurun: --token-file: {exc}\n".encode())
        return EXIT_INTERNAL
    job_dir = tempfile.mkdtemp(prefix=f"emurun-{plan.job_id}-")
    token_path = os.path.join(job_dir, "token")  # mode 0600 (mkdtemp's dir is 0700)
    with open(os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(token + b"\n")
    job = MultiJob(plan, plan.hosts, token)
    try:
        code = trio.run(job.run)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except OSError as exc:  # the listener could not be opened
        write_all(2, f"emurun: cannot listen for agents: {exc}\n".encode())
        code = EXIT_INTERNAL
    except LaunchError as exc:  # no local address reaches the hosts
        write_all(2, f"emurun: {exc}\n".encode())
        code = exc.exit_code
    finally:
        os.unlink(token_path)
        os.rmdir(job_dir)
    wall = time.monotonic() - started
    if plan.cpu_report:
        for agent in job.agents:
            text = f"host {agent.name}:\n{render(agent.usages, wall)}\n"
            write_all(2, text.encode())
    if plan.stats_dir is not None:
        message = None if job.outcome is None else job.outcome[1]
        usages = [u for a in job.agents for u in a.usages]
        doc = job_json(plan, code, message, job.priority, usages, wall)
        doc["hosts"] = [
            {"name": a.name, "hostname": a.hello.hostname if a.hello else None,
             "bind_addr": a.hello.bind_addr if a.hello else None, "nodes": a.nodes}
            for a in job.agents
        ]  # fmt: skip
        with open(os.path.join(plan.stats_dir, "job.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return code
