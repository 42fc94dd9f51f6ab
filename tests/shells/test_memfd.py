"""Which descriptors nicd agrees to map as registered memory (nicd/shell/memfd.py), and the host's
sealed segment (emucluster/port/sharedmem.py)."""

from __future__ import annotations

import os
import tempfile

import pytest

from emucluster.port.sharedmem import SealedSegment
from nicd.shell.memfd import map_sealed_memfd


def test_a_sealed_segment_maps_and_shares_its_bytes() -> None:
    segment = SealedSegment("t", 4096)
    segment.buf[:5] = b"hello"
    view, why = map_sealed_memfd(os.dup(segment.fd), 4096)
    assert view is not None, why
    assert bytes(view[:5]) == b"hello"
    view[5:6] = b"!"
    assert bytes(segment.buf[:6]) == b"hello!"
    with pytest.raises(PermissionError):
        os.ftruncate(segment.fd, 10)
    view.release()
    segment.close()


def test_unsealed_short_foreign_or_missing_descriptors_are_refused() -> None:
    unsealed = os.memfd_create("u", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(unsealed, 4096)
    view, why = map_sealed_memfd(unsealed, 4096)
    assert view is None
    assert "not sealed" in why
    segment = SealedSegment("short", 100)
    view, why = map_sealed_memfd(os.dup(segment.fd), 4096)
    assert view is None
    assert "holds 100 B" in why
    segment.close()
    with tempfile.TemporaryFile(dir="/dev/shm") as named:
        named.truncate(4096)
        view, why = map_sealed_memfd(os.dup(named.fileno()), 4096)
        assert view is None
        assert "not sealed" in why
    with tempfile.TemporaryFile() as disk:
        disk.truncate(4096)
        view, why = map_sealed_memfd(os.dup(disk.fileno()), 4096)
        assert view is None
    assert map_sealed_memfd(None, 4096) == (None, "no memory descriptor came with the request")


def test_the_descriptor_is_closed_whatever_the_outcome() -> None:
    segment = SealedSegment("c", 64)
    fd = os.dup(segment.fd)
    map_sealed_memfd(fd, 1 << 40)  # too large: refused
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)
    segment.close()
