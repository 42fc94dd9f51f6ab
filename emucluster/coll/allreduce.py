"""Allreduce: recursive doubling (MPICH's short-message algorithm), and reduce then bcast.

Recursive doubling over ``pof2 = pof2_floor(size)`` ranks: in step k each rank exchanges its
running value with ``new_rank XOR 2**k`` and combines, lower ranks' value on the left, so each
running value covers a contiguous block of ranks in rank order and the result is the same on
every rank and equal to ``d0 op d1 op ... op d(size-1)`` even for non-commutative operations.
A non-power-of-two size is folded first as MPICH does (`trees.rd_new_rank`): the even rank of
each of the first ``size - pof2`` pairs sends its contribution to its odd partner, which
combines it on the left, and gets the result back at the end.

Reduce then bcast runs the binomial reduce to rank 0 and the binomial broadcast from it:
twice the steps, but each message carries one value (MPICH's choice for long messages is
reduce-scatter + allgather; this is the simple two-tree composition).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.binomial import bcast_binomial, reduce_binomial
from emucluster.coll.payload import received
from emucluster.coll.tags import Tag
from emucluster.coll.trees import fold_partner, pof2_floor, rd_new_rank, rd_old_rank

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen, Combine

__all__ = ["allreduce_recursive_doubling", "allreduce_reduce_bcast"]


def allreduce_recursive_doubling(ctx: CollContext, data: bytes, combine: Combine) -> CollGen[bytes]:
    """Every rank returns the reduction of all ranks' ``data`` with ``combine``, in rank order."""
    rank, size = ctx.rank, ctx.size
    value = bytes(data)
    partner = fold_partner(rank, size)
    new_rank = rd_new_rank(rank, size)
    if partner is not None:
        if new_rank is None:  # even: hand over, then wait for the result
            yield [ctx.isend(value, partner, Tag.ALLREDUCE_FOLD)]
            request = ctx.irecv(partner, Tag.ALLREDUCE_UNFOLD)
            yield [request]
            return received(request)
        request = ctx.irecv(partner, Tag.ALLREDUCE_FOLD)
        yield [request]
        value = combine(received(request), value)  # the partner is rank - 1: left
    assert new_rank is not None
    pof2 = pof2_floor(size)
    mask = 1
    while mask < pof2:
        peer = rd_old_rank(new_rank ^ mask, size)
        request = ctx.irecv(peer, Tag.ALLREDUCE_EXCHANGE)
        yield [ctx.isend(value, peer, Tag.ALLREDUCE_EXCHANGE), request]
        other = received(request)
        value = combine(other, value) if peer < rank else combine(value, other)
        mask <<= 1
    if partner is not None:
        yield [ctx.isend(value, partner, Tag.ALLREDUCE_UNFOLD)]
    return value


def allreduce_reduce_bcast(ctx: CollContext, data: bytes, combine: Combine) -> CollGen[bytes]:
    """Allreduce as a binomial reduce to rank 0 followed by a binomial broadcast from it."""
    result = yield from reduce_binomial(ctx, data, combine, 0)
    return (yield from bcast_binomial(ctx, result, 0))
