"""One agent's life: dial emurun (retrying with backoff), prove the token, run the nodes emurun
gives it (:class:`~launcher.agent.nodes.LocalNodes`), obey Stop/Kill, and stop everything
if emurun is lost (connection closed, no heartbeat, a signal).

Invariants: nothing is started before emurun proved it holds the token; whatever ends the
session, the same shielded sequence runs: stop hosts, stop nicds, (ship stats), sweep.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass

import trio

from emutrace.recorder import ENV_TRACE_DIR
from launcher import control
from launcher.agent.nodes import LocalNodes
from launcher.children import write_all
from launcher.control import ControlError
from launcher.errors import EXIT_INTERNAL, LaunchError
from launcher.forkserver.client import ENV_FORKSERVER
from launcher.forkserver.client import enabled as forkserver_enabled
from launcher.multihost.channel import Channel, greet_emurun
from launcher.plan import LaunchPlan, resolve_program
from launcher.tracing import trace_chunks
from nicd import errors as nicd_errors
from nicd.config import FaultConfig
from nicd.core.ready import socket_path
from nicd.shell.lifeline import Lifeline

__all__ = ["AgentOptions", "plan_from_launch", "run_agent"]

HANDSHAKE_S = 30.0
HEARTBEAT_S = 2.0
HEARTBEAT_TIMEOUT_S = 60.0
"""Silence from emurun for this long means it is lost (a 2 s link cut is survived)."""
_SOCKET_PATH_MAX = 107
_BACKOFF_MAX_S = 5.0


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """emuproxy's command line."""

    host: str
    port: int
    token: bytes
    slots: int = 1
    name: str = ""
    bind_addr: str | None = None
    agent_id: int = -1
    connect_timeout: float = 300.0
    quiet: bool = False


