"""Alltoall: pairwise exchange (MPICH's long-message algorithm) and all-at-once ("scattered").

Pairwise: ``size - 1`` steps; in each, one send and one receive (with ``rank XOR step`` for a
power-of-two size, else ``step`` ahead and ``step`` behind), so every rank has one message in
flight each way. Scattered: every send and receive posted at once (MPICH's medium-message
algorithm, here without its batching), in the order ``rank + i`` so that not every rank hits
rank 0 first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.payload import received
from emucluster.coll.tags import Tag
from emucluster.coll.trees import pairwise_peers

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emucluster.coll.context import CollContext, CollGen, CollRequest

__all__ = ["alltoall_pairwise", "alltoall_scattered"]


def _check(data: Sequence[bytes], size: int) -> None:
    if len(data) != size:
        raise ValueError(f"alltoall: need {size} blocks, got {len(data)}")


def alltoall_pairwise(ctx: CollContext, data: Sequence[bytes]) -> CollGen[list[bytes]]:
    """Rank i sends ``data[j]`` to rank j; returns the blocks received, indexed by source."""
    rank, size = ctx.rank, ctx.size
    _check(data, size)
    result: list[bytes] = [b""] * size
    result[rank] = bytes(data[rank])
    for step in range(1, size):
        send_to, recv_from = pairwise_peers(rank, size, step)
        request = ctx.irecv(recv_from, Tag.ALLTOALL)
        yield [ctx.isend(data[send_to], send_to, Tag.ALLTOALL), request]
        result[recv_from] = received(request)
    return result


def alltoall_scattered(ctx: CollContext, data: Sequence[bytes]) -> CollGen[list[bytes]]:
    """As `alltoall_pairwise`, with every message posted at once."""
    rank, size = ctx.rank, ctx.size
    _check(data, size)
    result: list[bytes] = [b""] * size
    result[rank] = bytes(data[rank])
    peers = [(rank + i) % size for i in range(1, size)]
    sources = [(rank - i) % size for i in range(1, size)]
    receives = {source: ctx.irecv(source, Tag.ALLTOALL) for source in sources}
    requests: list[CollRequest] = list(receives.values())
    requests += [ctx.isend(data[peer], peer, Tag.ALLTOALL) for peer in peers]
    if requests:
        yield requests
    for source, request in receives.items():
        result[source] = received(request)
    return result
