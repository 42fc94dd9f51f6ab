"""Host-based barriers: dissemination (MPICH's), a binomial tree, a linear one, and ``auto``.

Dissemination (Hensgen, Finkel and Manber): in round k every rank sends an empty message
``2**k`` ranks ahead and waits for the one from ``2**k`` ranks behind; ``ceil_log2(size)``
rounds, ``size * ceil_log2(size)`` messages. No rank leaves before every rank has entered:
after the last round each has heard, transitively, from all the others.

Tree: every rank waits for its binomial children (rooted at rank 0), tells its parent, waits
for its parent's release and releases its children; ``2 * (size - 1)`` messages in
``2 * ceil_log2(size)`` steps. No rank leaves before all entered: rank 0 releases only after
its whole tree has reported, and a release reaches a rank only from rank 0 down.

Linear: every rank tells rank 0 and waits for its release; rank 0 releases everyone once all
have reported: the tree's ``2 * (size - 1)`` messages in 2 steps.

Auto (the default, ``emucluster.coll.registry.DEFAULTS``): dissemination up to
`DISSEMINATION_MAX_RANKS` ranks, where it sends about as many messages as the others (4 ranks:
8 against 6) in fewer steps; linear above, up to `LINEAR_MAX_RANKS`; the tree beyond. The
emulated path is CPU-bound and a step is a message's trip through four processes, while rank
0's NIC and host take a burst of reports in few wake-ups. Measured on the idle 2-vCPU VM, 60
barriers back to back, mean over ranks (us), linear vs tree: 8 ranks 2213 vs 2830, 16 ranks
5691 vs 7381, 32 ranks 12186 vs 17696 (4 ranks: dissemination 849, linear 904).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.tags import Tag
from emucluster.coll.trees import binomial_children, binomial_parent, dissemination_peers

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen

__all__ = [
    "LINEAR_MAX_RANKS",
    "barrier_auto",
    "barrier_dissemination",
    "barrier_fan_in",
    "barrier_linear",
    "barrier_linear_fan_in",
    "barrier_tree",
]

BARRIER_ROOT = 0  # the rank the tree and linear barriers gather at and release from
DISSEMINATION_MAX_RANKS = 4  # auto: dissemination up to this many ranks, linear above
LINEAR_MAX_RANKS = 32  # auto: linear up to this many ranks (the largest measured), tree above


def barrier_dissemination(ctx: CollContext) -> CollGen[None]:
    """Return once every rank of the communicator has called the barrier."""
    for send_to, recv_from in dissemination_peers(ctx.rank, ctx.size):
        yield [ctx.isend(b"", send_to, Tag.BARRIER), ctx.irecv(recv_from, Tag.BARRIER)]


def barrier_fan_in(ctx: CollContext) -> CollGen[None]:
    """The gathering half of the tree barrier: return at `BARRIER_ROOT` once every rank has
    entered; elsewhere once this rank's subtree has and its parent has been told. The release
    is the caller's (``emucluster.offload.nic_mcast.barrier`` multicasts it)."""
    rank, size = ctx.rank, ctx.size
    children = binomial_children(rank, BARRIER_ROOT, size)
    if children:
        yield [ctx.irecv(child, Tag.BARRIER) for child in children]
    parent = binomial_parent(rank, BARRIER_ROOT, size)
    if parent is not None:
        yield [ctx.isend(b"", parent, Tag.BARRIER)]


def barrier_tree(ctx: CollContext) -> CollGen[None]:
    """Return once every rank has called the barrier (binomial fan-in, then fan-out)."""
    rank, size = ctx.rank, ctx.size
    children = binomial_children(rank, BARRIER_ROOT, size)
    if children:
        yield [ctx.irecv(child, Tag.BARRIER) for child in children]
    parent = binomial_parent(rank, BARRIER_ROOT, size)
    if parent is not None:  # report and wait for the release in one wait
        yield [ctx.isend(b"", parent, Tag.BARRIER), ctx.irecv(parent, Tag.BCAST)]
    if children:
        yield [ctx.isend(b"", child, Tag.BCAST) for child in children]


def barrier_linear_fan_in(ctx: CollContext) -> CollGen[None]:
    """The gathering half of the linear barrier: return at `BARRIER_ROOT` once every rank has
    entered; elsewhere once this rank told it. The release is the caller's."""
    if ctx.rank != BARRIER_ROOT:
        yield [ctx.isend(b"", BARRIER_ROOT, Tag.BARRIER)]
        return
    others = [rank for rank in range(ctx.size) if rank != BARRIER_ROOT]
    if others:
        yield [ctx.irecv(rank, Tag.BARRIER) for rank in others]


def barrier_linear(ctx: CollContext) -> CollGen[None]:
    """Return once every rank has called the barrier (all report to rank 0, which releases
    all)."""
    if ctx.rank != BARRIER_ROOT:  # report and wait for the release in one wait
        yield [ctx.isend(b"", BARRIER_ROOT, Tag.BARRIER), ctx.irecv(BARRIER_ROOT, Tag.BCAST)]
        return
    yield from barrier_linear_fan_in(ctx)
    others = [rank for rank in range(ctx.size) if rank != BARRIER_ROOT]
    if others:
        yield [ctx.isend(b"", rank, Tag.BCAST) for rank in others]


def barrier_auto(ctx: CollContext) -> CollGen[None]:
    """Dissemination on up to `DISSEMINATION_MAX_RANKS` ranks, linear up to
    `LINEAR_MAX_RANKS`, the tree barrier above."""
    if ctx.size <= DISSEMINATION_MAX_RANKS:
        yield from barrier_dissemination(ctx)
    elif ctx.size <= LINEAR_MAX_RANKS:
        yield from barrier_linear(ctx)
    else:
        yield from barrier_tree(ctx)