class Session:
    """The agent's side of one control connection."""

    def __init__(self, opts: AgentOptions) -> None:
        self.opts = opts
        self.name = opts.name or socket.gethostname()
        self.nodes: LocalNodes | None = None
        self.channel: Channel | None = None
        self.bind_addr = ""
        self.done = trio.Event()
        self.lost: str | None = None
        self.code = 0
        self.trace_dir: str | None = None
        """Where this host's processes record (``emurun --trace``), or None."""
        self.lifeline: Lifeline | None = None
        """Held while nodes run: they stop by themselves if this agent dies (kill -9)."""

    def say(self, text: str, always: bool = True) -> None:
        """One ``emuproxy[name]: ...`` line on stderr (an agent says everything: its
        stderr is emurun's to show)."""
        write_all(2, f"emuproxy[{self.name}]: {text}\n".encode())

    def end(self, lost: str | None, code: int = 0) -> None:
        """End the session (the first reason wins)."""
        if self.done.is_set():
            return
        self.lost, self.code = lost, code
        self.done.set()

    async def dial(self) -> trio.SocketStream:
        """Connect to emurun, retrying with backoff until ``connect_timeout``."""
        deadline = trio.current_time() + self.opts.connect_timeout
        delay, told = 0.1, False
        while True:
            try:
                stream = await trio.open_tcp_stream(self.opts.host, self.opts.port)
            except OSError as exc:
                if trio.current_time() + delay > deadline:
                    raise LaunchError(
                        f"cannot reach emurun at {self.opts.host}:{self.opts.port} within "
                        f"{self.opts.connect_timeout:g} s: {exc}"
                    ) from None
                if not told and not self.opts.quiet:
                    self.say(f"waiting for emurun at {self.opts.host}:{self.opts.port} ({exc})")
                    told = True
                await trio.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX_S)
                continue
            stream.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            return stream

    def _hello(self, nonce: bytes, mac: bytes) -> control.Hello:
        return control.Hello(
            control.VERSION, self.opts.agent_id, self.name, socket.gethostname(), os.getpid(),
            len(os.sched_getaffinity(0)), self.opts.slots, self.bind_addr, nonce, mac,
        )  # fmt: skip

    async def run(self) -> int:
        """The whole session; returns the agent's exit status."""
        stream = await self.dial()
        local_ip = stream.socket.getsockname()[0]
        self.bind_addr = self.opts.bind_addr or str(local_ip)
        self.channel = channel = Channel(stream)
        await greet_emurun(channel, self.opts.token, HANDSHAKE_S, self._hello)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._receive, nursery)
            nursery.start_soon(self._heartbeat)
            nursery.start_soon(self._watch_signals)
            await self.done.wait()
            with trio.CancelScope(shield=True):
                await self._finish()
            if self.lifeline is not None:
                self.lifeline.close()
            nursery.cancel_scope.cancel()
        await channel.aclose()
        return self.code

    async def _finish(self) -> None:
        assert self.channel is not None
        if self.nodes is not None:
            swept = await self.nodes.finish(ship=self.lost is None, then=self._ship_traces)
            if self.lost is not None and (swept.killed or swept.segments):
                self.say(f"cleaned up {', '.join(swept.killed + swept.segments)}")
        else:
            swept = control.Swept([], [], [])
        if self.lost is None:
            await self.channel.send(swept)
            await self.channel.send(control.Bye())
        else:
            self.say(f"{self.lost}: stopped everything")

    async def _receive(self, nursery: trio.Nursery) -> None:
        assert self.channel is not None
        while True:
            try:
                message = await self.channel.receive()
            except ControlError as exc:
                self.end(f"bad message from emurun ({exc})", EXIT_INTERNAL)
                return
            if message is None:
                self.end("lost emurun (connection closed)", EXIT_INTERNAL)
                return
            await self._dispatch(nursery, message)

    async def _dispatch(self, nursery: trio.Nursery, message: control.Message) -> None:
        if isinstance(message, control.Launch) and self.nodes is None:
            await self._launch(nursery, message)
        elif isinstance(message, control.ClockPing) and self.channel is not None:
            await self.channel.send(control.ClockPong(message.seq, time.monotonic_ns()))
        elif isinstance(message, control.Stop | control.Kill):
            if self.nodes is not None:
                self.nodes.obey(nursery, message)
            self.end(None)
        elif isinstance(message, control.Routes | control.Start) and self.nodes is not None:
            self.nodes.obey(nursery, message)
        elif not isinstance(message, control.Ping):
            self.say(f"ignored an unexpected {type(message).TAG} message")

    async def _launch(self, nursery: trio.Nursery, launch: control.Launch) -> None:
        assert self.channel is not None
        try:
            check_bind_addr(self.bind_addr, launch.multi_host)
            run_dir = tempfile.mkdtemp(prefix=f"emuproxy-{launch.job_id[:32]}-")
            plan = plan_from_launch(launch, self.bind_addr, run_dir)
        except (LaunchError, OSError) as exc:
            code = exc.exit_code if isinstance(exc, LaunchError) else EXIT_INTERNAL
            await self.channel.send(control.Failed(code, str(exc)))
            return
        if launch.trace:  # the children inherit it (LocalNodes copies our environment)
            self.trace_dir = os.environ[ENV_TRACE_DIR] = os.path.join(run_dir, "trace")
        else:
            os.environ.pop(ENV_TRACE_DIR, None)
        marker = f"{plan.job_id}.{os.getpid()}"
        self.lifeline = Lifeline.create()
        self.nodes = LocalNodes(plan, list(launch.nodes), run_dir, marker, self.channel.send,
                                self.say, lifeline=self.lifeline)  # fmt: skip
        if launch.nodes and len(socket_path(run_dir, max(launch.nodes))) > _SOCKET_PATH_MAX:
            await self.channel.send(
                control.Failed(EXIT_INTERNAL, f"run directory {run_dir} too long: shorten TMPDIR")
            )
            return
        nursery.start_soon(self.nodes.start_nicds, nursery)

    async def _ship_traces(self) -> None:
        """--trace: send every recording written here to emurun, in pieces."""
        assert self.channel is not None
        if self.trace_dir is None:
            return
        pieces = await trio.to_thread.run_sync(lambda: list(trace_chunks(self.trace_dir or "")))
        for name, offset, data in pieces:
            await self.channel.send(control.TraceFile(name, offset, data))

    async def _heartbeat(self) -> None:
        assert self.channel is not None
        while True:
            await trio.sleep(HEARTBEAT_S)
            if trio.current_time() - self.channel.last_heard > HEARTBEAT_TIMEOUT_S:
                self.end(f"lost emurun (silent for {HEARTBEAT_TIMEOUT_S:g} s)", EXIT_INTERNAL)
                return
            if not await self.channel.send(control.Ping()):
                self.end("lost emurun (connection broken)", EXIT_INTERNAL)
                return

    async def _watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                name = signal.Signals(signum).name
                if self.channel is not None:  # said first: the nodes get the signal too
                    # (Slurm's scancel and time limit signal every process of the step), and
                    # emurun keeps the first reason it hears
                    await self.channel.send(control.Failed(128 + signum, f"emuproxy got {name}"))
                self.end(f"got {name}", 128 + signum)
                return


