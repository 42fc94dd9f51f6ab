"""The hosts of a job across machines: start one agent per host (``--launcher ssh|exec``, or
all of them with one srun step: ``slurm``) or wait for K running ones (``--launcher none``),
accept each after the token handshake, map the ranks, carry the job's messages over TCP both
ways, watch the agents' heartbeat, and stop their launchers at the end. The job itself is
`launcher.job.Job`, as on one machine; the gate sees it as a `launcher.hosts.JobView`.

Invariants: an agent is obeyed only after the handshake; a lost agent (connection closed,
silent, never came, its launcher died first) fails the job with EXIT_LOST_HOST naming it;
the token never appears on a command line (it travels on the launcher's stdin).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import tempfile
from typing import TYPE_CHECKING

import trio

from launcher import control
from launcher.children import LineReader, describe_exit, write_all
from launcher.control import ControlError
from launcher.errors import EXIT_INTERNAL, EXIT_LOST_HOST, LaunchError
from launcher.hosts import Agent
from launcher.multihost import hostfile, slurm
from launcher.multihost.channel import Channel, accept_agent
from launcher.multihost.starters import Starter, agent_words, reach_address

if TYPE_CHECKING:
    from launcher.hosts import JobView
    from launcher.plan import HostsPlan, LaunchPlan

__all__ = ["AgentGate", "read_token"]

_HANDSHAKE_S = 30.0
_HEARTBEAT_S = 2.0
_HEARTBEAT_TIMEOUT_S = 60.0
_LAUNCHER_EXIT_S = 10.0


class AgentGate:
    """The hosts of a multi-host plan, as agents."""

    remote = True

    def __init__(self, plan: LaunchPlan, hosts: HostsPlan) -> None:
        self.plan = plan
        self.hp = hosts
        self.token = b""
        self.agents: list[Agent] = []
        self._job: JobView
        self._token_path: str | None = None
        if hosts.launcher != "none":
            ranks = hostfile.map_ranks(hosts.hosts, plan.np, hosts.map_by)
            for spec, nodes in zip(hosts.hosts, ranks, strict=True):
                if nodes:
                    self.agents.append(Agent(len(self.agents), spec.name, nodes, spec.slots))

    # -- before and after the event loop ------------------------------------------------

    def prepare(self) -> int | None:
        """Read (or make) the job's token and keep a private copy (mode 0600)."""
        try:
            self.token = read_token(self.hp.token_file)
        except OSError as exc:
            write_all(2, f"emurun: --token-file: {exc}\n".encode())
            return EXIT_INTERNAL
        job_dir = tempfile.mkdtemp(prefix=f"emurun-{self.plan.job_id}-")
        self._token_path = os.path.join(job_dir, "token")  # mkdtemp's dir is 0700
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        with open(os.open(self._token_path, flags, 0o600), "wb") as f:
            f.write(self.token + b"\n")
        return None

    def release(self) -> None:
        """Remove the token's copy."""
        if self._token_path is not None:
            os.unlink(self._token_path)
            os.rmdir(os.path.dirname(self._token_path))
            self._token_path = None

    # -- joining ------------------------------------------------------------------------

    async def open(self, job: JobView, nursery: trio.Nursery) -> None:
        """Listen, start the launchers, accept agents (in the background)."""
        self._job = job
        try:
            listen_host, port = await self._listen_address()
            listeners = await trio.open_tcp_listeners(port, host=listen_host)
            reach = listen_host
            if reach in ("0.0.0.0", "") and self.agents:  # listening everywhere: tell one
                reach = reach_address(self.agents[0].name)
        except LaunchError as exc:  # no local address reaches the hosts
            job.fail(exc.exit_code, str(exc))
            return
        except OSError as exc:
            job.fail(EXIT_INTERNAL, f"cannot listen for agents: {exc}")
            return
        connect = f"{reach}:{listeners[0].socket.getsockname()[1]}"
        nursery.start_soon(self._serve, listeners, nursery)
        nursery.start_soon(self._heartbeat)
        job.say(f"job {self.plan.job_id}: waiting for agents at {connect}")
        await self._start_launchers(nursery, connect)

    def missing(self) -> str:
        """The agents that have not connected."""
        if self.hp.launcher == "none":
            return f"{self.hp.agents - len(self.agents)} of {self.hp.agents} agents"
        return "; ".join(a.describe() for a in self.agents if not a.connected.is_set())

    def setup(self) -> str:
        """`` on K hosts (name=addr:nodes, ...)``."""
        where = ", ".join(f"{a.name}={a.hello.bind_addr if a.hello else '?'}:{len(a.nodes)}"
                          for a in self.agents)  # fmt: skip
        return f" on {len(self.agents)} hosts ({where})"

    async def ended_by(self) -> tuple[int, str] | None:
        """Under Slurm: the allocation's end (scancel, time limit, a node lost), if it ended."""
        if self.hp.launcher != "slurm":
            return None
        job_id = slurm.allocation_job_id(os.environ)
        if job_id is None:
            return None
        state = await trio.to_thread.run_sync(slurm.job_state, job_id)
        return slurm.ended_by(job_id, state)

    async def _listen_address(self) -> tuple[str, int]:
        if self.hp.listen is not None:
            host, _, port = self.hp.listen.rpartition(":")
            return host.strip("[]"), int(port)
        target = self.agents[0].name
        if self.hp.launcher == "slurm":  # node names need not resolve; Slurm knows the address
            target = await trio.to_thread.run_sync(slurm.node_address, target)
        return reach_address(target), 0

    async def _start_launchers(self, nursery: trio.Nursery, connect: str) -> None:
        if self.hp.launcher == "none":
            return
        if self.hp.launcher == "slurm":
            argv = slurm.agent_step([a.name for a in self.agents], self.hp.agent_cmd, connect,
                                    self.plan.quiet)  # fmt: skip
            await self._start_launcher(nursery, argv, self.agents)
            return
        starter = Starter(self.hp.launcher, self.hp.exec_cmd)
        for agent in self.agents:
            words = agent_words(self.hp.agent_cmd, connect, agent.index, agent.name,
                                self.plan.quiet)  # fmt: skip
            if not await self._start_launcher(nursery, starter.argv(agent.name, words), [agent]):
                return

    async def _start_launcher(
        self, nursery: trio.Nursery, argv: list[str], agents: list[Agent]
    ) -> bool:
        """Run one launcher (ssh, exec, srun) for ``agents``, the token on its stdin."""
        try:
            proc = await trio.lowlevel.open_process(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, process_group=0,
            )  # fmt: skip
        except OSError as exc:
            who = agents[0].describe() if len(agents) == 1 else f"{len(agents)} hosts"
            self._job.fail(EXIT_LOST_HOST, f"cannot start the agent of {who}: {exc}")
            return False
        for agent in agents:
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
        for agent in agents:
            nursery.start_soon(self._watch_launcher, agent, proc)
        return True

    async def _relay(self, stream: trio.abc.ReceiveStream) -> None:
        reader = LineReader(stream)
        while (block := await reader.read_lines()) is not None:
            self._job.relay(block)

    async def _watch_launcher(self, agent: Agent, proc: trio.Process) -> None:
        code = await proc.wait()
        if not agent.connected.is_set() and not self._job.stopping:
            self._job.fail(EXIT_LOST_HOST, f"the agent of {agent.describe()} never connected: "
                           f"its launcher {describe_exit(code)}")  # fmt: skip

    async def _serve(self, listeners: list[trio.SocketListener], nursery: trio.Nursery) -> None:
        await trio.serve_listeners(self._on_connect, listeners, handler_nursery=nursery)

    async def _on_connect(self, stream: trio.SocketStream) -> None:
        job = self._job
        channel = Channel(stream)
        peer = stream.socket.getpeername()[0]
        try:
            hello = await accept_agent(channel, self.token, _HANDSHAKE_S)
        except ControlError as exc:
            job.say(f"refused a connection from {peer}: {exc}", always=True)
            await channel.aclose()
            return
        agent = self._adopt(hello)
        if agent is None:
            job.say(f"refused agent {hello.name!r} from {peer}: not expected", always=True)
            await channel.aclose()
            return
        agent.link, agent.hello = channel, hello
        agent.connected.set()
        if all(a.connected.is_set() for a in self.agents) and (
            self.hp.launcher != "none" or len(self.agents) == self.hp.agents
        ):
            self._all_joined()
        try:
            await self._receive(agent, channel)
        finally:
            agent.gone.set()
            if not agent.bye:
                job.fail(EXIT_LOST_HOST, f"lost {agent.describe()}: connection closed")
            await channel.aclose()

    def _adopt(self, hello: control.Hello) -> Agent | None:
        if self.hp.launcher == "none":
            if len(self.agents) >= self.hp.agents or self._job.all_connected.is_set():
                return None
            agent = Agent(len(self.agents), hello.name or hello.hostname, [], hello.slots)
            self.agents.append(agent)
            return agent
        if self.hp.launcher == "slurm":  # srun's tasks are known by their node's name
            for agent in self.agents:
                if agent.name == hello.name and not agent.connected.is_set():
                    return agent
            return None
        if 0 <= hello.agent_id < len(self.agents):
            agent = self.agents[hello.agent_id]
            if not agent.connected.is_set():
                return agent
        return None

    def _all_joined(self) -> None:
        if self.hp.launcher == "none":  # map once every agent is in, in a stable order
            self.agents.sort(key=lambda a: (a.name, a.hello.pid if a.hello else 0))
            specs = [hostfile.HostSpec(a.name, a.slots) for a in self.agents]
            try:
                ranks = hostfile.map_ranks(specs, self.plan.np, self.hp.map_by)
            except Exception as exc:
                self._job.fail(EXIT_INTERNAL, str(exc))
                return
            for agent, nodes in zip(self.agents, ranks, strict=True):
                agent.nodes = nodes
        self._job.all_connected.set()

    async def _receive(self, agent: Agent, channel: Channel) -> None:
        while True:
            try:
                message = await channel.receive()
            except ControlError as exc:
                self._job.say(f"bad message from {agent.describe()}: {exc}", always=True)
                return
            if message is None:
                return
            self._job.on_message(agent, message)
            if isinstance(message, control.Bye):
                return

    async def _heartbeat(self) -> None:
        while True:
            await trio.sleep(_HEARTBEAT_S)
            for agent in self.agents:
                channel = agent.link
                if not isinstance(channel, Channel) or agent.gone.is_set():
                    continue
                if trio.current_time() - channel.last_heard > _HEARTBEAT_TIMEOUT_S:
                    self._job.fail(EXIT_LOST_HOST, f"lost {agent.describe()}: silent for "
                                   f"{_HEARTBEAT_TIMEOUT_S:g} s")  # fmt: skip
                    await channel.aclose()
                else:
                    await channel.send(control.Ping())

    # -- the end ------------------------------------------------------------------------

    async def close(self) -> None:
        """Wait a little for the launchers (ssh, srun ...) to exit, then stop their groups:
        SIGTERM (srun passes it to its tasks and ends the step), SIGKILL after the grace."""
        launchers = list({id(a.launcher): a.launcher for a in self.agents if a.launcher}.values())
        with trio.move_on_after(_LAUNCHER_EXIT_S):
            for proc in launchers:
                await proc.wait()
        for sig, grace in ((signal.SIGTERM, self.plan.stop_grace), (signal.SIGKILL, None)):
            left = [proc for proc in launchers if proc.returncode is None]
            for proc in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
            with trio.move_on_after(_LAUNCHER_EXIT_S if grace is None else grace):
                for proc in left:
                    await proc.wait()


def read_token(path: str | None) -> bytes:
    """The job's token from ``path`` (stripped), or a fresh random one if None."""
    if path is None:
        return secrets.token_hex(16).encode()
    with open(path, "rb") as f:
        token = f.read(4096).strip()
    if not token:
        raise OSError(f"{path}: no token in it")
    return token
