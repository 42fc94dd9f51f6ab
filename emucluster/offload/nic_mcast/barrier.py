"""NIC-multicast barrier: the barrier algorithm the registry names ``nic-mcast``.

A binomial fan-in of empty messages to rank 0 (`barrier_fan_in`), then rank 0 releases
everyone with one NIC multicast of an empty message (`bcast_nic_mcast`): the host sends
``size - 1`` messages up the tree and one multicast, where the host tree barrier sends
``2 * (size - 1)`` and dissemination ``size * ceil_log2(size)``; the release is forwarded by
the NICs without waking internal hosts. Without the multicast service (no NIC, one rank) the
release is the host binomial bcast, as `bcast_nic_mcast` falls back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.barrier import BARRIER_ROOT, barrier_fan_in
from emucluster.offload.nic_mcast.bcast import bcast_nic_mcast

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen

__all__ = ["barrier_nic_mcast"]


def barrier_nic_mcast(ctx: CollContext) -> CollGen[None]:
    """Return once every rank has called the barrier (host fan-in, NIC-multicast release)."""
    yield from barrier_fan_in(ctx)
    yield from bcast_nic_mcast(ctx, b"" if ctx.rank == BARRIER_ROOT else None, BARRIER_ROOT)
