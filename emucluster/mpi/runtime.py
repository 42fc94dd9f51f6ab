"""One rank's MPI library instance: its progress engine, its settings and its context ids.

A `Runtime` is what every communicator of a rank shares (``CommState.runtime``): the engine a
call posts its operations to, the ``HostConfig`` read from the environment, the context-id
pairs still free in this process, and COMM_WORLD's state. Nothing here is global: the process
lifecycle (``emucluster.mpi.lifecycle``) opens one Runtime at ``import emucluster.MPI``, and an
in-process harness may build several, one per emulated rank, over simulated NICs.

Context ids: a communicator owns a pair (point-to-point traffic on the even id, collectives on
the odd one). Pairs 0 (COMM_WORLD) and 1 (COMM_SELF) are taken from the start; new pairs are
agreed collectively (every member contributes `free_context_mask`, an allreduce ANDs them, all
`claim_context` the lowest common one), and a freed communicator's pair comes back through
`release_context` once its pending operations ended (``emucluster.mpi.comm.free``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.mpi.comm import free as commfree
from emucluster.mpi.errors import ERR_OTHER
from emucluster.mpi.errors import Exception as MPIException
from emucluster.offload import shells
from emucluster.offload.app_bypass import shell as appbypass
from emucluster.offload.nic_mcast import shell as mcast
from emucluster.p2p.protocol import P2P
from emucluster.port.client import Port, PortError
from emucluster.port.progress import MPI_PORT, Progress

if TYPE_CHECKING:
    from emucluster.config import HostConfig
    from emucluster.mpi.comm.state import CommState

__all__ = ["FT_WATCH_S", "MAX_CONTEXT_PAIRS", "Runtime", "open_runtime"]

MAX_CONTEXT_PAIRS = 4096  # communicators alive at once in one rank (context id pairs)
FT_WATCH_S = 0.5
"""``emurun --with-ft ulfm``: a wait with no event for this long probes the nodes it awaits."""
_LASTING_PAIRS = 0b11  # pairs 0 (WORLD) and 1 (SELF): never freed


class Runtime:
    """One rank's library instance, shared by every communicator of the rank."""

    __slots__ = ("_free_contexts", "config", "engine", "world")

    def __init__(self, engine: Progress, config: HostConfig) -> None:
        self.engine = engine
        """The rank's progress engine: every operation is posted to it."""
        self.config = config
        """The settings read from the environment (``emucluster.config``)."""
        self.world: CommState | None = None
        """COMM_WORLD's state, once `make_world` built it (Create_from_group agrees over it)."""
        self._free_contexts = (1 << MAX_CONTEXT_PAIRS) - 1 - _LASTING_PAIRS

    @property
    def node(self) -> int:
        """This rank's node id (its COMM_WORLD rank)."""
        return self.engine.node

    @property
    def num_nodes(self) -> int:
        """Nodes in the job (COMM_WORLD's size)."""
        return self.engine.num_nodes

    # -- context ids ----------------------------------------------------------------------------

    def free_context_mask(self) -> int:
        """Bit k set: context-id pair k (ids 2k, 2k+1) is free in this rank. Progress is made
        first, so a freed communicator whose last pending operation ended meanwhile gives its
        pair back before the mask is read."""
        if self.engine.advancing:
            self.engine.progress()
        return self._free_contexts

    def claim_context(self, mask: int) -> int:
        """Given the AND of every member's free mask, claim the lowest pair; its p2p context."""
        if not mask:
            raise MPIException(ERR_OTHER, "out of communicator context ids")
        pair = (mask & -mask).bit_length() - 1
        self._free_contexts &= ~(1 << pair)
        return 2 * pair

    def release_context(self, context: int) -> None:
        """A communicator was freed: its context pair may be reused, so the offloads that keep
        state per context at the NICs (NIC multicast groups, NICVM communicator maps) let the
        collective context (``context + 1``) go first."""
        if context >= 4:
            shell = mcast.active()
            if shell is not None and shell.engine is self.engine:
                shell.release(context + 1)
            shells.release_nicvm(context + 1)
            self._free_contexts |= 1 << (context // 2)

    # -- statistics -----------------------------------------------------------------------------

    def stats(self) -> dict[str, object]:
        """This rank's matching-queue statistics and protocol counters (JSON-able).

        ``matching`` holds the Matcher's `MatchStats` (queue lengths and maxima, mean and max
        search depth of both queues, the unexpected ratio); ``protocol`` the eager/rendezvous
        counters; ``dropped`` messages ignored as malformed; ``app_bypass`` the
        application-bypass reduce counters; ``mcast`` the NIC-multicast shell's; ``comm_free``
        the communicators freed, those freed with operations pending (their context id given
        back later) and those still waiting.
        """
        progress = self.engine
        out: dict[str, object] = {"rank": progress.node, "events": progress.events}
        out.update(progress.stats())
        bypass = appbypass.active()
        if bypass is not None and bypass.engine is progress:
            out["app_bypass"] = bypass.stats()
        shell = mcast.active()
        if shell is not None and shell.engine is progress:
            out["mcast"] = shell.stats()
        waiting = sum(isinstance(t, commfree.DeferredRelease) for t in progress.advancing)
        out["comm_free"] = {**commfree.counters, "waiting": waiting}
        return out


def open_runtime(config: HostConfig) -> Runtime:
    """Open this node's MPI port (none outside emurun: a singleton rank) and build the engine."""
    eager, store = config.eager_limit, config.match_store
    port: Port | None = None
    if config.nic_socket:
        try:
            port = Port.open(config.nic_socket, port=MPI_PORT, receive_buffers=128)
        except PortError as exc:
            raise MPIException(ERR_OTHER, f"cannot open MPI port {MPI_PORT}: {exc}") from exc
        core = P2P(port.node_id, port.num_nodes, eager_limit=eager, store=store)
    else:
        core = P2P(0, 1, eager_limit=eager, store=store)
    engine = Progress(port, core, use_rm=config.rndv_rm)
    if config.fault_tolerant:
        engine.watch_s = FT_WATCH_S
    if port is not None:
        appbypass.install(engine, config)
    return Runtime(engine, config)
