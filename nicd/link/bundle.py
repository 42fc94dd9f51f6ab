"""Link bundles: several Myrinet frames to one peer carried in one UDP datagram. No protocol.

A real Myrinet link carries packets back to back and costs its NIC nothing per packet beyond
the bytes; a UDP datagram costs each end a system call and, often, a wake-up. When one turn of
nicd's event loop puts several frames on the link for the same peer (a burst of host sends
read together, a go-back-N resend), the shell sends them as one bundle and the peer's shell
splits it and hands each frame to its core as if it had come alone. Frames stay whole: each
keeps its route, header and CRC, and the core has already decided each one's fate (the fault
plan loses, corrupts or delays frames, not bundles), so bundling changes the cost of the link,
never what the protocol sees.

Layout, big-endian::

    route length 0 (8) | packet type 0x0637 (16) | frame count (16) |
    count x (frame length (16) | frame)

No GRIM frame can be read as a bundle: a frame with an empty route has GRIM's packet type
0x0636 there. The bundle has no CRC of its own: every frame inside has one.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from nicd.errors import BadPacket

__all__ = [
    "BUNDLE_PACKET_TYPE",
    "MAX_BUNDLE_BYTES",
    "MAX_BUNDLE_FRAMES",
    "MAX_FRAME_BYTES",
    "MIN_FRAME_BYTES",
    "encode_bundle",
    "is_bundle",
    "plan_bundles",
    "split_bundle_untrusted",
]

BUNDLE_PACKET_TYPE: Final = 0x0637
_HEAD: Final = struct.Struct(">BHH")
_LEN: Final = struct.Struct(">H")
_PREFIX: Final = _HEAD.pack(0, BUNDLE_PACKET_TYPE, 0)[:3]
MAX_FRAME_BYTES: Final = 0xFFFF
"""Longest frame a bundle can carry (its length is 16 bits)."""
MAX_BUNDLE_BYTES: Final = 60 * 1024
"""Most bytes one bundle may take: under UDP's 65,507-byte datagram."""
MAX_BUNDLE_FRAMES: Final = 256
"""Most frames one bundle may carry (a turn of nicd's loop reads at most 64 host records), so
one datagram from a bad peer cannot make a NIC decode thousands of frames."""
MIN_FRAME_BYTES: Final = 9
"""Shortest frame a bundle may carry: route length, first word and CRC (``wire``'s own floor)."""


def is_bundle(datagram: bytes) -> bool:
    """True when ``datagram`` starts like a bundle (route length 0, packet type 0x0637)."""
    return datagram[:3] == _PREFIX


def encode_bundle(frames: Sequence[bytes]) -> bytes:
    """One datagram carrying ``frames`` (1 to MAX_BUNDLE_FRAMES of them, each of
    MIN_FRAME_BYTES to MAX_FRAME_BYTES)."""
    if not frames or len(frames) > MAX_BUNDLE_FRAMES:
        raise ValueError(f"a bundle carries 1 to {MAX_BUNDLE_FRAMES} frames, not {len(frames)}")
    parts = [_HEAD.pack(0, BUNDLE_PACKET_TYPE, len(frames))]
    for frame in frames:
        if not MIN_FRAME_BYTES <= len(frame) <= MAX_FRAME_BYTES:
            raise ValueError(f"a frame of {len(frame)} bytes does not fit a bundle")
        parts.append(_LEN.pack(len(frame)))
        parts.append(frame)
    return b"".join(parts)


def split_bundle_untrusted(datagram: bytes) -> list[bytes]:
    """The frames of a bundle, in order. Raises only :class:`BadPacket` (reason ``bundle``)
    for one that is truncated, empty or over MAX_BUNDLE_FRAMES, holds a frame shorter than
    MIN_FRAME_BYTES, says more or fewer frames than it holds, or has bytes left over; the
    frames themselves are not checked further (their CRC is the core's business)."""
    n = len(datagram)
    if n < 5 or datagram[:3] != _PREFIX:  # _HEAD.size; is_bundle
        raise BadPacket("bundle", "no bundle header")
    count = datagram[3] << 8 | datagram[4]  # _HEAD's frame count
    if not 0 < count <= MAX_BUNDLE_FRAMES:
        raise BadPacket("bundle", f"{count} frames")
    frames: list[bytes] = []
    at = 5
    for _ in range(count):
        if at + 2 > n:
            raise BadPacket("bundle", f"truncated after {len(frames)} of {count} frames")
        length = datagram[at] << 8 | datagram[at + 1]  # _LEN, without a tuple
        if length < MIN_FRAME_BYTES:
            raise BadPacket("bundle", f"frame {len(frames)} of {length} bytes")
        at += 2
        end = at + length
        if end > n:
            raise BadPacket("bundle", f"frame {len(frames)} runs past the datagram")
        frames.append(datagram[at:end])
        at = end
    if at != n:
        raise BadPacket("bundle", f"{n - at} bytes after the last frame")
    return frames


def plan_bundles(lengths: Sequence[int]) -> list[range]:
    """Cut frames of these ``lengths`` (all to one peer, in order) into runs of indices that
    each fit one bundle (MAX_BUNDLE_BYTES, MAX_BUNDLE_FRAMES); a frame too long to share a
    datagram gets a run of its own. Every index is in exactly one run, in order."""
    runs: list[range] = []
    first = 0
    size = _HEAD.size
    for i, length in enumerate(lengths):
        cost = _LEN.size + length
        if i > first and (size + cost > MAX_BUNDLE_BYTES or i - first >= MAX_BUNDLE_FRAMES):
            runs.append(range(first, i))
            first, size = i, _HEAD.size
        size += cost
        if length > MAX_FRAME_BYTES or size > MAX_BUNDLE_BYTES:
            runs.append(range(first, i + 1))
            first, size = i + 1, _HEAD.size
    if first < len(lengths):
        runs.append(range(first, len(lengths)))
    return runs