def check_bind_addr(addr: str, multi_host: bool) -> None:
    """A concrete IPv4 address; not loopback when the job spans hosts."""
    try:
        ip = ipaddress.IPv4Address(addr)
    except ValueError:
        raise LaunchError(f"bind address {addr!r} is not an IPv4 address") from None
    if ip.is_unspecified:
        raise LaunchError(f"bind address {addr} is not a concrete address: pass --bind-addr IP")
    if ip.is_loopback and multi_host:
        raise LaunchError(
            f"bind address {addr} is loopback but the job spans hosts: pass --bind-addr IP"
        )


def plan_from_launch(launch: control.Launch, bind_addr: str, run_dir: str) -> LaunchPlan:
    """The local plan of a Launch message (program resolved on this host, from ``cwd``).
    Raises LaunchError (UsageError, ProgramNotFound) naming what is wrong."""
    bind_ok = launch.bind_to in ("core", "role", "none")
    if not bind_ok or launch.nic_priority not in ("rt", "nice", "none"):
        raise LaunchError(f"bad --bind-to {launch.bind_to!r} or priority {launch.nic_priority!r}")
    if len(set(launch.nodes)) != len(launch.nodes) or any(n >= launch.np for n in launch.nodes):
        raise LaunchError(f"bad node list {launch.nodes!r:.100} for a job of {launch.np}")
    try:
        os.chdir(launch.cwd)
    except OSError as exc:
        raise LaunchError(f"cannot enter the working directory {launch.cwd}: {exc}") from None
    try:
        faults = FaultConfig(**launch.faults)  # type: ignore[arg-type]
    except (TypeError, nicd_errors.UsageError) as exc:
        raise LaunchError(f"bad fault settings: {exc}") from None
    python = sys.executable
    program = resolve_program(
        launch.program, launch.module, python=python, which=shutil.which,
        is_file=os.path.isfile, is_executable=lambda path: os.access(path, os.X_OK),
    )  # fmt: skip
    return LaunchPlan(
        np=launch.np,
        program=program,
        job_id=launch.job_id,
        python=python,
        env=dict(launch.env),
        faults=faults,
        stats_dir=os.path.join(run_dir, "stats") if launch.stats else None,
        bind_to=launch.bind_to,  # type: ignore[arg-type]
        nic_priority=launch.nic_priority,  # type: ignore[arg-type]
        nicd_args=tuple(launch.nicd_args),
        listen_host=bind_addr,
        ready_timeout=launch.ready_timeout,
        stop_grace=launch.stop_grace,
        forkserver=launch.env.get(ENV_FORKSERVER) != "0" and forkserver_enabled(os.environ),
    )


async def run_agent(opts: AgentOptions) -> int:
    """Run one agent session to its end."""
    return await Session(opts).run()
