"""The seam between an offload algorithm and its shell: the typed ``services`` of a context.

An offload algorithm is registered like any other (it takes a `CollContext`); the MPI layer's
context also carries ``services``, one `Services` object naming this rank's offload shells,
each None where the offload cannot run (no NIC: a singleton process). An algorithm asks
`services_of` once and falls back to its host baseline when the service it needs is missing,
so it also runs on the simulated ranks of ``emucluster.coll.context.simulate``, which carry no
services. Pure: the shells themselves are built by ``emucluster.offload.shells``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext
    from emucluster.offload.app_bypass.core import BypassService
    from emucluster.offload.nic_mcast.bcast import McastService
    from emucluster.offload.nicvm.bcast import NicvmService

__all__ = ["Services", "StaticServices", "services_of"]


class Services(Protocol):
    """This rank's offload shells, as the algorithms see them (None: not available)."""

    @property
    def mcast(self) -> McastService | None:
        """The NIC-multicast shell (bcast ``nic-mcast``)."""
        ...

    @property
    def bypass(self) -> BypassService | None:
        """The application-bypass shell (reduce ``app-bypass``)."""
        ...

    @property
    def nicvm(self) -> NicvmService | None:
        """The NICVM broadcast shell (bcast ``nicvm``)."""
        ...


@dataclass(frozen=True, slots=True)
class StaticServices:
    """Fixed services (tests give simulated ranks a fake NIC this way)."""

    mcast: McastService | None = None
    bypass: BypassService | None = None
    nicvm: NicvmService | None = None


def services_of(ctx: CollContext) -> Services | None:
    """The ``services`` ``ctx`` carries, or None for a context without any (``simulate``'s)."""
    services: Services | None = getattr(ctx, "services", None)
    return services
