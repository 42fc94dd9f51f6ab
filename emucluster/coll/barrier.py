"""Host-based barriers: dissemination (MPICH's) and a binomial fan-in/fan-out tree.

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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.tags import Tag
from emucluster.coll.trees import binomial_children, binomial_parent, dissemination_peers

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen

__all__ = ["barrier_dissemination", "barrier_fan_in", "barrier_tree"]

BARRIER_ROOT = 0  # the rank the tree barrier gathers at and releases from


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
