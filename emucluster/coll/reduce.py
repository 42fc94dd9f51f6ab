"""Reduce to the root directly (``linear``), and ``auto``: linear where it was measured to win.

Linear: every other rank sends its data to the root; the root combines all of them in rank
order (``combine(ranks 0..r-1, rank r)``), so a non-commutative operation needs no forwarding
step; ``size - 1`` messages in one step, against the binomial tree's ``size - 1`` messages in
``ceil_log2(size)`` steps.

Auto (the default, ``emucluster.coll.registry.DEFAULTS``): linear up to `LINEAR_MAX_RANKS`
ranks and `LINEAR_MAX_BYTES` bytes per rank, the binomial tree (MPICH's) beyond. On the
emulated path a step costs a message's whole trip through four processes (hundreds of
microseconds on 2 cores), while the root's NIC and host take a burst of messages in few
wake-ups (link bundles, several host records per read), so one step of ``size - 1`` messages
finishes before ``ceil_log2(size)`` steps do. Measured on the idle 2-vCPU VM, 8 B to 64 KiB
(mean over ranks / root, microseconds, linear vs binomial): 4 ranks 8 B 373 / 528 vs
591 / 921; 16 ranks 8 B 1141 / 6227 vs 2429 / 8027 (the root's time includes the barrier
before each call); 16 ranks 64 KiB 10696 / 17364 vs 10950 / 22245; 32 ranks 8 B 2244 / 16347
vs 7115 / 23097. Beyond 32 ranks it is unmeasured, and a root's receive buffers (128 at the MPI
port) would meet more senders than they cover at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.binomial import reduce_binomial
from emucluster.coll.payload import received
from emucluster.coll.tags import Tag

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen, Combine

__all__ = ["LINEAR_MAX_BYTES", "LINEAR_MAX_RANKS", "reduce_auto", "reduce_linear"]

LINEAR_MAX_RANKS = 32
"""auto: the linear reduce up to this many ranks (the largest job it was measured on)."""
LINEAR_MAX_BYTES = 64 * 1024
"""auto: and up to this many bytes per rank (the largest message it was measured with)."""


def reduce_linear(
    ctx: CollContext, data: bytes, combine: Combine, root: int
) -> CollGen[bytes | None]:
    """Reduce every rank's ``data`` with ``combine`` in rank order at ``root``, which returns
    the result (other ranks None), every other rank sending to it directly."""
    rank, size = ctx.rank, ctx.size
    if rank != root:
        yield [ctx.isend(bytes(data), root, Tag.REDUCE)]
        return None
    requests = {other: ctx.irecv(other, Tag.REDUCE) for other in range(size) if other != root}
    if requests:
        yield list(requests.values())
    mine = bytes(data)
    value = mine if root == 0 else received(requests[0])
    for other in range(1, size):
        value = combine(value, mine if other == root else received(requests[other]))
    return value


def reduce_auto(
    ctx: CollContext, data: bytes, combine: Combine, root: int
) -> CollGen[bytes | None]:
    """`reduce_linear` up to `LINEAR_MAX_RANKS` ranks and `LINEAR_MAX_BYTES` bytes, else
    the binomial tree. Every rank of a call decides alike: MPI requires the same count and
    datatype on every rank, so ``len(data)`` agrees."""
    if ctx.size <= LINEAR_MAX_RANKS and len(data) <= LINEAR_MAX_BYTES:
        return (yield from reduce_linear(ctx, data, combine, root))
    return (yield from reduce_binomial(ctx, data, combine, root))
