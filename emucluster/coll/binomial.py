"""Binomial-tree broadcast and reduce: MPICH's host-based baselines.

Broadcast: a rank receives from its parent, then sends to its children, farthest
first; ``ceil_log2(size)`` steps, ``size - 1`` messages.

Reduce: the mirror image. A rank receives from all its children, combines them nearest child
first after its own contribution (so the running value covers its subtree in virtual-rank
order), and sends that to its parent. For a commutative operation the tree is rooted at the
root. For a non-commutative one, virtual order must be rank order, so (as MPICH does) the
tree is rooted at rank 0, and rank 0 hands the result to the root when they differ: one
extra message, and the result is ``d0 op d1 op ... op d(size-1)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.payload import received
from emucluster.coll.tags import Tag
from emucluster.coll.trees import binomial_children, binomial_parent

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen, Combine

__all__ = ["bcast_binomial", "reduce_binomial"]


def bcast_binomial(ctx: CollContext, data: bytes | None, root: int) -> CollGen[bytes]:
    """Broadcast ``data`` (given at the root, None elsewhere) from ``root``; every rank
    returns it."""
    rank, size = ctx.rank, ctx.size
    parent = binomial_parent(rank, root, size)
    if parent is None:
        if data is None:
            raise ValueError("bcast: the root must supply data")
        value = bytes(data)
    else:
        request = ctx.irecv(parent, Tag.BCAST)
        yield [request]
        value = received(request)
    children = binomial_children(rank, root, size)
    if children:
        yield [ctx.isend(value, child, Tag.BCAST) for child in children]
    return value


def reduce_binomial(
    ctx: CollContext, data: bytes, combine: Combine, root: int
) -> CollGen[bytes | None]:
    """Reduce every rank's ``data`` with ``combine`` in rank order; the root returns the
    result, other ranks None."""
    rank, size = ctx.rank, ctx.size
    tree_root = root if combine.commute else 0
    value = bytes(data)
    # Nearest child first: its subtree follows ours directly in virtual-rank order.
    children = binomial_children(rank, tree_root, size)[::-1]
    if children:
        requests = [ctx.irecv(child, Tag.REDUCE) for child in children]
        yield requests
        for request in requests:
            value = combine(value, received(request))
    parent = binomial_parent(rank, tree_root, size)
    if parent is not None:
        yield [ctx.isend(value, parent, Tag.REDUCE)]
    if tree_root != root:
        if rank == tree_root:
            yield [ctx.isend(value, root, Tag.REDUCE_FORWARD)]
        elif rank == root:
            request = ctx.irecv(tree_root, Tag.REDUCE_FORWARD)
            yield [request]
            return received(request)
    return value if rank == root else None
