"""Typing of ``mpi4py.MPI`` under emucluster: it *is* ``emucluster.MPI`` (see ``MPI.py``)."""

from emucluster.MPI import *  # noqa: F403
from emucluster.MPI import __all__ as __all__
