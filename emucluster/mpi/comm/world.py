"""This process's COMM_WORLD and COMM_SELF, made when the facade initialises MPI.

`start` initialises the library (``emucluster.mpi.lifecycle.init``), builds COMM_WORLD and
COMM_SELF over the process's Runtime, records them (and COMM_NULL, FILE_NULL) as the predefined
handles they pickle as, tells groups which node is local, and installs the ``emurun --trace``
hooks.
"""

from __future__ import annotations

from emucluster.mpi import lifecycle, predefined
from emucluster.mpi.collective.calls import trace_describe
from emucluster.mpi.comm.comm import COMM_NULL
from emucluster.mpi.comm.group import set_local_node
from emucluster.mpi.comm.intracomm import Intracomm, make_world
from emucluster.mpi.io.file import FILE_NULL
from emutrace import mpihooks

__all__ = ["start"]


def start() -> tuple[Intracomm, Intracomm]:
    """Initialise MPI in this process; (COMM_WORLD, COMM_SELF)."""
    rt = lifecycle.init()
    world, self_ = make_world(rt)
    for name, handle in (("COMM_WORLD", world), ("COMM_SELF", self_), ("COMM_NULL", COMM_NULL),
                         ("FILE_NULL", FILE_NULL)):  # fmt: skip
        predefined.register(name, handle)
    set_local_node(rt.node)
    mpihooks.install(Intracomm, rt.node, trace_describe)
    return world, self_
