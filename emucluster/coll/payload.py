"""Framing of per-rank blocks inside one payload, and small helpers shared by the algorithms.

Gather and scatter move several ranks' blocks in one message. Blocks may differ in length
(pickled objects) and may be empty, so each is framed as an 8-byte big-endian length and the
bytes. Frames are self-delimiting, so the concatenation of two framed lists is the framed
concatenation: an internal tree node forwards its children's payloads without unpacking them.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from emucluster.coll.context import CollRequest

__all__ = ["CONCAT", "Concat", "pack_blocks", "received", "unpack_blocks"]

# block length, unsigned 64-bit big-endian; the block's bytes follow
_LENGTH = struct.Struct(">Q")


def pack_blocks(blocks: Iterable[bytes]) -> bytes:
    """Frame ``blocks`` into one payload (empty blocks allowed)."""
    parts: list[bytes] = []
    for block in blocks:
        parts.append(_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def unpack_blocks(payload: bytes, count: int | None = None) -> list[bytes]:
    """The blocks framed in ``payload``; ``count``, if given, is how many there must be.

    Raises ValueError on a malformed payload (a peer running a different algorithm).
    """
    view = memoryview(payload)
    blocks: list[bytes] = []
    offset = 0
    end = len(view)
    while offset < end:
        if end - offset < _LENGTH.size:
            raise ValueError(f"truncated block header at byte {offset} of {end}")
        (length,) = _LENGTH.unpack_from(view, offset)
        offset += _LENGTH.size
        if length > end - offset:
            raise ValueError(f"block of {length} bytes at byte {offset} overruns {end}")
        blocks.append(bytes(view[offset : offset + length]))
        offset += length
    if count is not None and len(blocks) != count:
        raise ValueError(f"expected {count} blocks, payload holds {len(blocks)}")
    return blocks


def received(request: CollRequest) -> bytes:
    """The bytes a completed irecv delivered."""
    result = request.result
    if result is None:
        raise RuntimeError("collective receive resumed without data (progress engine bug)")
    return result


class Concat:
    """The `Combine` ``left + right``: associative, not commutative, so it exposes operand order.

    Allgather runs as an allreduce of framed blocks under this operation.
    """

    commute = False

    def __call__(self, left: bytes, right: bytes) -> bytes:
        """``left`` followed by ``right``."""
        return left + right


CONCAT = Concat()
