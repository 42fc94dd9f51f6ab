"""The offload shells of one rank's progress engine, each built on first use.

`HostServices` is the `Services` the MPI layer's collective context carries
(``CallContext.services``). Asking for a shell creates it (and installs its progress-engine
hook) the first time; the shells stay per process, as before: ``app_bypass.shell.install`` at
Init, ``nic_mcast.shell.install`` on the first ``nic-mcast`` bcast, ``nicvm.shell.install`` on
the first ``nicvm`` bcast. A singleton process (no NIC) has none of them. The NICVM shell is
imported on its first use only: it loads the NICVM compiler (lark), which a program that never
runs a ``nicvm`` bcast should not pay for at Init; `release_nicvm` and `shutdown_nicvm`
look for it in ``sys.modules`` for the same reason (a shell never loaded has nothing to do).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from emucluster.offload.app_bypass import shell as app_bypass_shell
from emucluster.offload.nic_mcast import shell as nic_mcast_shell

if TYPE_CHECKING:
    from emucluster.config import HostConfig
    from emucluster.offload.app_bypass.shell import Bypass
    from emucluster.offload.nic_mcast.shell import McastShell
    from emucluster.offload.nicvm.shell import NicvmBcast
    from emucluster.offload.services import Services
    from emucluster.port.progress import Progress

__all__ = ["HostServices", "release_nicvm", "shutdown_nicvm"]

_NICVM_SHELL = "emucluster.offload.nicvm.shell"


class HostServices:
    """The offload shells of ``engine``'s rank (None without a NIC)."""

    __slots__ = ("config", "engine")

    def __init__(self, engine: Progress, config: HostConfig) -> None:
        self.engine = engine
        self.config = config

    @property
    def mcast(self) -> McastShell | None:
        """The NIC-multicast shell, installed on first use."""
        engine = self.engine
        return None if engine.singleton else nic_mcast_shell.install(engine, self.config)

    @property
    def bypass(self) -> Bypass | None:
        """The application-bypass shell (installed at Init when there is a NIC)."""
        return app_bypass_shell.active()

    @property
    def nicvm(self) -> NicvmBcast | None:
        """The NICVM broadcast shell, installed on first use."""
        engine = self.engine
        if engine.singleton:
            return None
        # start-up cost: the NICVM shell loads the compiler (lark); see the module docstring
        from emucluster.offload.nicvm import shell as nicvm_shell

        return nicvm_shell.install(engine)


def release_nicvm(coll_context: int) -> None:
    """Collective context ``coll_context`` is free again: the NICVM shell, if it was ever
    loaded, forgets the communicator maps it keeps for it at the NICs."""
    shell = sys.modules.get(_NICVM_SHELL)
    if shell is not None:
        shell.release(coll_context)


def shutdown_nicvm(timeout: float) -> None:
    """At Finalize: the NICVM broadcasts this root delegated complete (if the shell was ever
    loaded), raising TimeoutError after ``timeout`` seconds."""
    shell = sys.modules.get(_NICVM_SHELL)
    if shell is not None:
        shell.shutdown(timeout)


if TYPE_CHECKING:  # mypy checks the shells against the algorithms' Protocols

    def _typed(services: HostServices) -> Services:
        return services
