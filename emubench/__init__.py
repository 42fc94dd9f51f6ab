"""Paper microbenchmarks of the host library; each is ``python -m emubench.<name>``.

* `unexpected_queue`: search cost per entry vs unexpected-queue depth (seed 004 Fig. 4).
* `mcast` (+ `mcast_plot`): NIC multisend, GM- and MPI-level multicast latency, CPU time in
  Bcast under skew (seed 001 Figs 4-8).
"""

from __future__ import annotations

__all__: list[str] = []
