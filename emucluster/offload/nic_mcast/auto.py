"""The default broadcast, ``auto``: NIC multicast where it is safe and pays, else binomial.

As MPICH-GM with NIC multicast would, a bcast goes to the NIC (`bcast_nic_mcast`) when

* the rank has a NIC (the multicast service; `simulate` and singletons have none),
* the communicator has at least `NIC_MCAST_MIN_RANKS` ranks (on 2 the root sends one message
  either way; measured at 2 nodes the two are alike, at 4 multicast is ~1.4x faster, at 16
  4-5x: ``emubench mpi-compare --candidates``), and
* its collective context is never reused: COMM_WORLD and COMM_SELF never free their
  context (``emucluster.mpi.runtime.release_context``); the MPI layer says so with
  ``ctx.lasting``. Other communicators are correct with nic-mcast too (issue 17: ``Free``
  releases their groups, the id's next communicator agrees a new epoch; the reproducers are
  in tests/integration/test_mpi_small_coll.py), but their first nic-mcast bcast pays that
  agreement and each ``Free`` a NIC round trip per group: not measured for ``auto`` yet.

Blocking and nonblocking calls alike (``Ibcast`` too: its steps run inside the progress
engine, which no longer sleeps while a nested wait of group posting holds read events).

Every member decides alike (size and context are the same everywhere; the message size is not
known off-root, and `bcast_nic_mcast` itself sends messages above the eager limit by the host
algorithm). ``EMU_BCAST`` / ``algorithm=`` still pick any algorithm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.binomial import bcast_binomial
from emucluster.offload.nic_mcast.bcast import bcast_nic_mcast
from emucluster.offload.services import services_of

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen

__all__ = ["NIC_MCAST_MIN_RANKS", "bcast_auto"]

NIC_MCAST_MIN_RANKS = 3  # below this the host binomial bcast


def bcast_auto(ctx: CollContext, data: bytes | None, root: int) -> CollGen[bytes]:
    """Broadcast by NIC multicast on a lasting communicator of 3 or more ranks with a NIC,
    else by the host binomial tree."""
    if ctx.size >= NIC_MCAST_MIN_RANKS and getattr(ctx, "lasting", False):
        services = services_of(ctx)
        if services is not None and services.mcast is not None:
            return (yield from bcast_nic_mcast(ctx, data, root))
    return (yield from bcast_binomial(ctx, data, root))
