"""The shell of a PMI-1 client: one blocking socket to the process manager, one request at a
time, each with a time limit.

`PmiChannel.from_environ` connects the way MPICH's simple PMI client does: the descriptor in
``PMI_FD`` (inherited, already connected: Hydra's default, Slurm's ``--mpi=pmi2``), else a TCP
connection to ``PMI_PORT`` (``host:port``) followed by the ``initack`` hand-shake with
``PMI_ID``. Every call sends the session's request and reads until the session has the reply;
a manager that closes the connection, or says nothing for ``timeout_s``, is a `PmiChannelError`
(a dead launcher is an error, never a hang).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from typing import TYPE_CHECKING, TypeVar

from emucluster.errors import EmuclusterError
from emucluster.pmi.session import Maxes, PmiSession, PortPlacement

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "ENV_PMI_FD",
    "ENV_PMI_ID",
    "ENV_PMI_PORT",
    "ENV_PMI_RANK",
    "ENV_PMI_SIZE",
    "PmiChannel",
    "PmiChannelError",
    "started_by_pmi",
]

ENV_PMI_FD = "PMI_FD"
ENV_PMI_PORT = "PMI_PORT"
ENV_PMI_ID = "PMI_ID"
ENV_PMI_RANK = "PMI_RANK"
ENV_PMI_SIZE = "PMI_SIZE"
_READ_BYTES = 4096
T = TypeVar("T")


class PmiChannelError(EmuclusterError):
    """The connection to the process manager failed: it could not be opened, it closed, or
    a reply did not come in time. The rank cannot take part in its job."""


def started_by_pmi(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` is that of a process a PMI-1 launcher started."""
    return bool(environ.get(ENV_PMI_FD) or environ.get(ENV_PMI_PORT))


class PmiChannel:
    """A connected PMI-1 session (see the module docstring)."""

    def __init__(self, sock: socket.socket, timeout_s: float) -> None:
        self.sock = sock
        self.timeout_s = timeout_s
        """Longest wait for one reply (a barrier waits for the slowest rank)."""
        self.session = PmiSession()
        self.placement: PortPlacement | None = None
        """What the PMI_PORT hand-shake said (None over PMI_FD)."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], timeout_s: float) -> PmiChannel:
        """Connect as the environment says, then ``init``; PmiChannelError on failure."""
        fd_text, port_text = environ.get(ENV_PMI_FD), environ.get(ENV_PMI_PORT)
        try:
            if fd_text:
                fd = int(fd_text)
                sock = socket.socket(fileno=fd)
                os.set_inheritable(fd, False)  # the rank's own children are not PMI clients
            elif port_text:
                host, _, port = port_text.rpartition(":")
                sock = socket.create_connection((host, int(port)), timeout=timeout_s)
            else:
                raise PmiChannelError("neither PMI_FD nor PMI_PORT is set")
        except (OSError, ValueError) as exc:
            where = f"PMI_FD={fd_text}" if fd_text else f"PMI_PORT={port_text}"
            raise PmiChannelError(f"cannot reach the process manager at {where}: {exc}") from None
        channel = cls(sock, timeout_s)
        if not fd_text:
            try:
                pmi_id = int(environ.get(ENV_PMI_ID, ""))
            except ValueError:
                raise PmiChannelError("PMI_PORT is set but PMI_ID is not a number") from None
            placement = channel.call(channel.session.initack(pmi_id))
            assert isinstance(placement, PortPlacement)
            channel.placement = placement
        channel.call(channel.session.init())
        return channel

    def call(self, request: bytes) -> object:
        """Send one request and return its reply's value (PmiRefused, PmiProtocolError from
        the session; PmiChannelError for the connection)."""
        try:
            self.sock.sendall(request)
        except OSError as exc:
            raise PmiChannelError(f"PMI: cannot send to the process manager: {exc}") from None
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PmiChannelError(f"PMI: no reply to {request!r:.60} in {self.timeout_s} s")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(_READ_BYTES)
            except TimeoutError:
                continue
            except OSError as exc:
                raise PmiChannelError(f"PMI: connection to the process manager: {exc}") from None
            if not data:
                raise PmiChannelError(
                    f"PMI: the process manager closed the connection ({request!r:.60})"
                )
            done = self.session.feed(data)
            if done is not None:
                return done.value

    # -- the requests the wiring-up uses -------------------------------------------------------

    def maxes(self) -> Maxes:
        """``get_maxes``: the manager's length limits."""
        value = self.call(self.session.get_maxes())
        assert isinstance(value, Maxes)
        return value

    def kvsname(self) -> str:
        """``get_my_kvsname``: the job's key-value space."""
        return str(self.call(self.session.get_my_kvsname()))

    def put(self, kvsname: str, key: str, value: str) -> None:
        """``put`` ``key`` = ``value`` (visible once every rank passed the next barrier)."""
        self.call(self.session.put(kvsname, key, value))

    def barrier(self) -> None:
        """``barrier_in`` until ``barrier_out``: every rank of the job got here."""
        self.call(self.session.barrier_in())

    def get(self, kvsname: str, key: str) -> str:
        """``get``: the value under ``key`` (PmiRefused when nobody put it)."""
        return str(self.call(self.session.get(kvsname, key)))

    def finalize(self) -> None:
        """``finalize``, then close the connection."""
        try:
            self.call(self.session.finalize())
        finally:
            self.close()

    def abort(self, exitcode: int, message: str) -> None:
        """Tell the manager to end the job (best effort: no reply is read)."""
        with contextlib.suppress(OSError, EmuclusterError):
            self.sock.sendall(self.session.abort(exitcode, message))

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with contextlib.suppress(OSError):
            self.sock.close()
