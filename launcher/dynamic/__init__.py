"""Processes started at run time (``MPI.Comm.Spawn``, the job's name service): `core` decides
(node ids, command lines, environments; pure), `server` serves the launcher socket of a job on
this machine and starts the new nodes."""
