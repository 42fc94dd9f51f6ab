"""GRIM remote memory (seed 002 §4.5) for programs run by emurun, with or without MPI.

    from emucluster import rm

    block = rm.alloc(4096)                       # registered memory; block.buf is writable
    send block.handle to a peer (it pickles; Handle.pack() gives 18 bytes)
    rm.write(peer, handle, 0, b"data", notify=(handle, 4092, 1))   # RM-V
    rm.write(peer, handle, 0, b"data", physical=True)               # RM-P
    rm.read(peer, handle, 0, 4, into=block)                         # RM-RV

RM-V addresses the peer's block by virtual address; its NIC translates through a translation
cache (static entries programmed at ``alloc``, dynamic ones filled on a miss by asking the
host). RM-P addresses (segment, offset) and is not translated. ``notify=(handle, offset,
value)`` sets a 32-bit little-endian word when the operation is complete (a write's word is at
the destination, a read's at the reader). Refused addresses raise :class:`RMError`: nothing
is ever written outside a block. Ordering: see :mod:`emucluster.grim` (RM may pass AMs).
"""

from __future__ import annotations

from emucluster.grim import Block, Endpoint, Handle, RMError, RmRequest, default_endpoint

__all__ = [
    "Block",
    "Endpoint",
    "Handle",
    "RMError",
    "RmRequest",
    "alloc",
    "free",
    "iread",
    "iwrite",
    "read",
    "write",
]


def alloc(nbytes: int, *, static: bool = True) -> Block:
    """Allocate ``nbytes`` of registered memory."""
    return default_endpoint().alloc(nbytes, static=static)


def free(block: Block) -> None:
    """Free a block (later remote accesses to it are refused)."""
    default_endpoint().free(block)


def write(
    dest_rank: int,
    handle: Handle,
    offset: int,
    data: bytes | bytearray | memoryview,
    *,
    physical: bool = False,
    notify: tuple[Handle, int, int] | None = None,
) -> None:
    """Write ``data`` at ``offset`` of ``dest_rank``'s block; returns once it is in place."""
    default_endpoint().write(dest_rank, handle, offset, data, physical=physical, notify=notify)


def iwrite(
    dest_rank: int,
    handle: Handle,
    offset: int,
    data: bytes | bytearray | memoryview,
    *,
    physical: bool = False,
    notify: tuple[Handle, int, int] | None = None,
) -> RmRequest:
    """Start a write; ``.wait()`` / ``.test()`` the request."""
    return default_endpoint().iwrite(
        dest_rank, handle, offset, data, physical=physical, notify=notify
    )


def read(
    src_rank: int,
    handle: Handle,
    offset: int,
    nbytes: int,
    into: Block,
    into_offset: int = 0,
    *,
    notify: tuple[Handle, int, int] | None = None,
) -> None:
    """Read ``nbytes`` at ``offset`` of ``src_rank``'s block into local block ``into``."""
    default_endpoint().read(src_rank, handle, offset, nbytes, into, into_offset, notify=notify)


def iread(
    src_rank: int,
    handle: Handle,
    offset: int,
    nbytes: int,
    into: Block,
    into_offset: int = 0,
    *,
    notify: tuple[Handle, int, int] | None = None,
) -> RmRequest:
    """Start a read; ``.wait()`` / ``.test()`` the request."""
    return default_endpoint().iread(
        src_rank, handle, offset, nbytes, into, into_offset, notify=notify
    )
