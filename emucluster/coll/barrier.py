"""Host-based barriers: dissemination (MPICH's), a binomial fan-in/fan-out tree, and ``auto``.

Dissemination (Hensgen, Finkel and Manber): in round k every rank sends an empty message
``2**k`` ranks ahead and waits for the one from ``2**k`` ranks behind; ``ceil_log2(size)``
rounds, ``size * ceil_log2(size)`` messages. No rank leaves before every rank has entered:
after the last round each has heard, transitively, from all the others.

Tree: every rank waits for its binomial children (rooted at rank 0), tells its parent, waits
for its parent's release and releases its children; ``2 * (size - 1)`` messages in
``2 * ceil_log2(size)`` steps. Fewer messages, twice the depth: when every message costs CPU
in four processes sharing a few cores (the emulated path at 16 nodes), the message count wins
(16 ranks: 30 messages against 64). No rank leaves before all entered: rank 0 releases only
after its whole tree has reported, and a release reaches a rank only from rank 0 down.

Auto (the default, ``emucluster.coll.registry.DEFAULTS``): dissemination up to
`DISSEMINATION_MAX_RANKS` ranks, where it sends about as many messages as the tree (2 ranks:
2 and 2; 4 ranks: 8 and 6) in half the steps; the tree above (8 ranks: 24 against 14; 16
ranks: 64 against 30), where the emulated path is CPU-bound and the message count decides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.tags import Tag
from emucluster.coll.trees import binomial_children, binomial_parent, dissemination_peers

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen

__all__ = ["barrier_auto", "barrier_dissemination", "barrier_fan_in", "barrier_tree"]

BARRIER_ROOT = 0  # the rank the tree barrier gathers at and releases from
DISSEMINATION_MAX_RANKS = 4  # auto: dissemination up to this many ranks, the tree above


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


def barrier_auto(ctx: CollContext) -> CollGen[None]:
    """Dissemination on up to `DISSEMINATION_MAX_RANKS` ranks, the tree barrier above."""
    if ctx.size <= DISSEMINATION_MAX_RANKS:
        yield from barrier_dissemination(ctx)
    else:
        yield from barrier_tree(ctx)
