"""What emurun decides for processes started at run time: node ids and spawn ids, the command
lines and environments of the new hosts, the job's name service, the universe size. Pure.

Invariants: node ids are handed out once, above every node of the job (``-np``) and of every
earlier spawn, up to 65535; a spawn id is never reused; a request either gets every process it
asked for or none (`SpawnBook.plan` raises before anything is allocated); a name is published
once until it is unpublished with the same port.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from emucluster.config import ENV_PARENT, ENV_RANK, ENV_SIZE, ENV_WORLD
from emucluster.mpi.dynamic import wire
from launcher import plan as planmod
from launcher.errors import LaunchError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from launcher.multihost.hostfile import HostSpec

__all__ = ["MAX_NODE", "NewNode", "SpawnBook", "SpawnRefused", "universe_size"]

MAX_NODE = 0xFFFF
"""Largest node id (the wire's 16 bits)."""


class SpawnRefused(Exception):
    """Why a request starts nothing (said to the rank, which raises it as an MPI error)."""


@dataclass(frozen=True, slots=True)
class NewNode:
    """One process of a spawn: its node, its COMM_WORLD rank, what it runs."""

    node: int
    rank: int
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]


def universe_size(np: int, hosts: Sequence[HostSpec] | None, cpus: int) -> int:
    """``MPI.UNIVERSE_SIZE``: the slots of the hosts (one machine: its allowed CPUs), never
    below ``-np``."""
    slots = sum(h.slots for h in hosts) if hosts else cpus
    return max(np, slots)


class SpawnBook:
    """The spawns of one job and its published names."""

    def __init__(self, plan: planmod.LaunchPlan) -> None:
        self.plan = plan
        self.next_node = plan.np
        self.next_spawn = 1
        self.names: dict[str, str] = {}
        self.refused = 0
        """Requests that started nothing (bad input or a command that cannot run)."""

    def plan_spawn(
        self,
        request: wire.Spawn,
        *,
        which: Callable[[str], str | None],
        is_file: Callable[[str], bool],
        is_executable: Callable[[str], bool],
        env_cmd: str | None,
    ) -> tuple[int, list[NewNode]]:
        """The spawn id and the processes of ``request``; SpawnRefused (nothing allocated)
        if a command cannot run or the node ids run out. ``env_cmd``: the ``env`` program,
        which runs a command in its ``wdir`` (``env -C DIR``)."""
        argvs: list[tuple[str, ...]] = []
        for command in request.commands:
            try:
                program = planmod.resolve_program(
                    list(command.argv), None, python=self.plan.python, which=which,
                    is_file=is_file, is_executable=is_executable,
                )  # fmt: skip
            except LaunchError as exc:
                self.refused += 1
                raise SpawnRefused(f"cannot start {command.argv[0]}: {exc}") from None
            argv = program.argv
            if command.wdir is not None:
                if env_cmd is None:
                    raise SpawnRefused("info 'wdir' needs the env program (coreutils)")
                argv = (env_cmd, "-C", command.wdir, *argv)
            argvs.append(argv)
        total = sum(c.maxprocs for c in request.commands)
        if self.next_node + total - 1 > MAX_NODE:
            self.refused += 1
            raise SpawnRefused(f"no node ids left for {total} more processes")
        spawn_id, self.next_spawn = self.next_spawn, self.next_spawn + 1
        first, self.next_node = self.next_node, self.next_node + total
        out: list[NewNode] = []
        for command, argv in zip(request.commands, argvs, strict=True):
            for _ in range(command.maxprocs):
                out.append(NewNode(first + len(out), len(out), argv, command.env))
        return spawn_id, out

    def host_env(self, base: Mapping[str, str], new: NewNode, size: int, spawn_id: int,
                 root: int, run_dir: str, socket: str) -> dict[str, str]:  # fmt: skip
        """The environment of a spawned host: a job host's (`launcher.plan.host_env`), its
        rank and size in its own COMM_WORLD, the nodes of that world, its parents' root and
        the spawn id, then the command's ``env`` info."""
        env = planmod.host_env(self.plan, new.node, run_dir, socket, base)
        first = new.node - new.rank
        env[ENV_RANK] = str(new.rank)
        env[ENV_SIZE] = str(size)
        env[ENV_WORLD] = f"{first}:{size}"
        env[ENV_PARENT] = f"{spawn_id}:{root}"
        env.update(new.env)
        return env

    def name_service(self, request: wire.Publish | wire.Lookup | wire.Unpublish) -> wire.Reply:
        """``Publish_name`` / ``Lookup_name`` / ``Unpublish_name``."""
        if isinstance(request, wire.Lookup):
            port = self.names.get(request.service)
            if port is None:
                return wire.Reply(f"no service {request.service!r} is published")
            return wire.Reply(port=port)
        if isinstance(request, wire.Publish):
            if request.service in self.names:
                return wire.Reply(f"service {request.service!r} is published already")
            self.names[request.service] = request.port
            return wire.Reply()
        if self.names.get(request.service) != request.port:
            return wire.Reply(f"service {request.service!r} is not published at that port")
        del self.names[request.service]
        return wire.Reply()
