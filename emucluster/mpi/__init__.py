"""emucluster's MPI implementation, split by job; ``emucluster.MPI`` is the public surface.

Importing this package (or `emucluster.coll.context`) does not start MPI: only importing
``emucluster.MPI`` initialises the library, as importing ``mpi4py.MPI`` does.
"""

from __future__ import annotations

__all__ = ["stats"]


def stats() -> dict[str, object]:
    """This rank's matching-queue statistics and protocol counters (see `runtime.stats`)."""
    from emucluster.mpi.runtime import stats as _stats

    return _stats()
