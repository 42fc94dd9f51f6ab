"""The paper offloads, one room each, the sans-IO core beside its shell.

* ``app_bypass/``: application-bypass reduce (thesis ch. 3): ``core.py`` + ``shell.py``.
* ``nic_mcast/``: NIC-based multicast broadcast (seed 001): ``bcast.py``, ``trees.py``,
  ``shell.py``.
* ``nicvm/``: NICVM binary-tree broadcast (thesis ch. 4): ``bcast.py`` + ``shell.py``.
* ``services.py``: the typed seam (``ctx.services``) between an algorithm and its shell;
  ``shells.py``: the MPI layer's implementation of it.

Importing this package registers the offload algorithms into ``emucluster.coll`` (the registry
imports it by name on its first lookup). It imports only the pure cores; a shell is imported
by the MPI layer, which builds it when a call first needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll import register
from emucluster.offload.app_bypass.core import reduce_app_bypass
from emucluster.offload.nic_mcast.auto import bcast_auto
from emucluster.offload.nic_mcast.barrier import barrier_nic_mcast
from emucluster.offload.nic_mcast.bcast import bcast_nic_mcast
from emucluster.offload.nicvm.bcast import bcast_nicvm

if TYPE_CHECKING:  # mypy checks each offload against its operation's Protocol
    from emucluster.coll import BarrierAlgorithm, BcastAlgorithm, ReduceAlgorithm

    _TYPED: tuple[
        BarrierAlgorithm, BcastAlgorithm, BcastAlgorithm, BcastAlgorithm, ReduceAlgorithm
    ] = (
        barrier_nic_mcast,
        bcast_auto,
        bcast_nic_mcast,
        bcast_nicvm,
        reduce_app_bypass,
    )

__all__: list[str] = []

register("barrier", "nic-mcast", barrier_nic_mcast)  # host fan-in, NIC-multicast release
# the default: nic-mcast on COMM_WORLD from 3 ranks; Ibcast takes binomial (issue 17: a
# nic-mcast Ibcast hangs in mpi4py's test_cco_nb_buf testBcast at 3 nodes)
register("bcast", "auto", bcast_auto)
register("bcast", "nic-mcast", bcast_nic_mcast)  # seed 001; needs the MPI layer's NIC
register("bcast", "nicvm", bcast_nicvm)  # thesis ch. 4; needs the MPI layer's NIC
# thesis ch. 3; its synchronous part runs inside the call, so never in a nonblocking one
register("reduce", "app-bypass", reduce_app_bypass, blocking_only=True)
