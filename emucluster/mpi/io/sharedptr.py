"""The shared file pointer of an open file: one integer every process of the file's group reads
and advances atomically, kept in a small hidden file beside the data file.

Any process may move it at any time (``Write_shared`` is not collective), so it lives where
all of them reach it without the others' help: ``.<name>.<token>.shfp`` in the data file's
directory (shared like the data file itself when the job spans hosts), read and written under
an exclusive POSIX record lock (``lockf``). The token is drawn by the group's first process
at Open and broadcast, so two openings of one file never share a pointer. The file is made
at first use and removed at Close. Values count etypes of the current view.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct

__all__ = ["SharedPointer"]

_VALUE = struct.Struct("<q")


class SharedPointer:
    """The pointer of one open file (one object per process)."""

    __slots__ = ("_fd", "path")

    def __init__(self, data_path: str, token: str) -> None:
        head, name = os.path.split(os.path.abspath(data_path))
        self.path = os.path.join(head, f".{name}.{token}.shfp")
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return self._fd

    def _read(self, fd: int) -> int:
        data = os.pread(fd, _VALUE.size, 0)
        return _VALUE.unpack(data)[0] if len(data) == _VALUE.size else 0

    def fetch_add(self, delta: int) -> int:
        """Advance the pointer by ``delta``; its value before."""
        fd = self._open()
        fcntl.lockf(fd, fcntl.LOCK_EX)
        try:
            value = self._read(fd)
            if delta:
                os.pwrite(fd, _VALUE.pack(value + delta), 0)
            return value
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)

    def get(self) -> int:
        """The pointer's value."""
        return self.fetch_add(0)

    def set(self, value: int) -> None:
        """Set the pointer (callers make this collective)."""
        fd = self._open()
        fcntl.lockf(fd, fcntl.LOCK_EX)
        try:
            os.pwrite(fd, _VALUE.pack(value), 0)
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)

    def close(self, remove: bool) -> None:
        """Close this process's descriptor; ``remove`` the file too (one process does)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if remove:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
