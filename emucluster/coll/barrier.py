"""Dissemination barrier (Hensgen, Finkel and Manber), MPICH's host-based barrier.

In round k every rank sends an empty message ``2**k`` ranks ahead and waits for the one from
``2**k`` ranks behind; ``ceil_log2(size)`` rounds, ``size * ceil_log2(size)`` messages. No rank
leaves before every rank has entered: after the last round each has heard, transitively,
from all the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.tags import Tag
from emucluster.coll.trees import dissemination_peers

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen

__all__ = ["barrier_dissemination"]


def barrier_dissemination(ctx: CollContext) -> CollGen[None]:
    """Return once every rank of the communicator has called the barrier."""
    for send_to, recv_from in dissemination_peers(ctx.rank, ctx.size):
        yield [ctx.isend(b"", send_to, Tag.BARRIER), ctx.irecv(recv_from, Tag.BARRIER)]
