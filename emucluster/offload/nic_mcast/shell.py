"""The NIC-multicast shell of one rank: posts groups, multicasts, hands arrivals to matching.

The `McastService` of :mod:`emucluster.offload.nic_mcast.bcast` (bcast algorithm ``nic-mcast``,
chosen by ``EMU_BCAST=nic-mcast``, ``emurun --bcast nic-mcast`` or ``algorithm=``), installed
on first use. It talks to the rank's NIC through the MPI Port (``Port.create_group`` and
``Port.multicast``) and installs a progress-engine hook that takes every MCAST_DATA message
into the point-to-point matching as the eager message its envelope names (seed 001 §6: "the
destinations invoke blocking receiving operations as MPI_Recv does").

Environment (``HostConfig.mcast_tree``, ``.mcast_costs``): ``EMU_MCAST_TREE`` = ``postal``
(default: postal-optimal trees from the costs measured by the first nic-mcast bcast of each
communicator) or ``binomial``; ``EMU_MCAST_COSTS`` = ``L0,L_per_byte,g0,g_per_byte`` in
microseconds fixes the postal costs instead of measuring them (benchmarks, tests).

A freed communicator's context id may serve another membership next (``Comm.Free`` calls
`release` through ``emucluster.mpi.runtime.release_context`` once the communicator's pending
operations ended, ``emucluster.mpi.comm.free``): its groups are freed at the NIC
(which still completes their unfinished multicasts and answers the old tree's late packets,
under the old epoch), its plans, costs and epoch are forgotten here, and the last epoch used
on the id is kept, so the next communicator on it agrees a newer one
(``bcast.agree_epoch``).

A multicast's completion at the root is lazy, like an eager send: its SENT is absorbed by the
progress engine; an ERROR (a dead child) and a child-dead event at a forwarding node mark the
child's node failed in the p2p core, so every later operation that needs it, and every later
nic-mcast bcast on a communicator containing it, raises ``MPI.ERR_PROC_FAILED``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from emucluster.coll.tags import Tag
from emucluster.config import ENV_MCAST_COSTS, ENV_MCAST_TREE, HostConfig
from emucluster.mpi.errors import ERR_ARG, ERR_PROC_FAILED
from emucluster.mpi.errors import Exception as MPIException
from emucluster.offload.nic_mcast.bcast import LARGE
from emucluster.offload.nic_mcast.trees import PostalCosts
from nicd.contract import MsgType

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext
    from emucluster.offload.nic_mcast.bcast import GroupPlan, McastService
    from emucluster.port.client import RecvEvent
    from emucluster.port.progress import Progress

__all__ = ["McastShell", "active", "install", "parse_costs"]

_TREES = ("postal", "binomial")

_shell: McastShell | None = None


def active() -> McastShell | None:
    """The installed shell, if any bcast used NIC multicast."""
    return _shell


def install(engine: Progress, config: HostConfig | None = None) -> McastShell:
    """The shell for ``engine`` (installed on first call; ``config``: the environment's)."""
    global _shell
    if _shell is None or _shell.engine is not engine:
        _shell = McastShell(engine, config)
    return _shell


def parse_costs(text: str) -> PostalCosts:
    """``L0,L_per_byte,g0,g_per_byte`` in microseconds -> PostalCosts (seconds)."""
    try:
        l0, lb, g0, gb = (float(x) / 1e6 for x in text.split(","))
    except ValueError:
        raise MPIException(ERR_ARG, f"{ENV_MCAST_COSTS}={text!r}: expected four numbers") from None
    if not l0 > 0 or min(lb, g0, gb) < 0:
        raise MPIException(ERR_ARG, f"{ENV_MCAST_COSTS}={text!r}: need L0 > 0, the rest >= 0")
    return PostalCosts(latency_s=l0, gap_s=g0, latency_per_byte_s=lb, gap_per_byte_s=gb)


class McastShell:
    """NIC multicast for the MPI layer of one rank (one per process)."""

    def __init__(self, engine: Progress, config: HostConfig | None = None) -> None:
        self.engine = engine
        self.eager_limit = engine.eager_limit
        config = config or HostConfig.from_env()
        first, count = config.world_of(engine.port.num_nodes)
        self.num_nodes = first + count
        """One past COMM_WORLD's highest node: alike at every rank of the world, whenever its
        port opened (the NIC's own count grows with the nodes spawned meanwhile)."""
        kind = config.mcast_tree
        if kind not in _TREES:
            raise MPIException(ERR_ARG, f"{ENV_MCAST_TREE}={kind!r}: expected postal or binomial")
        self.tree_kind = kind
        fixed = config.mcast_costs
        self._fixed = parse_costs(fixed) if fixed else None
        self._costs: dict[int, PostalCosts] = {}
        self._plans: dict[tuple[int, int], GroupPlan] = {}
        self._epochs: dict[int, int] = {}  # context -> the live communicator's epoch
        self._last_epoch: dict[int, int] = {}  # context -> the last epoch used on it here
        self.counters: dict[str, int] = dict.fromkeys(
            ("groups_posted", "groups_freed", "multicasts", "large_fallbacks", "received",
             "calibrations", "epochs_agreed"), 0
        )  # fmt: skip
        engine.hooks[int(MsgType.MCAST_DATA)] = self.on_message

    # -- McastService -----------------------------------------------------------------------

    def now(self) -> float:
        """The calibration clock."""
        return time.perf_counter()

    def costs(self, ctx: CollContext) -> PostalCosts | None:
        """Fixed by the environment, or measured on this communicator."""
        return self._fixed or self._costs.get(_context(ctx))

    def set_costs(self, ctx: CollContext, costs: PostalCosts) -> None:
        """Keep this communicator's calibration."""
        self.counters["calibrations"] += 1
        self._costs[_context(ctx)] = costs

    def plan(self, ctx: CollContext, root: int) -> GroupPlan | None:
        """The groups of ``root`` this rank posted on this communicator."""
        return self._plans.get((_context(ctx), root))

    def epoch(self, ctx: CollContext) -> int | None:
        """The communicator's epoch: 0 on COMM_WORLD and COMM_SELF (their context ids are
        never reused), else the one its members agreed, None before."""
        if getattr(ctx, "lasting", False):
            return 0
        return self._epochs.get(_context(ctx))

    def propose_epoch(self, ctx: CollContext) -> int:
        """One past the last epoch this rank used on the communicator's context id."""
        last = self._last_epoch.get(_context(ctx))
        return 0 if last is None else last + 1

    def set_epoch(self, ctx: CollContext, epoch: int) -> None:
        """Keep the agreed epoch (and remember it as the last used on the context id)."""
        context = _context(ctx)
        self.counters["epochs_agreed"] += 1
        self._epochs[context] = epoch
        self._last_epoch[context] = epoch

    def release(self, context: int) -> None:
        """Collective context ``context`` was given back (its communicator was freed):
        free its groups at the NIC (one round trip for all) and forget its plans, costs and
        epoch; the last epoch used on it stays."""
        self._costs.pop(context, None)
        self._epochs.pop(context, None)
        groups = [g for key in [k for k in self._plans if k[0] == context]
                  for g in self._plans.pop(key).groups]  # fmt: skip
        if groups:
            self.engine.port.free_groups(groups)
            self.counters["groups_freed"] += len(groups)

    def post(self, ctx: CollContext, root: int, plan: GroupPlan) -> None:
        """Post this node's part of every tree to the NIC (one round trip each)."""
        node: int = ctx.nodes[ctx.rank]  # type: ignore[attr-defined]
        port = self.engine.port
        for tree, group in zip(plan.trees, plan.groups, strict=True):
            port.create_group(group, tree.root, tree.parent(node), tree.children(node),
                              epoch=plan.epoch)  # fmt: skip
            self.counters["groups_posted"] += 1
        self._plans[(_context(ctx), root)] = plan

    def multicast(
        self, ctx: CollContext, root: int, group: int, marker: int, payload: bytes
    ) -> None:
        """Hand the message to the NIC under this call's envelope (context, root, tag), the
        marker in the fourth user argument."""
        context, tag = ctx.wire(Tag.MCAST)  # type: ignore[attr-defined]
        self.engine.port.multicast(group, payload, args=(context, root, tag, marker))
        self.counters["large_fallbacks" if marker == LARGE else "multicasts"] += 1

    def check(self, ctx: CollContext) -> None:
        """ERR_PROC_FAILED if a member's node failed (a dead multicast child included)."""
        dead = self.engine.dead
        if dead:
            for node in ctx.nodes:  # type: ignore[attr-defined]
                if node in dead:
                    raise MPIException(ERR_PROC_FAILED, f"bcast: node {node}: {dead[node]}")

    # -- the progress engine's hook ---------------------------------------------------------

    def on_message(self, event: RecvEvent) -> None:
        """A multicast message: into matching as the eager message its envelope names, its
        marker (fourth user argument) in front of the payload."""
        self.counters["received"] += 1
        args = event.args
        framed = bytes((args[3] & 0xFF,)) + event.payload
        self.engine.inject_unsequenced(event.src_node, args, framed)

    def stats(self) -> dict[str, object]:
        """Counters, the tree kind and the costs in use, JSON-able."""
        costs = {str(c): [x * 1e6 for x in (v.latency_s, v.latency_per_byte_s, v.gap_s,
                                              v.gap_per_byte_s)]
                 for c, v in self._costs.items()}  # fmt: skip
        return {**self.counters, "tree": self.tree_kind, "costs_us": costs,
                "fixed_costs": self._fixed is not None}  # fmt: skip


def _context(ctx: CollContext) -> int:
    context, _ = ctx.wire(Tag.MCAST)  # type: ignore[attr-defined]
    return int(context)


if TYPE_CHECKING:  # mypy checks the shell against the algorithm's Protocol

    def _typed(shell: McastShell) -> McastService:
        return shell
