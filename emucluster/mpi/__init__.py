"""emucluster's MPI implementation, one sub-package per concern; ``emucluster.MPI`` is the surface.

Importing this package does not start MPI: only importing ``emucluster.MPI`` initialises the
library (``lifecycle.init``), as importing ``mpi4py.MPI`` does. The rooms, lowest first:
``constants``, ``errors``, ``errhandler``, ``info`` (handles and constants that import nothing
above them); ``buffer/`` and ``datatype/`` (what a message's memory is); ``request/``
(completion); ``runtime`` (one rank's engine, settings and context ids) and ``lifecycle`` (Init,
Finalize, Abort of this process); ``comm/`` (communicators and the plain objects they delegate
to), ``pt2pt/``, ``collective/``, ``topo/``; ``rma/``, ``io/``, ``dynamic/`` for
one-sided communication, MPI-IO and processes started at run time.
"""

from __future__ import annotations

from emucluster.mpi.lifecycle import stats

__all__ = ["stats"]
