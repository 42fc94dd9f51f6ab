"""One host connection of the PCI socket: its record assembler, its write queue, the
descriptors that came with its records, and the pid of the process at its other end with a
pidfd of that very process, taken when it connected (the NIC's signals go through the pidfd:
once that process is gone they fail, never reaching another process that reused its pid).

The daemon (:mod:`nicd.shell.daemon`) owns the connections and decides what to read and write
when; this is the per-connection state and the socket calls that fill it.

Invariants: a descriptor received is closed exactly once, by :meth:`HostConn.pop_fd` (which
hands one over and closes the rest) or :meth:`HostConn.close_fds`; the pidfd is closed once, by
:meth:`HostConn.close`; ``outq_bytes`` is the size of ``outq``.
"""

from __future__ import annotations

import array
import contextlib
import errno
import os
import socket
import struct
import sys
from collections import deque
from typing import Final

from nicd import hostlink as hl

__all__ = ["FD_SPACE", "HostConn", "fds_of", "peer_pid", "peer_pidfd"]

_PEERCRED: Final = struct.Struct("3i")  # struct ucred: pid, uid, gid
# one descriptor a record chunk, as recv_fds(1)
FD_SPACE: Final = socket.CMSG_LEN(struct.calcsize("i"))


def peer_pid(sock: socket.socket) -> int | None:
    """The pid of the process at the other end of a Unix socket (SO_PEERCRED), if known."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, option, _PEERCRED.size)
    except OSError:
        return None
    pid: int = _PEERCRED.unpack(creds)[0]
    return pid or None


_SO_PEERPIDFD: Final = 77  # Linux 6.5: a pidfd of the peer as it connected (not in Python 3.11)
_NO_PEERPIDFD: Final = (errno.ENOPROTOOPT, errno.EINVAL, errno.EOPNOTSUPP)  # an older kernel


def peer_pidfd(sock: socket.socket, pid: int | None) -> int | None:
    """A pidfd of the process at the other end of a Unix socket: the kernel's own record of
    the connecting process (SO_PEERPIDFD) where the kernel has it, else one opened now on
    ``pid`` (its SO_PEERCRED pid: the process that connected, unless it exited meanwhile);
    None if neither is available."""
    if sys.platform == "linux":
        try:
            fd: int = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD)
        except OSError as exc:
            if exc.errno not in _NO_PEERPIDFD:
                return None  # the peer is gone already: its pid may be another's now
        else:
            os.set_inheritable(fd, False)
            return fd
    if pid is None:
        return None
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):  # gone already, or no pidfd_open on this platform
        return None


def fds_of(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors in ``recvmsg``'s ancillary data (SCM_RIGHTS), as ``socket.recv_fds``."""
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return list(fds)


class HostConn:
    """A host's connection to this NIC."""

    __slots__ = (
        "assembler", "conn_id", "fds", "outq", "outq_bytes", "pid", "pidfd", "sock", "writing",
    )  # fmt: skip

    def __init__(self, conn_id: int, sock: socket.socket, max_message: int) -> None:
        self.conn_id = conn_id
        self.sock = sock
        self.pid = peer_pid(sock)
        self.pidfd = peer_pidfd(sock, self.pid)
        """The connected process's pidfd: signals go through it (None: no signal at all)."""
        self.assembler = hl.Assembler(max_message)
        self.outq: deque[bytes] = deque()
        self.outq_bytes = 0
        """Bytes in ``outq`` (bounded by the daemon, which closes the connection past it)."""
        self.writing = False
        self.fds: list[int] = []
        """Descriptors received with the chunks of the record being assembled (at most one
        a chunk: recv_fds asks for one, the kernel closes any more)."""

    def receive(self) -> bytes | None:
        """The next record chunk: None when none is waiting, ``b""`` when the host hung up
        (or the socket failed). A descriptor that came with it is kept for :meth:`pop_fd`."""
        try:
            record, ancillary, _, _ = self.sock.recvmsg(hl.MAX_RECORD_BYTES, FD_SPACE)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return b""
        if ancillary:  # socket.recv_fds's parsing, only when something came with it
            self.take_fds(fds_of(ancillary))
        return record

    def take_fds(self, fds: list[int]) -> None:
        self.fds.extend(fds)

    def pop_fd(self) -> int | None:
        fd = self.fds.pop(0) if self.fds else None
        self.close_fds()
        return fd

    def close_fds(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()

    def close(self) -> None:
        """Close the socket, any descriptor received, the pidfd."""
        self.sock.close()
        self.close_fds()
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = None
