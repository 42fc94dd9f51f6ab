"""Allgather: ring, and recursive doubling (as an order-keeping allreduce of framed blocks).

Ring: in step i (``size - 1`` steps) every rank passes the block it got in step i-1 to its
right neighbour and takes a new one from its left; bandwidth-optimal, MPICH's choice for
long messages.

Recursive doubling: MPICH's short-message algorithm. Concatenating framed blocks is an
associative, non-commutative operation, and the recursive-doubling allreduce keeps rank
order, so allgather is that allreduce under `payload.CONCAT`; non-power-of-two sizes get the
allreduce's fold. ``ceil_log2``-ish steps instead of ``size - 1``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.allreduce import allreduce_recursive_doubling
from emucluster.coll.payload import CONCAT, pack_blocks, received, unpack_blocks
from emucluster.coll.tags import Tag

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen

__all__ = ["allgather_recursive_doubling", "allgather_ring"]


def allgather_ring(ctx: CollContext, data: bytes) -> CollGen[list[bytes]]:
    """Every rank returns all ranks' ``data`` in rank order."""
    rank, size = ctx.rank, ctx.size
    blocks: list[bytes] = [b""] * size
    blocks[rank] = bytes(data)
    right, left = (rank + 1) % size, (rank - 1) % size
    for step in range(size - 1):
        request = ctx.irecv(left, Tag.ALLGATHER)
        yield [ctx.isend(blocks[(rank - step) % size], right, Tag.ALLGATHER), request]
        blocks[(rank - step - 1) % size] = received(request)
    return blocks


def allgather_recursive_doubling(ctx: CollContext, data: bytes) -> CollGen[list[bytes]]:
    """Every rank returns all ranks' ``data`` in rank order."""
    payload = yield from allreduce_recursive_doubling(ctx, pack_blocks([bytes(data)]), CONCAT)
    return unpack_blocks(payload, ctx.size)
