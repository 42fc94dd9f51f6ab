"""Started by a PMI launcher: the simple PMI-1 wire protocol and the wiring-up it allows.

When a PMI-1 process manager (MPICH's Hydra ``mpiexec``, Slurm's ``srun --mpi=pmi2``, the
``mpich`` wheel's ``mpiexec``) rather than emurun starts a rank, ``import emucluster.MPI``
finds ``PMI_FD`` (or ``PMI_PORT`` + ``PMI_ID``) in its environment and the rank brings its
own node up through the launcher's key-value space. The room's modules, lowest first:

* ``wire.py`` (core): one line of the protocol, ``cmd=NAME key=value ...``, parsed and written;
  a malformed line is a `PmiProtocolError` naming what is wrong.
* ``session.py`` (core): `PmiSession`, the client's side of the lock-step exchange: which
  request may go next, which reply each awaits, the replies checked and turned into values.
* ``channel.py`` (shell): `PmiChannel`, the session over the inherited descriptor or the TCP
  port, one blocking request at a time with a time limit; a launcher that vanishes is an error.
* ``bootstrap.py`` (shell): the wiring-up: start this node's nicd on a lifeline, publish its
  address, barrier, read everyone's, install the routes, and the same environment emurun would
  give the host; at Finalize, a barrier, then the nicd stops.
"""

from __future__ import annotations

__all__: list[str] = []
