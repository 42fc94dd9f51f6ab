"""Inclusive and exclusive prefix reductions: recursive doubling (MPICH) and a linear chain.

Recursive doubling: in step k each rank exchanges a *partial* value (the reduction of its
aligned block of ``2**k`` ranks, clipped to ``size``) with ``rank XOR 2**k`` when that rank
exists. Both combine the partials, lower block on the left; the higher rank also prepends the
lower partial to its *result*. Lower blocks arrive in order of growing distance, each to the
left of everything received so far, so results keep rank order for any operation.
``ceil_log2(size)`` steps.

Linear: rank r waits for the prefix of ranks below it from r - 1, combines its own on the
right and passes the prefix on; ``size - 1`` steps, one message each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.payload import received
from emucluster.coll.tags import Tag

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen, Combine

__all__ = ["exscan_linear", "exscan_recursive_doubling", "scan_linear", "scan_recursive_doubling"]


def _prefix_doubling(
    ctx: CollContext, data: bytes, combine: Combine, tag: Tag
) -> CollGen[bytes | None]:
    # The reduction of all ranks strictly below this one (None on rank 0).
    rank, size = ctx.rank, ctx.size
    partial = bytes(data)
    below: bytes | None = None
    mask = 1
    while mask < size:
        peer = rank ^ mask
        if peer < size:
            request = ctx.irecv(peer, tag)
            yield [ctx.isend(partial, peer, tag), request]
            other = received(request)
            if peer < rank:
                partial = combine(other, partial)
                below = other if below is None else combine(other, below)
            else:
                partial = combine(partial, other)
        mask <<= 1
    return below


def scan_recursive_doubling(ctx: CollContext, data: bytes, combine: Combine) -> CollGen[bytes]:
    """Rank r returns ``d0 op d1 op ... op dr``."""
    below = yield from _prefix_doubling(ctx, data, combine, Tag.SCAN)
    return bytes(data) if below is None else combine(below, bytes(data))


def exscan_recursive_doubling(
    ctx: CollContext, data: bytes, combine: Combine
) -> CollGen[bytes | None]:
    """Rank r > 0 returns ``d0 op ... op d(r-1)``; rank 0 returns None (undefined in MPI)."""
    return (yield from _prefix_doubling(ctx, data, combine, Tag.EXSCAN))


def _prefix_linear(
    ctx: CollContext, data: bytes, combine: Combine, tag: Tag, *, inclusive: bool
) -> CollGen[bytes | None]:
    # Down a chain: the reduction of the ranks below this one (None on rank 0), or with
    # ``inclusive`` of the ranks up to and including it.
    rank, size = ctx.rank, ctx.size
    below: bytes | None = None
    if rank > 0:
        request = ctx.irecv(rank - 1, tag)
        yield [request]
        below = received(request)
    if rank + 1 == size and not inclusive:
        return below
    upto = bytes(data) if below is None else combine(below, bytes(data))
    if rank + 1 < size:
        yield [ctx.isend(upto, rank + 1, tag)]
    return upto if inclusive else below


def scan_linear(ctx: CollContext, data: bytes, combine: Combine) -> CollGen[bytes]:
    """As `scan_recursive_doubling`, down a chain of ranks."""
    upto = yield from _prefix_linear(ctx, data, combine, Tag.SCAN, inclusive=True)
    assert upto is not None
    return upto


def exscan_linear(ctx: CollContext, data: bytes, combine: Combine) -> CollGen[bytes | None]:
    """As `exscan_recursive_doubling`, down a chain of ranks."""
    return (yield from _prefix_linear(ctx, data, combine, Tag.EXSCAN, inclusive=False))
