"""The ``mpi4py`` stand-in that runs unmodified mpi4py programs on emucluster.

`SHIM_PATH` is a directory holding a package named ``mpi4py`` whose ``mpi4py.MPI`` *is*
``emucluster.MPI``. ``emurun --mpi4py`` (or ``EMUCLUSTER_MPI4PY=1`` in emurun's environment)
puts it first on the hosts' PYTHONPATH, so ``from mpi4py import MPI`` resolves here without
editing the program. ``python -m emucluster.mpi4py_shim`` prints the directory, for use
outside emurun: ``PYTHONPATH=$(python -m emucluster.mpi4py_shim) python app.py``.
"""

from __future__ import annotations

import os

__all__ = ["ENV_SWITCH", "SHIM_PATH", "pythonpath"]

SHIM_PATH = os.path.dirname(os.path.abspath(__file__))
"""The directory to put on PYTHONPATH (it contains the ``mpi4py`` package)."""

ENV_SWITCH = "EMUCLUSTER_MPI4PY"
"""Set to 1 (by ``emurun --mpi4py``) when the hosts run with the shim."""


def pythonpath(current: str | None) -> str:
    """``current`` PYTHONPATH with the shim directory first (once)."""
    parts = [p for p in (current or "").split(os.pathsep) if p and p != SHIM_PATH]
    return os.pathsep.join([SHIM_PATH, *parts])
