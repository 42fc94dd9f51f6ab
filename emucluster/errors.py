"""The root of every exception the host library raises on purpose (STYLE §5: one base per package).

Catch `EmuclusterError` to catch them all. The classes below it live beside the code that raises
them, each saying who raises it and what the caller should do:

* ``emucluster.port.client.PortError``: the NIC refused a request or the PCI socket failed.
* ``emucluster.port.progress.DeadlockError``: a wait that can never be satisfied (singleton mode).
* ``emucluster.mpi.errors.Exception`` (``MPI.Exception``): an MPI call failed; it stays a
  RuntimeError, as in mpi4py, and carries an MPI error class.
* ``emucluster.coll.UnknownAlgorithmError``: a collective algorithm name nobody registered.
* ``emucluster.coll.context.SimDeadlockError``: the in-memory collective simulation is stuck.
* the GRIM and NICVM host errors (``ProtocolError``, ``RMError``, ``NicvmRunError``).

This module imports nothing, so every layer (the sans-IO cores included) may import it.
"""

from __future__ import annotations

__all__ = ["EmuclusterError"]


class EmuclusterError(Exception):
    """Base of the host library's exceptions. Never raised itself: catch it to handle any
    failure the library reports on purpose (a bug in the library raises something else)."""
