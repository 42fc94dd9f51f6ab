"""The papers' benchmarks and the reproduction report; the ``emubench`` command.

A top-level package above ``nicd``, ``emucluster`` and ``launcher``: it may import any of them,
and none of them imports it (``tests/unit/test_layering.py``). Each module is a benchmark's
driver (``emubench <name> ...``) and, where it runs under emurun, its rank program
(``python -m emubench.<module> ...``); `emubench.common` holds their shared plumbing,
`emubench.suite` and `emubench.report` the ``all`` and ``report`` commands.

* `reduce_skew`: application-bypass reduce under skew (thesis Figs 3.6-3.10).
* `mcast` (+ `mcast_plot`): NIC multisend, GM- and MPI-level multicast latency, CPU time in
  Bcast under skew (seed 001 Figs 4-8).
* `grim`: GRIM's interfaces (seed 002 Figs 4.6, 4.10, AM and RM latency).
* `nicvm` (+ `nicvm_vm`, the VM alone): NICVM (thesis Figs 4.9-4.18).
* `unexpected_queue`: search cost per entry vs unexpected-queue depth (seed 004 Fig 4).
* `mpi_compare` (+ `mpi_micro`, its ranks): emucluster's MPI against mpi4py on MPICH.
* `nicd_port`: nicd port-to-port latency and bandwidth against a relay floor.
* `localcluster`: N nicds on loopback without the launcher (nicd_port and integration tests).
"""

from __future__ import annotations

__all__: list[str] = []
