"""Registered memory as a sealed memfd: the segment a host shares with its NIC.

The host creates an anonymous memory file (``memfd_create``), sizes it, maps it, and seals it
against shrinking and growing before it hands the descriptor to nicd over the PCI socket
(SCM_RIGHTS). Because the file cannot shrink, a later ``ftruncate`` by anyone fails and a
remote-memory write can never fault nicd with SIGBUS; because it has no name, nothing is left
in /dev/shm when a job dies, whatever kills it.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os

__all__ = ["REQUIRED_SEALS", "SealedSegment"]

REQUIRED_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
"""Seals nicd insists on before it maps a segment (no shrink, no grow, no unsealing)."""


class SealedSegment:
    """``size`` bytes of shared memory backed by a sealed memfd, mapped in this process."""

    __slots__ = ("_map", "fd", "name", "size")

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        length = max(1, size)
        self.fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, length)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, REQUIRED_SEALS)
            self._map: mmap.mmap | None = mmap.mmap(self.fd, length)
        except BaseException:
            os.close(self.fd)
            raise

    @property
    def buf(self) -> memoryview:
        """The memory itself (``size`` bytes)."""
        if self._map is None:
            raise ValueError(f"segment {self.name!r} is closed")
        return memoryview(self._map)[: self.size]

    def close(self) -> None:
        """Unmap and close this side; the pages go when nicd drops its mapping too."""
        if self._map is not None:
            with contextlib.suppress(BufferError):  # a caller still holds a view: GC frees it
                self._map.close()
            self._map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
