"""emucluster: the host side of an emulated node: GM port client and mpi4py-compatible MPI."""

from __future__ import annotations

__all__: list[str] = []
