"""``Intracomm.Spawn`` / ``Spawn_multiple`` and the spawned side's parent intercommunicator.

The root asks the launcher (`emucluster.mpi.dynamic.client`) to start the commands as new
nodes, joined to the running fabric (their nicds learn every route, the running nicds learn
theirs), as one COMM_WORLD of their own; the answer (the new nodes and the spawn's id, or why
nothing started) reaches every member of the spawning communicator. Then the parents' root and
the children's rank 0 trade over the bootstrap channel (`emucluster.mpi.dynamic.join`) and
both groups agree on the intercommunicator. A child does its side during Init
(`emucluster.mpi.dynamic.world`), so ``Get_parent`` is local, as the standard says.

Info keys read: ``wdir`` (working directory), ``env`` (``NAME=VALUE`` lines, Open MPI's
spelling) and ``path`` (directories searched for the command, ``:``-separated); ``soft``,
``host``, ``hostfile``, ``arch`` and the rest are accepted and ignored (every process runs on
this machine). Errors: nothing is started unless every command can be; the reason is raised
as ERR_SPAWN at every parent, and ``errcodes`` (at the root) holds ERR_SPAWN for each
process asked for.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from emucluster.mpi.collective.calls import internal_allgather
from emucluster.mpi.dynamic import client, wire
from emucluster.mpi.dynamic.join import join, swap_with
from emucluster.mpi.errors import ERR_ARG, ERR_COMM, ERR_ROOT, ERR_SPAWN, SUCCESS
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import Info

if TYPE_CHECKING:
    from emucluster.mpi.comm.comm import Comm
    from emucluster.mpi.comm.intercomm import Intercomm

__all__ = ["parent_of", "spawn", "spawn_multiple"]


def _command(command: object, args: object, maxprocs: object, info: object) -> wire.Command:
    """One command as the launcher takes it (at the root, where the arguments count)."""
    if not isinstance(command, str | os.PathLike) or not os.fspath(command):
        raise MPIException(ERR_SPAWN, f"command {command!r} is not a program name")
    argv = [os.fspath(command)]
    if args is not None:
        if isinstance(args, str | bytes) or not isinstance(args, Sequence):
            raise ValueError(f"args {args!r} is not a sequence of strings")
        argv += [os.fspath(a) for a in args]
    if type(maxprocs) is not int or not 1 <= maxprocs <= wire.MAX_PROCS:
        raise MPIException(ERR_ARG, f"maxprocs {maxprocs!r} is not in 1..{wire.MAX_PROCS}")
    keys = info._d if isinstance(info, Info) and info._d is not None else {}
    env = [tuple(line.split("=", 1)) for line in keys.get("env", "").splitlines() if "=" in line]
    if "path" in keys and "/" not in argv[0]:
        for folder in keys["path"].split(":"):
            candidate = os.path.join(folder, argv[0])
            if os.access(candidate, os.X_OK):
                argv[0] = candidate
                break
    return wire.Command(tuple(argv), maxprocs, keys.get("wdir"),
                        tuple((name, value) for name, value in env))  # fmt: skip


def _ask(comm: Comm, root: int, build: Any) -> tuple[str, int, tuple[int, ...], list[int]]:
    """At the root: build the commands and ask the launcher; at every member: the outcome
    (error, spawn id, new nodes, processes per command)."""
    st = comm._state()
    if st.local is not None:
        raise MPIException(ERR_COMM, "Spawn on an intercommunicator")
    if not 0 <= root < st.size:
        raise MPIException(ERR_ROOT, f"root {root} of {st.size}")
    outcome: tuple[str, int, tuple[int, ...], list[int]] | None = None
    if st.rank == root:
        try:
            commands: tuple[wire.Command, ...] = build()
            counts = [c.maxprocs for c in commands]
            try:
                reply = client.ask(st.runtime.config.run_dir,
                                   wire.Spawn(st.runtime.node, commands), ERR_SPAWN)  # fmt: skip
                outcome = ("", reply.spawn, reply.nodes, counts)
            except MPIException as exc:
                outcome = (str(exc), 0, (), counts)
        except (ValueError, TypeError, MPIException) as exc:
            outcome = (f"{type(exc).__name__}: {exc}", 0, (), [])
            internal_allgather(st, outcome)
            raise
    found = internal_allgather(st, outcome)[root]
    assert found is not None
    return found  # type: ignore[no-any-return]


def _finish(comm: Comm, root: int, outcome: tuple[str, int, tuple[int, ...], list[int]],
            errcodes: list[Any] | None, multiple: bool) -> Intercomm:  # fmt: skip
    error, spawn_id, nodes, counts = outcome
    st = comm._state()
    if errcodes is not None and st.rank == root:
        code = ERR_SPAWN if error else SUCCESS
        errcodes.clear()
        if multiple:
            errcodes.extend([code] * n for n in counts)
        else:
            errcodes.extend([code] * sum(counts))
    if error:
        raise MPIException(ERR_SPAWN, error)
    swap = swap_with(st.runtime, nodes[0], spawn_id)
    return join(st, root, swap)


def spawn(comm: Comm, command: object, args: object = None, maxprocs: object = 1,
          info: object = None, root: int = 0,
          errcodes: list[Any] | None = None) -> Intercomm:  # fmt: skip
    """``Intracomm.Spawn`` (collective over ``comm``; the arguments count at ``root``)."""
    outcome = _ask(comm, root, lambda: (_command(command, args, maxprocs, info),))
    return _finish(comm, root, outcome, errcodes, multiple=False)


def spawn_multiple(comm: Comm, command: object, args: object = None, maxprocs: object = None,
                   info: object = None, root: int = 0,
                   errcodes: list[Any] | None = None) -> Intercomm:  # fmt: skip
    """``Intracomm.Spawn_multiple``: one COMM_WORLD of every command's processes."""

    def build() -> tuple[wire.Command, ...]:
        if isinstance(command, str | bytes) or not isinstance(command, Sequence):
            raise ValueError("command is not a sequence of program names")
        n = len(command)
        arglist = [None] * n if args is None else args
        if not isinstance(arglist, Sequence) or len(arglist) != n:
            raise ValueError(f"args is not a sequence of {n} argument lists")
        if any(isinstance(a, str | bytes) for a in arglist):
            raise ValueError("args is not a sequence of argument lists")
        counts = (
            [1 if maxprocs is None else maxprocs] * n
            if not isinstance(maxprocs, Sequence)
            else maxprocs
        )
        if not isinstance(counts, Sequence) or len(counts) != n:
            raise ValueError(f"maxprocs is not a sequence of {n} counts")
        infos = [info] * n if info is None or isinstance(info, Info) else info
        if not isinstance(infos, Sequence) or len(infos) != n:
            raise ValueError(f"info is not one Info or a sequence of {n}")
        return tuple(_command(*four) for four in zip(command, arglist, counts, infos,
                                                     strict=True))  # fmt: skip

    outcome = _ask(comm, root, build)
    return _finish(comm, root, outcome, errcodes, multiple=True)


def parent_of(world: Comm, spawn_id: int, root_node: int) -> Intercomm:
    """In a spawned process, at Init: the intercommunicator to the group that spawned this
    COMM_WORLD (collective over it and the parents)."""
    st = world._state()
    return join(st, 0, swap_with(st.runtime, root_node, spawn_id))
