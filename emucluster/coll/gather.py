"""Binomial gather and scatter (MPICH's host-based algorithms for short and medium blocks).

Gather: a rank receives the framed blocks of each child's subtree, appends them nearest child
first after its own block (virtual-rank order), and sends the lot to its parent; the root
unframes once and rotates virtual order back to rank order. Scatter is the mirror: the root
frames each child's subtree range, every internal rank keeps its own block and forwards the
sub-ranges of its children, farthest first. ``size - 1`` messages each; the payload
halves (scatter) or doubles (gather) per level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.payload import pack_blocks, received, unpack_blocks
from emucluster.coll.tags import Tag
from emucluster.coll.trees import (
    binomial_children,
    binomial_parent,
    binomial_subtree,
    relative_rank,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emucluster.coll.context import CollContext, CollGen

__all__ = ["gather_binomial", "scatter_binomial"]


def gather_binomial(ctx: CollContext, data: bytes, root: int) -> CollGen[list[bytes] | None]:
    """The root returns every rank's ``data`` in rank order; other ranks return None."""
    rank, size = ctx.rank, ctx.size
    parts = [pack_blocks([bytes(data)])]
    children = binomial_children(rank, root, size)[::-1]  # nearest first: virtual order
    if children:
        requests = [ctx.irecv(child, Tag.GATHER) for child in children]
        yield requests
        parts.extend(received(request) for request in requests)
    payload = b"".join(parts)  # frames concatenate
    parent = binomial_parent(rank, root, size)
    if parent is not None:
        yield [ctx.isend(payload, parent, Tag.GATHER)]
        return None
    by_vrank = unpack_blocks(payload, size)
    return [by_vrank[relative_rank(r, root, size)] for r in range(size)]


def scatter_binomial(ctx: CollContext, data: Sequence[bytes] | None, root: int) -> CollGen[bytes]:
    """Rank i returns ``data[i]``, where ``data`` (``size`` blocks) is given at the root only."""
    rank, size = ctx.rank, ctx.size
    parent = binomial_parent(rank, root, size)
    mine = binomial_subtree(rank, root, size)
    if parent is None:
        if data is None or len(data) != size:
            got = "None" if data is None else f"{len(data)} blocks"
            raise ValueError(f"scatter: the root must supply {size} blocks, got {got}")
        by_vrank = [bytes(data[(v + root) % size]) for v in range(size)]
    else:
        request = ctx.irecv(parent, Tag.SCATTER)
        yield [request]
        by_vrank = unpack_blocks(received(request), len(mine))
    sends = []
    for child in binomial_children(rank, root, size):
        sub = binomial_subtree(child, root, size)
        payload = pack_blocks(by_vrank[sub.start - mine.start : sub.stop - mine.start])
        sends.append(ctx.isend(payload, child, Tag.SCATTER))
    if sends:
        yield sends
    return by_vrank[0]
