"""emurun's side of processes started at run time, for a job on this machine: the launcher
socket (``<run dir>/launcher.sock``) that ranks ask, and the new nodes it starts.

A spawn: `SpawnBook` gives node ids and command lines; each new node's nicd is started like
the job's (same fork server, lifeline, job marks, so the warden and the final sweep find it),
its ready line read here; under one lock, the new nicds get the whole table (SET_ROUTES) and
every running nicd the new routes (ADD_ROUTES, `nicd.shell.manage.add_routes`); the new nodes
join the job (their exits count: the job ends when every node's host has exited, and a failing
one stops the job with its code, as mpirun aborts); then their hosts start with the spawn's
place in their environment (`SpawnBook.host_env`). The answer goes back once they are started;
they meet their parents during their Init.

Only `launcher.localhost` serves this; a job over agents does not (ranks there find no socket
and get ERR_SPAWN with the reason, `emucluster.mpi.dynamic.client`).

Invariants: one request per connection, one line each way, bounded (`wire.MAX_LINE`); a bad
request is answered with its error and counted, never crashes the job; nothing is started once
the job is stopping; a spawn that cannot start all of its processes kills the ones it started
(as stopping, not failures) and says why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
from typing import TYPE_CHECKING

import trio

from emucluster.mpi.dynamic import wire
from launcher import control, tuning
from launcher import plan as planmod
from launcher.children import Child, LineReader, spawn
from launcher.dynamic.core import NewNode, SpawnBook, SpawnRefused
from nicd.core.ready import BadReadyLine, decode_ready_untrusted, socket_path
from nicd.shell import manage

if TYPE_CHECKING:
    from launcher.agent.nodes import LocalNodes
    from launcher.hosts import Agent, JobView
    from nicd.core.ready import Address

__all__ = ["DynamicHost"]

_READY_S = 60.0
_ROUTES_S = 30.0


class DynamicHost:
    """Serves the launcher socket of a job on this machine."""

    def __init__(self, job: JobView, agent: Agent, nodes: LocalNodes) -> None:
        self.job = job
        self.agent = agent
        self.nodes = nodes
        self.book = SpawnBook(job.plan)
        self.routes: dict[int, Address] = {}
        """Every node's UDP address: the job's (from its Routes) and the spawned ones."""
        self.path = os.path.join(nodes.run_dir, wire.SOCKET_NAME)
        self.bad_requests = 0
        self._routing = trio.Lock()
        self._nursery: trio.Nursery | None = None

    def set_routes(self, table: list[list[object]]) -> None:
        """The job's routing table (its Routes message)."""
        self.routes.update({int(str(n)): (str(h), int(str(p))) for n, h, p in table})

    async def serve(self, nursery: trio.Nursery) -> None:
        """Listen on the launcher socket until the job ends."""
        self._nursery = nursery
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            await sock.bind(self.path)
            sock.listen(64)
        except OSError as exc:  # ranks then find no socket and say why (ERR_SPAWN)
            sock.close()
            self.job.say(f"no processes can be started at run time: {self.path}: {exc}")
            return
        await trio.serve_listeners(self._handle, [trio.SocketListener(sock)])

    async def _handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            with trio.move_on_after(_READY_S):
                while not data.endswith(b"\n") and len(data) <= wire.MAX_LINE:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        break
                    data += chunk
            try:
                request = wire.decode_request(data)
            except wire.BadMessage as exc:
                self.bad_requests += 1
                reply = wire.Reply(f"bad request: {exc}")
            else:
                if isinstance(request, wire.Spawn):
                    reply = await self._spawn(request)
                else:
                    reply = self.book.name_service(request)
            # the rank may be gone: its own failure ends the job
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(wire.encode(reply))

    # -- a spawn ----------------------------------------------------------------------------

    async def _spawn(self, request: wire.Spawn) -> wire.Reply:
        if self.job.stopping or self._nursery is None:
            return wire.Reply("the job is stopping")
        try:
            spawn_id, new = self.book.plan_spawn(
                request, which=shutil.which, is_file=os.path.isfile,
                is_executable=lambda path: os.access(path, os.X_OK), env_cmd=shutil.which("env"),
            )  # fmt: skip
        except SpawnRefused as exc:
            return wire.Reply(str(exc))
        started: list[Child] = []
        try:
            table = await self._start_nicds(new, started)
            await self._join_fabric(table)
            self.agent.nodes.extend(n.node for n in new)
            await self._start_hosts(new, spawn_id, request.node, started)
        except (OSError, SpawnRefused) as exc:
            for child in started:
                child.stopping = True
                child.signal(signal.SIGKILL, group=child.role == "host")
            return wire.Reply(f"cannot start the spawned nodes: {exc}")
        self.job.say(f"spawned nodes {new[0].node}-{new[-1].node} for node {request.node}")
        return wire.Reply(spawn=spawn_id, nodes=tuple(n.node for n in new))

    def _cpus(self, node: int) -> tuple[frozenset[int] | None, frozenset[int] | None]:
        where = planmod.place(self.job.plan.bind_to, node + 1, tuning.allowed_cpus())[node]
        return where.nicd_cpus, where.host_cpus

    async def _start_nicds(self, new: list[NewNode], started: list[Child]) -> dict[int, Address]:
        plan, local = self.job.plan, self.nodes
        assert self._nursery is not None
        env = planmod.nicd_env(plan, local._base_env())
        table: dict[int, Address] = {}
        failures: list[str] = []
        async with trio.open_nursery() as readies:  # every nicd starts; their lines in parallel
            for one in new:
                argv = planmod.nicd_argv(plan, one.node, local.run_dir)
                cpus = self._cpus(one.node)[0]
                try:
                    child = await spawn("nicd", one.node, argv, env, lifeline=local.lifeline,
                                        forkserver=local.forkserver, cpus=cpus)  # fmt: skip
                except OSError as exc:
                    failures.append(f"cannot start the nicd of node {one.node}: {exc}")
                    break
                started.append(child)
                readies.start_soon(self._ready, one.node, child, table, failures)
        if failures:
            raise SpawnRefused(failures[0])
        return table

    async def _ready(self, node: int, child: Child, table: dict[int, Address],
                     failures: list[str]) -> None:  # fmt: skip
        """Read the ready line of a new nicd into ``table`` (or why not into ``failures``);
        then its output is forwarded and its exit reported like any nicd's."""
        local = self.nodes
        assert self._nursery is not None
        assert child.process.stdout is not None
        reader = LineReader(child.process.stdout)
        block = None
        with trio.move_on_after(_READY_S):
            block = await reader.read_lines()
        line, _, rest = (block or b"").partition(b"\n")
        if rest:  # forwarded before the lines after it
            await local.send(control.Output("nicd", node, 1, rest))
        local.adopt(self._nursery, child, reader)
        try:
            ready = decode_ready_untrusted(line)
        except BadReadyLine as exc:
            failures.append(f"the nicd of node {node} did not announce itself: {exc}")
            return
        if ready.node != node:
            failures.append(f"nicd started as node {node} says {ready.node}")
            return
        if self.job.plan.nic_priority == "rt":
            tuning.make_realtime(child.pid)
        table[node] = ready.udp

    async def _join_fabric(self, added: dict[int, Address]) -> None:
        """The new nicds get the whole table, the running ones the new routes."""
        async with self._routing:
            old = dict(self.routes)
            whole = {**old, **added}
            run_dir = self.nodes.run_dir
            failures: list[str] = []

            async def install(node: int, call: object, routes: dict[int, Address]) -> None:
                path = socket_path(run_dir, node)
                try:
                    await trio.to_thread.run_sync(call, path, routes, _ROUTES_S)  # type: ignore[arg-type]
                except Exception as exc:  # NicdError, OSError
                    failures.append(f"node {node}: {exc}")

            async with trio.open_nursery() as installs:
                for node in added:
                    installs.start_soon(install, node, manage.set_routes, whole)
                for node in old:
                    installs.start_soon(install, node, manage.add_routes, added)
            if failures:
                raise SpawnRefused(f"routes not installed: {failures[0]}")
            self.routes = whole

    async def _start_hosts(self, new: list[NewNode], spawn_id: int, root: int,
                           started: list[Child]) -> None:  # fmt: skip
        local = self.nodes
        assert self._nursery is not None
        for one in new:
            sock = socket_path(local.run_dir, one.node)
            env = self.book.host_env(local._base_env(), one, len(new), spawn_id, root,
                                     local.run_dir, sock)  # fmt: skip
            cpus = self._cpus(one.node)[1]
            child = await spawn("host", one.node, one.argv, env, lifeline=local.lifeline,
                                forkserver=local.forkserver, cpus=cpus)  # fmt: skip
            started.append(child)
            local.adopt(self._nursery, child)
            if self.job.plan.nic_priority == "nice":
                tuning.make_nice(child.pid)
