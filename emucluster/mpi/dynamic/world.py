"""Init with processes started at run time: COMM_WORLD and COMM_SELF, then, in a process
that ``MPI.Comm.Spawn`` started, the intercommunicator to its parents (``Get_parent``).

The facade's last statement calls `start`. A spawned process joins its parents during Init
(the parents' Spawn waits for that), so ``Comm.Get_parent`` is a local call, as in MPI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.mpi import lifecycle
from emucluster.mpi.comm import kinds
from emucluster.mpi.comm import world as comm_world
from emucluster.mpi.dynamic import ports, spawn

if TYPE_CHECKING:
    from emucluster.mpi.comm.intracomm import Intracomm

__all__ = ["start"]


def start() -> tuple[Intracomm, Intracomm]:
    """Initialise MPI in this process; (COMM_WORLD, COMM_SELF)."""
    world, self_ = comm_world.start()
    kinds.register_dynamic(spawn=spawn.spawn, spawn_multiple=spawn.spawn_multiple,
                           accept=ports.accept, connect=ports.connect,
                           join=ports.join_fd)  # fmt: skip
    parent = lifecycle.current().config.parent
    if parent is not None:
        kinds.set_parent(spawn.parent_of(world, *parent))
    return world, self_
