"""A rank's line to its launcher: one request, one reply, over ``<run dir>/launcher.sock``.

Only emurun on one machine serves that socket; a rank started any other way (under agents, a
PMI launcher, or alone) finds none and gets the reason as ``MPI.Exception`` (ERR_SPAWN for a
spawn, ERR_SERVICE / ERR_NAME for the name service). Blocking: the caller is an MPI call that
waits anyway; every wait has a limit.
"""

from __future__ import annotations

import os
import socket

from emucluster.mpi.dynamic import wire
from emucluster.mpi.errors import Exception as MPIException

__all__ = ["REPLY_TIMEOUT_S", "ask"]

REPLY_TIMEOUT_S = 300.0
"""Longest wait for an answer (starting nodes on a loaded machine takes seconds)."""


def ask(run_dir: str | None, request: wire.Request, error_class: int) -> wire.Reply:
    """``request``'s answer from the launcher of this job; MPI.Exception(``error_class``) if
    there is no launcher to ask, it cannot be reached, or it refused."""
    if not run_dir:
        raise MPIException(error_class, "not started by emurun: no launcher to ask")
    path = os.path.join(run_dir, wire.SOCKET_NAME)
    if not os.path.exists(path):
        raise MPIException(
            error_class,
            "this job's launcher starts no processes at run time (only emurun's one-machine "
            "launch does; see docs/guide/mpi.md)",
        )
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(REPLY_TIMEOUT_S)
            sock.connect(path)
            sock.sendall(wire.encode(request))
            data = b""
            while not data.endswith(b"\n") and len(data) <= wire.MAX_LINE:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        raise MPIException(error_class, f"cannot reach the launcher: {exc}") from None
    try:
        reply = wire.decode_reply(data)
    except wire.BadMessage as exc:
        raise MPIException(error_class, f"the launcher's answer: {exc}") from None
    if reply.error:
        raise MPIException(error_class, reply.error)
    return reply
