"""The NICVM data packet preamble: which module runs a packet, for which root and communicator.

Thesis §4.3.3: "Both the source and data packets contain a name identifying the module with
which they're associated." A ``NICVM_DATA`` message's payload starts with this preamble; the
module sees only what follows it (``packet_length()`` and the payload primitives), and the host
gets the same part with ``root`` and ``comm`` in its RecvEvent. Big-endian::

    root rank (16) | communicator id (16) | hops (8) | name length (8) | name (UTF-8, 1..64)

``hops`` is 0 when a host sends the packet and one more on each module send that forwards it,
so a module that re-sends what it receives stops after ``NicvmConfig.max_hops`` NICs.

No I/O; ``decode_preamble_untrusted`` raises only ``BadPacket``.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from nicd.errors import BadPacket

__all__ = [
    "MAX_HOPS",
    "MAX_NAME_BYTES",
    "Preamble",
    "check_name",
    "decode_preamble_untrusted",
    "encode_preamble",
]

MAX_NAME_BYTES = 64
# root rank (16) | communicator id (16) | hops (8) | name length (8)
_HEAD = struct.Struct(">HHBB")
MAX_HOPS = 0xFF


class Preamble(NamedTuple):
    """The decoded preamble and where the module's payload starts."""

    name: str
    root: int
    comm: int
    body_offset: int
    hops: int = 0
    """Module sends this packet went through before it reached this NIC."""


def check_name(name: str) -> bytes:
    """The UTF-8 bytes of a module name; ValueError if empty, too long or not printable."""
    raw = name.encode()
    if not raw or len(raw) > MAX_NAME_BYTES or not name.isprintable() or name != name.strip():
        raise ValueError(f"module name {name!r} must be 1..{MAX_NAME_BYTES} printable bytes")
    return raw


def encode_preamble(name: str, root: int, comm: int, hops: int = 0) -> bytes:
    """The preamble naming module ``name``, root rank ``root``, communicator ``comm``, after
    ``hops`` module sends (0 from a host)."""
    raw = check_name(name)
    return _HEAD.pack(root & 0xFFFF, comm & 0xFFFF, min(hops, MAX_HOPS), len(raw)) + raw


def decode_preamble_untrusted(payload: bytes) -> Preamble:
    """Decode the preamble at the start of ``payload``; BadPacket if it is not one."""
    if len(payload) < _HEAD.size:
        raise BadPacket("nicvm_truncated", f"{len(payload)} bytes")
    root, comm, hops, length = _HEAD.unpack_from(payload)
    end = _HEAD.size + length
    if length == 0 or length > MAX_NAME_BYTES or len(payload) < end:
        raise BadPacket("nicvm_bad_name", f"name length {length}")
    try:
        name = payload[_HEAD.size : end].decode()
    except UnicodeDecodeError:
        raise BadPacket("nicvm_bad_name", "not UTF-8") from None
    if not name.isprintable():
        raise BadPacket("nicvm_bad_name", "not printable")
    return Preamble(name, root, comm, end, hops)
