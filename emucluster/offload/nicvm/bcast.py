"""NICVM broadcast (thesis §4.4.3): Fig 4.3's binary-tree module forwards on the NICs.

The root delegates the message to its own NIC's module; every NIC's module sends it on to its
node's children in a binary tree rooted at the root and lets it through to its host after
those sends completed (the root's consumes it); every other host just receives it. Registered
as bcast ``nicvm`` (``emurun --bcast nicvm``).

The first call on a communicator uploads the module (once per process) and posts the
communicator's rank -> node map to the NIC, then runs a barrier, so no NIC can receive the
message before its module is there. A message longer than the module path carries
(``NicvmService.max_bytes``) goes as a one-byte notice down the same tree, then by the host
binomial broadcast: non-roots cannot know the size in advance (pickled objects). Without the
service (no NIC) it is the binomial broadcast.

Body on the wire: one flag byte (``DATA`` or ``FALLBACK``), then the message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from emucluster.coll.barrier import barrier_dissemination
from emucluster.coll.binomial import bcast_binomial
from emucluster.coll.payload import received
from emucluster.offload.services import services_of

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen, CollRequest

__all__ = ["DATA", "FALLBACK", "MODULE_NAME", "NicvmService", "bcast_nicvm"]

MODULE_NAME = "emu-bcast-binary-tree"
DATA = b"\x00"
FALLBACK = b"\x01"


class NicvmService(Protocol):
    """What the broadcast needs of the MPI layer's NICVM shell."""

    @property
    def max_bytes(self) -> int:
        """Longest message the module path carries."""
        ...

    def prepare(self, ctx: CollContext) -> bool:
        """Upload the module and post ``ctx``'s communicator map if not done yet; True when
        this was the communicator's first call (the caller then synchronises)."""
        ...

    def delegate(self, ctx: CollContext, root: int, body: bytes) -> CollRequest:
        """Hand ``body`` to this NIC's module as root ``root``; completes when its sends did."""
        ...

    def expect(self, ctx: CollContext) -> CollRequest:
        """The message of this call arriving from the NIC (``result``: its body)."""
        ...


def bcast_nicvm(ctx: CollContext, data: bytes | None, root: int) -> CollGen[bytes]:
    """Broadcast ``data`` from ``root`` with the NICs forwarding down Fig 4.3's binary tree."""
    services = services_of(ctx)
    service = None if services is None else services.nicvm
    if service is None or ctx.size == 1:
        return (yield from bcast_binomial(ctx, data, root))
    if service.prepare(ctx):
        yield from barrier_dissemination(ctx)
    if ctx.rank == root:
        if data is None:
            raise ValueError("bcast: the root must supply data")
        value = bytes(data)
        fits = len(value) + 1 <= service.max_bytes
        yield [service.delegate(ctx, root, DATA + value if fits else FALLBACK)]
        if fits:
            return value
        return (yield from bcast_binomial(ctx, value, root))
    request = service.expect(ctx)
    yield [request]
    body = received(request)
    if body[:1] == DATA:
        return body[1:]
    return (yield from bcast_binomial(ctx, None, root))
