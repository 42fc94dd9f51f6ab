"""``mpi4py.MPI``: replaced in ``sys.modules`` by ``emucluster.MPI`` itself on import."""

from __future__ import annotations

import sys

from emucluster import MPI as _emucluster_MPI

sys.modules[__name__] = _emucluster_MPI
