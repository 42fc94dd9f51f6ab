"""What a communicator is underneath: its context ids, its ranks' nodes, this rank."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from emucluster.mpi.errhandler import ERRORS_RETURN

if TYPE_CHECKING:
    from emucluster.mpi.errhandler import Handler
    from emucluster.mpi.runtime import Runtime
    from emucluster.mpi.topo.topology import Topology

__all__ = ["COLL_SEQ_MOD", "CommState"]

COLL_SEQ_MOD = 1 << 21  # collective calls numbered modulo this in wire tags (see collectives)


class CommState:
    """One communicator's state, shared by every Comm handle that refers to it."""

    __slots__ = (
        "acked", "agreements", "attrs", "coll_seq", "context", "errhandler", "info", "local",
        "locks", "name", "nodes", "rank", "runtime", "size", "topo",
    )  # fmt: skip

    def __init__(self, runtime: Runtime, context: int, nodes: tuple[int, ...], rank: int,
                 name: str = "") -> None:  # fmt: skip
        self.runtime = runtime
        """The rank's library instance: its engine, settings and context ids."""
        self.context = context
        """Point-to-point context id (even); collectives use ``context + 1``."""
        self.nodes = nodes
        """Node id (COMM_WORLD rank) of each rank (of the remote group, for an
        intercommunicator)."""
        self.rank = rank
        """This process's rank."""
        self.size = len(nodes)
        """Number of ranks."""
        self.name = name
        """The name set by Set_name."""
        self.coll_seq = 0
        """Collective calls started on this communicator (every member counts alike)."""
        self.topo: Topology | None = None
        """The virtual topology attached by Create_cart/graph/dist_graph (None: none)."""
        self.attrs: dict[int, object] = {}
        """Attribute values by keyval (Set_attr)."""
        self.errhandler: Handler = ERRORS_RETURN._handler().acquire()
        """The error handler Call_errhandler runs (a counted reference)."""
        self.local: CommState | None = None
        """For an intercommunicator, an intracommunicator state of the local group (the
        library's own agreements run over it); None for an intracommunicator."""
        self.info: dict[str, str] = {}
        """Hints set by Set_info / Dup_with_info (kept, never acted on)."""
        self.agreements = 0
        """ULFM agreements (Agree, Shrink) started on this communicator (`emucluster.mpi.ft`)."""
        self.acked = 0
        """Failures acknowledged by ``Ack_failed``: the first ``acked`` of ``Get_failed``."""
        self.locks: dict[str, threading.Lock] = {}
        """One lock per lowercase collective, taken for the call, so threads of one process
        never interleave two of the same kind on this communicator (mpi4py's lock table)."""

    def lock(self, operation: str) -> threading.Lock:
        """The lock of ``operation`` (made at first use)."""
        lock = self.locks.get(operation)
        if lock is None:
            lock = self.locks.setdefault(operation, threading.Lock())
        return lock
