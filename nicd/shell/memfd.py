"""Mapping the memory a host registers: only a sealed memfd passed over the PCI socket.

nicd maps a host's registered region from the descriptor that came with its REGISTER record
(SCM_RIGHTS), never by a name in /dev/shm, and only when the file is sealed against shrinking
(and growing, and unsealing) and is at least as large as the region: a mapping whose file can
shrink later turns a remote-memory write into SIGBUS. Anything else is refused with a reason.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import stat

__all__ = ["REQUIRED_SEALS", "map_sealed_memfd"]

REQUIRED_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


def map_sealed_memfd(fd: int | None, size: int) -> tuple[memoryview | None, str]:
    """Map ``size`` bytes of the memfd ``fd`` (closing ``fd`` in every case). Returns the
    view, or None and the reason it was refused."""
    if fd is None:
        return None, "no memory descriptor came with the request"
    try:
        if size <= 0:
            return None, f"size {size}"
        try:
            info = os.fstat(fd)
            seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        except OSError as exc:  # not a memfd (EINVAL), or a bad descriptor
            return None, f"not a sealable memory file ({exc.strerror})"
        if not stat.S_ISREG(info.st_mode):
            return None, "not a regular memory file"
        if seals & REQUIRED_SEALS != REQUIRED_SEALS:
            return None, "the memory file is not sealed against shrinking and growing"
        if info.st_size < size:
            return None, f"the memory file holds {info.st_size} B, not {size}"
        try:
            return memoryview(mmap.mmap(fd, size)), ""
        except (OSError, ValueError, OverflowError) as exc:
            return None, f"cannot map it ({exc})"
    finally:
        os.close(fd)
