"""Myrinet-framed GRIM packets: bytes <-> frozen records, CRC. No protocol logic.

Frame layout (one UDP datagram = one Myrinet packet), all integers big-endian::

    route length (8) | route bytes (route length) | body | CRC32 (32, over all before it)

Every body starts with the same word: packet type 0x0636 (16, GRIM's Myricom id) | message
type (8) | flags (8). Data bodies then carry the rest of the data header, the piggy-backed
ACK word when the flags say so (:data:`ACKED`), and the payload (none in a :data:`SKIP`
packet, which only keeps the sequence of a message its receiver aborted);
control (ACK/NACK) bodies carry four more words and nothing else (GRIM 4.1.1: "control
messages are only 8 bytes long"; ours are 20 because UDP lacks Myrinet's in-order, lossless
links, so the stream key and its epoch must travel along). The one exception is SACK
(selective recovery, ``nicd --recovery selective``): the same five words and a 64-bit bitmap
of the packets the receiver holds beyond the cumulative sequence number.

Stream epochs: every outgoing stream instance has a 16-bit epoch (a new one when an idle
stream is retired or a nicd starts; :mod:`nicd.link.channels`). Data packets carry theirs in
the half of w1 GRIM used for the NI token (ours was the low 16 bits of the sequence number,
which no receiver read); every ACK/NACK/SACK carries the epoch of the stream it answers
(w4), and a piggy-backed ACK the epoch of the stream it acknowledges (w13). A packet of an
epoch its stream no longer has is counted ``stale_epoch`` and dropped.

Records are slotted dataclasses treated as immutable but not ``frozen``: on CPython 3.11 a
frozen one with 15 fields takes 1.7 us to build against 0.3 us, and every packet builds several.
The two built per packet write their own ``__init__`` (same fields, order and defaults): the one
``dataclass`` generates stays interpreted code in the compiled build (docs/dev/build.md).

Why over 500 lines: the wire format is one job, each packet kind's layout, encoder, decoder and
checks beside the others, so a change of a shared word is made in one place.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Final

from nicd.errors import BadPacket

__all__ = [
    "ACKED",
    "ACK_WORD",
    "CONTROL_HEADER",
    "CONTROL_TYPES",
    "CRC",
    "DATA_HEADER",
    "ESTABLISHED",
    "FRAG_FLAGS",
    "GRIM_PACKET_TYPE",
    "HAS_FIRST",
    "HAS_LAST",
    "MAX_NODE",
    "MAX_PORT",
    "MCAST_EPOCH_MASK",
    "SACK_BITS",
    "SACK_TRAILER",
    "SIGNAL_TYPES",
    "SKIP",
    "ControlPacket",
    "DataPacket",
    "FragFlags",
    "McastAck",
    "McastAckKind",
    "MsgType",
    "NackReason",
    "decode_mcast_ack_untrusted",
    "decode_untrusted",
    "encode",
    "encode_control",
    "encode_data",
    "fragment_flags",
    "mcast_ack_packet",
]

GRIM_PACKET_TYPE: Final = 0x0636  # GRIM's Myrinet packet type (seed 002, Fig 4.2)
MAX_NODE: Final = 0xFFFF  # node ids are 16-bit
MAX_PORT: Final = 0xFFFF  # ports (GRIM endpoints / logical channels) are 16-bit
MAX_ROUTE_BYTES: Final = 255

# Data header, 12 words (48 bytes), after GRIM Fig 4.2:
#   w0  packet type 0x0636 (16) | message type (8) | flags (8): FIRST 1, LAST 2, ACKED 4,
#       SKIP 8 (a fragment of a message its receiver aborted, NACK ABORTED: no payload, the
#       offset and length fields as the fragment had them; only the sequence number counts),
#       ESTABLISHED 0x10 (the receiver acknowledged this stream epoch before: a receiver with
#       no state for it lost it, restarted or evicted, and answers NACK RESET)
#   w1  stream epoch (16; MCAST_DATA: the group epoch) | multicast group (16)
#   w2  sequence number (32), per (source LC, destination node, destination LC) stream
#   w3  source node (16) | source endpoint = source LC (16)
#   w4  destination node (16) | destination endpoint = destination LC (16)
#   w5  active-message handler (16) | fragment payload length (16)
#   w6  message length in bytes (32)
#   w7  offset of this fragment in the message (32)
#   w8..w11  user arguments 0-3 (32 each)
#   w12 (only with the ACKED flag) piggy-backed cumulative ACK (32): the next sequence number
#       the sender of this packet expects on the reverse stream, i.e. from (destination node,
#       destination LC) to (source node, source LC); exactly what an ACK control with those
#       fields would say, so a stream with data both ways needs no ACK datagram of its own
#   w13 (only with ACKED) the epoch of the stream that ACK acknowledges (16) | zero (16)
DATA_HEADER: Final = struct.Struct(">HBBHHIHHHHHHII4I")
ACK_WORD: Final = struct.Struct(">IHH")
ACKED: Final = 0x04
"""Data flags bit (beside the fragment flags): an ACK word follows the header."""
SKIP: Final = 0x08
"""Data flags bit: this fragment's message was aborted by its receiver (NACK ABORTED); the
packet carries no payload and is taken only to keep the stream's sequence whole."""
ESTABLISHED: Final = 0x10
"""Data flags bit: the sender has had an acknowledgement of this stream epoch, so its
receiver must hold the stream's state (none: it lost it; NACK RESET)."""

# Control header (ACK, NACK, SACK, PING, PONG, MCAST_ACK), 5 words (20 bytes):
#   w0  packet type 0x0636 (16) | message type (8) | NACK reason (8)
#   w1  sequence number (32): ACK = next expected (cumulative), NACK = the one wanted
#   w2  node sending the control (16) | the stream's source LC (16)
#   w3  node the control goes to (16) | the stream's destination LC (16)
#   w4  the epoch of the stream answered (16; 0 for PING, PONG, MCAST_ACK) | zero (16)
CONTROL_HEADER: Final = struct.Struct(">HBBIHHHHHH")

# SACK (selective recovery) = the control header (seq = next expected, cumulative) and
#   w5..w6  bitmap (64): bit i set = the receiver holds seq + 1 + i (out of order)
SACK_TRAILER: Final = struct.Struct(">Q")
SACK_BITS: Final = 64

CRC: Final = struct.Struct(">I")
_FIRST_WORD: Final = struct.Struct(">HBB")


class MsgType(IntEnum):
    """Message types (6 significant bits on the wire, DESIGN §3). All reserved now."""

    GM_DATA = 1
    AM_DATA = 2
    MPI_EAGER = 3
    MPI_RTS = 4
    MPI_CTS = 5
    RM_WRITE_V = 6
    RM_WRITE_P = 7
    RM_READ = 8
    RM_READ_REPLY = 9
    ACK = 10
    NACK = 11
    MCAST_DATA = 12
    MCAST_ACK = 13
    AB_COLL = 14
    """Application-bypass collective (thesis 3.4.1): may raise a signal at the receiving host."""
    NICVM_SOURCE = 15
    NICVM_DATA = 16
    MGMT_HELLO = 17
    MGMT_ROUTING = 18
    MGMT_STATS = 19
    PING = 20
    """Liveness probe: the receiving NIC's transport answers PONG, whatever its ports do."""
    PONG = 21
    """The answer to a PING (its sequence number echoed)."""
    SACK = 22
    """Selective ACK: cumulative ACK plus a bitmap of the packets held out of order."""
    RM_ATOMIC = 23
    """A remote atomic (accumulate, fetch-and-op, compare-and-swap) the target NIC applies."""
    MPI_CTRL = 40  # away from the next free number, which another change may take
    """An MPI library's control message (ULFM revoke and agreement), for its MPI port."""

    def is_control(self) -> bool:
        """True for the short-form control messages."""
        return self in CONTROL_TYPES


CONTROL_TYPES: Final = frozenset(
    {MsgType.ACK, MsgType.NACK, MsgType.MCAST_ACK, MsgType.PING, MsgType.PONG, MsgType.SACK}
)
SIGNAL_TYPES: Final = frozenset({MsgType.AB_COLL})
"""Types whose arrival signals a host that enabled signals on its port (DESIGN §5); no other
traffic ever does."""
_MSG_TYPES: Final = {int(t): t for t in MsgType}


class FragFlags(IntFlag):
    """Fragment flags of a data packet."""

    NONE = 0
    FIRST = 0x01
    LAST = 0x02
    ONLY = 0x03  # FIRST | LAST, written out: mypyc compiles no enum member built from others


_FRAG_MASK: Final = int(FragFlags.ONLY)
_DATA_FLAGS_MASK: Final = _FRAG_MASK | ACKED | SKIP | ESTABLISHED
FRAG_FLAGS: Final = (FragFlags.NONE, FragFlags.FIRST, FragFlags.LAST, FragFlags.ONLY)
"""FragFlags by value: ``FRAG_FLAGS[first | last << 1]``. The fast path tests flags against
these tables: building an IntFlag, ``|``, ``&`` and ``in`` on one are Python-level calls."""
HAS_FIRST: Final = frozenset({FragFlags.FIRST, FragFlags.ONLY})
HAS_LAST: Final = frozenset({FragFlags.LAST, FragFlags.ONLY})


def fragment_flags(index: int, count: int) -> FragFlags:
    """The flags of fragment ``index`` (from 0) of a ``count``-fragment message."""
    flags = FragFlags.FIRST if index == 0 else FragFlags.NONE
    if index == count - 1:
        flags |= FragFlags.LAST
    return flags


class NackReason(IntEnum):
    """Why a receiver refused a data packet."""

    GAP = 1
    """A packet after a lost one arrived; retransmit from ``seq`` now."""
    NO_BUFFER = 2
    """The destination port had no receive token (GRIM 4.3.3); back off and retry."""
    RESUME = 3
    """Receive tokens came back after NO_BUFFER; retransmit from ``seq`` now."""
    NO_PORT = 4
    """No endpoint is open at the destination LC; the sends fail."""
    ABORTED = 5
    """The receiver gave up on the message holding ``seq`` (its reassembly timed out, its port
    closed, it is too long): that message fails at the sender, whose remaining fragments of
    it go out as :data:`SKIP` packets from ``seq`` on (all before ``seq`` arrived)."""
    RESET = 6
    """The receiver has no state for this :data:`ESTABLISHED` stream epoch (its nicd
    restarted, or it evicted the stream): every message in flight on it fails
    ``peer_reset`` at the sender, which starts a new epoch for later sends."""


_NACK_REASONS: Final = {int(r): r for r in NackReason}

# The decoder's fast path (compiled, docs/dev/build.md): bound methods and tables held in
# Final names are C statics, where a module global is a dict lookup and ``CRC.unpack_from`` a
# method lookup by name on every packet.
_crc32: Final = zlib.crc32
_unpack_crc: Final = CRC.unpack_from
_unpack_first_word: Final = _FIRST_WORD.unpack_from
_unpack_data_header: Final = DATA_HEADER.unpack_from
_unpack_ack_word: Final = ACK_WORD.unpack_from
_pack_data_header: Final = DATA_HEADER.pack
_pack_crc: Final = CRC.pack
_pack_frame_head: Final = struct.Struct(">B" + DATA_HEADER.format[1:]).pack
"""An empty route's length byte and the data header (``encode_data``'s usual case)."""
_pack_frame_head_acked: Final = struct.Struct(
    ">B" + DATA_HEADER.format[1:] + ACK_WORD.format[1:]
).pack
"""... and the piggy-backed ACK word."""
_MIN_FRAME: Final = 1 + _FIRST_WORD.size + CRC.size
_DATA_HEADER_SIZE: Final = DATA_HEADER.size
_ACK_WORD_SIZE: Final = ACK_WORD.size
_unpack_control: Final = CONTROL_HEADER.unpack_from
_CONTROL_SIZE: Final = CONTROL_HEADER.size
_SACK_TRAILER_SIZE: Final = SACK_TRAILER.size
_SACK: Final = MsgType.SACK
_NACK: Final = MsgType.NACK
_MSG_TYPE_OF: Final[tuple[MsgType | None, ...]] = tuple(_MSG_TYPES.get(v) for v in range(256))
"""MsgType by its wire byte (None: not a type)."""
_IS_CONTROL: Final[tuple[bool, ...]] = tuple(
    t is not None and t in CONTROL_TYPES for t in _MSG_TYPE_OF
)


@dataclass(slots=True)
class DataPacket:
    """One fragment of a message on the wire."""

    msg_type: MsgType
    flags: FragFlags
    token: int
    """The stream's epoch (w1; MCAST_DATA: the group epoch)."""
    seq: int
    src_node: int
    src_port: int
    dst_node: int
    dst_port: int
    msg_len: int
    """Length of the whole message; equal in every fragment."""
    offset: int
    """Where this fragment's payload sits in the message."""
    payload: bytes
    mcast_group: int = 0
    am_handler: int = 0
    args: tuple[int, int, int, int] = (0, 0, 0, 0)
    route: bytes = b""
    ack: int | None = None
    """The piggy-backed cumulative ACK of the reverse stream (see ``w12``), as decoded. The
    transport's own packets leave it None and pass the ACK to :func:`encode_data` instead:
    they are kept for retransmission, while an ACK is of the moment."""
    skip: bool = False
    """A :data:`SKIP` packet: its message was aborted by the receiver; no payload."""
    ack_epoch: int = 0
    """The epoch of the stream the piggy-backed ``ack`` acknowledges (w13)."""
    established: bool = False
    """:data:`ESTABLISHED`: the sender has had an acknowledgement of this epoch."""

    def __init__(
        self,
        msg_type: MsgType,
        flags: FragFlags,
        token: int,
        seq: int,
        src_node: int,
        src_port: int,
        dst_node: int,
        dst_port: int,
        msg_len: int,
        offset: int,
        payload: bytes,
        mcast_group: int = 0,
        am_handler: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
        route: bytes = b"",
        ack: int | None = None,
        skip: bool = False,
        ack_epoch: int = 0,
        established: bool = False,
    ) -> None:  # native when compiled (docs/dev/build.md): every packet builds one
        self.msg_type = msg_type
        self.flags = flags
        self.token = token
        self.seq = seq
        self.src_node = src_node
        self.src_port = src_port
        self.dst_node = dst_node
        self.dst_port = dst_port
        self.msg_len = msg_len
        self.offset = offset
        self.payload = payload
        self.mcast_group = mcast_group
        self.am_handler = am_handler
        self.args = args
        self.route = route
        self.ack = ack
        self.skip = skip
        self.ack_epoch = ack_epoch
        self.established = established


@dataclass(slots=True)
class ControlPacket:
    """An ACK or NACK for one stream, in the short control form."""

    msg_type: MsgType
    seq: int
    from_node: int
    """The node sending this control (the data receiver)."""
    to_node: int
    """The node it goes to (the data sender)."""
    src_port: int
    """The stream's source LC (at ``to_node``)."""
    dst_port: int
    """The stream's destination LC (at ``from_node``)."""
    reason: NackReason | None = None
    route: bytes = b""
    sack: int = 0
    """SACK only: bit i set = the receiver holds ``seq + 1 + i`` (:data:`SACK_BITS` bits)."""
    epoch: int = 0
    """The epoch of the stream answered (w4)."""

    def __init__(
        self,
        msg_type: MsgType,
        seq: int,
        from_node: int,
        to_node: int,
        src_port: int,
        dst_port: int,
        reason: NackReason | None = None,
        route: bytes = b"",
        sack: int = 0,
        epoch: int = 0,
    ) -> None:  # native when compiled (docs/dev/build.md): every ACK builds one
        self.msg_type = msg_type
        self.seq = seq
        self.from_node = from_node
        self.to_node = to_node
        self.src_port = src_port
        self.dst_port = dst_port
        self.reason = reason
        self.route = route
        self.sack = sack
        self.epoch = epoch


Packet = DataPacket | ControlPacket


def _frame(route: bytes, body: bytes) -> bytes:
    if len(route) > MAX_ROUTE_BYTES:
        raise ValueError(f"route of {len(route)} bytes exceeds {MAX_ROUTE_BYTES}")
    framed = bytes((len(route),)) + route + body
    return framed + CRC.pack(zlib.crc32(framed))


def encode_data(
    p: DataPacket, ack: int | None = None, ack_epoch: int = 0, established: bool = False
) -> bytes:
    """Encode a data packet, route and CRC included; ``ack`` (32-bit, of the stream epoch
    ``ack_epoch``; else ``p.ack`` and ``p.ack_epoch``) is piggy-backed; ``established`` (or
    ``p.established``) sets :data:`ESTABLISHED`."""
    if ack is None:
        ack = p.ack
        ack_epoch = p.ack_epoch
    flags = int(p.flags)
    if ack is not None:
        flags |= ACKED
    if p.skip:
        flags |= SKIP
    if established or p.established:
        flags |= ESTABLISHED
    a0, a1, a2, a3 = p.args  # passed one by one: a starred call builds a list and a tuple
    payload = p.payload
    if not p.route:  # the usual case: route length, header and ACK word in one pack
        if ack is None:
            head = _pack_frame_head(
                0, GRIM_PACKET_TYPE, int(p.msg_type), flags, p.token, p.mcast_group, p.seq,
                p.src_node, p.src_port, p.dst_node, p.dst_port, p.am_handler, len(payload),
                p.msg_len, p.offset, a0, a1, a2, a3,
            )  # fmt: skip
        else:
            head = _pack_frame_head_acked(
                0, GRIM_PACKET_TYPE, int(p.msg_type), flags, p.token, p.mcast_group, p.seq,
                p.src_node, p.src_port, p.dst_node, p.dst_port, p.am_handler, len(payload),
                p.msg_len, p.offset, a0, a1, a2, a3, ack, ack_epoch, 0,
            )  # fmt: skip
        framed = head + payload
        return framed + _pack_crc(_crc32(framed))
    header = _pack_data_header(
        GRIM_PACKET_TYPE, int(p.msg_type), flags, p.token, p.mcast_group, p.seq, p.src_node,
        p.src_port, p.dst_node, p.dst_port, p.am_handler, len(payload), p.msg_len, p.offset,
        a0, a1, a2, a3,
    )  # fmt: skip
    if ack is not None:
        header += ACK_WORD.pack(ack, ack_epoch, 0)
    return _frame(p.route, header + payload)


def encode_control(p: ControlPacket) -> bytes:
    """Encode an ACK/NACK, route and CRC included."""
    body = CONTROL_HEADER.pack(
        GRIM_PACKET_TYPE,
        int(p.msg_type),
        int(p.reason) if p.reason is not None else 0,
        p.seq,
        p.from_node,
        p.src_port,
        p.to_node,
        p.dst_port,
        p.epoch,
        0,
    )
    if p.msg_type is MsgType.SACK:
        body += SACK_TRAILER.pack(p.sack)
    return _frame(p.route, body)


def encode(p: Packet) -> bytes:
    """Encode either kind of packet."""
    if isinstance(p, DataPacket):
        return encode_data(p)
    return encode_control(p)


def decode_untrusted(buf: bytes | bytearray | memoryview) -> Packet:
    """Decode one datagram; raise only :class:`BadPacket` (with a counter ``reason``)."""
    view = memoryview(buf)
    n = len(view)
    if n < _MIN_FRAME:
        raise BadPacket("truncated", f"{n} bytes")
    end = n - 4  # the CRC's 4 bytes
    (crc,) = _unpack_crc(view, end)
    if _crc32(view[:end]) != crc:
        raise BadPacket("crc")
    route_len: int = view[0]
    start = 1 + route_len
    if end - start < 4:  # the first word
        raise BadPacket("truncated", "route longer than the packet")
    route = bytes(view[1:start]) if route_len else b""
    packet_type, raw_type, flags = _unpack_first_word(view, start)
    if packet_type != GRIM_PACKET_TYPE:
        raise BadPacket("packet_type", hex(packet_type))
    msg_type = _MSG_TYPE_OF[raw_type]
    if msg_type is None:
        raise BadPacket("msg_type", str(raw_type))
    if _IS_CONTROL[raw_type]:
        return _decode_control(view, start, end, msg_type, flags, route)
    return _decode_data(view, start, end, msg_type, flags, route)


def _decode_control(
    view: memoryview, start: int, end: int, msg_type: MsgType, flags: int, route: bytes
) -> ControlPacket:
    size = _CONTROL_SIZE + (_SACK_TRAILER_SIZE if msg_type is _SACK else 0)
    if end - start != size:
        raise BadPacket("truncated" if end - start < size else "length")
    _, _, _, seq, from_node, src_port, to_node, dst_port, epoch, zero = _unpack_control(view, start)
    if zero:
        raise BadPacket("reserved", str(zero))
    sack = 0
    if msg_type is _SACK:
        (sack,) = SACK_TRAILER.unpack_from(view, start + _CONTROL_SIZE)
    reason: NackReason | None = None
    if msg_type is _NACK:
        reason = _NACK_REASONS.get(flags)
        if reason is None:
            raise BadPacket("nack_reason", str(flags))
    elif flags:
        raise BadPacket("flags", str(flags))
    return ControlPacket(
        msg_type, seq, from_node, to_node, src_port, dst_port, reason, route, sack, epoch
    )


def _decode_data(
    view: memoryview, start: int, end: int, msg_type: MsgType, flags: int, route: bytes
) -> DataPacket:
    if end - start < _DATA_HEADER_SIZE:
        raise BadPacket("truncated")
    if flags & ~_DATA_FLAGS_MASK:
        raise BadPacket("flags", str(flags))
    (
        _,
        _,
        _,
        token,
        group,
        seq,
        src_node,
        src_port,
        dst_node,
        dst_port,
        handler,
        frag_len,
        msg_len,
        offset,
        a0,
        a1,
        a2,
        a3,
    ) = _unpack_data_header(view, start)
    payload_start = start + _DATA_HEADER_SIZE
    ack: int | None = None
    ack_epoch = 0
    if flags & ACKED:
        if end - payload_start < _ACK_WORD_SIZE:
            raise BadPacket("truncated")
        ack, ack_epoch, zero = _unpack_ack_word(view, payload_start)
        if zero:
            raise BadPacket("reserved", str(zero))
        payload_start += _ACK_WORD_SIZE
    if end - payload_start != frag_len:
        raise BadPacket("length", f"header says {frag_len}, datagram has {end - payload_start}")
    if offset + frag_len > msg_len:
        raise BadPacket("length", "fragment past the end of its message")
    if flags & 1 and offset != 0:  # FIRST
        raise BadPacket("offset", "FIRST fragment at a non-zero offset")
    skip = bool(flags & SKIP)
    if skip:
        if frag_len:
            raise BadPacket("length", "a SKIP packet carries no payload")
    elif flags & 2 and offset + frag_len != msg_len:  # LAST
        raise BadPacket("offset", "LAST fragment does not end the message")
    return DataPacket(
        msg_type,
        FRAG_FLAGS[flags & _FRAG_MASK],
        token,
        seq,
        src_node,
        src_port,
        dst_node,
        dst_port,
        msg_len,
        offset,
        bytes(view[payload_start:end]),
        group,
        handler,
        (a0, a1, a2, a3),
        route,
        ack,
        skip,
        ack_epoch,
        bool(flags & ESTABLISHED),
    )


# -- multicast (seed 001 §5.3) -------------------------------------------------------------------
# The two reserved types keep the layouts above; only the meaning of some fields differs.
# MCAST_DATA, a data packet:
#   mcast_group = group id (16); token = group epoch (low 14 bits; the tree it was sent on);
#   seq = the group's sequence number, numbered by the root and kept by every hop;
#   src_node = the hop's sender (the receiver's parent); src_port = the root's port (kept);
#   dst_node = the child (rewritten per child, §5.1); dst_port = 0 (the group names the port);
#   msg_len, offset, FIRST/LAST, am_handler and the user args as for unicast, kept by every hop.
# MCAST_ACK, a control packet (its flags byte stays 0):
#   seq = next sequence number expected (cumulative); from_node = child; to_node = parent;
#   src_port = group id (16); dst_port = kind (2) | epoch (14).
MCAST_EPOCH_MASK: Final = 0x3FFF  # an epoch travels as its low 14 bits
_MCAST_KIND_SHIFT: Final = 14


class McastAckKind(IntEnum):
    """What a multicast ACK reports besides its cumulative sequence number."""

    ACK = 0
    """Everything before ``seq`` arrived."""
    GAP = 1
    """... and a later packet arrived out of order: resend from ``seq`` now (a NACK)."""
    BUSY = 2
    """... and ``seq`` was refused (no receive token): alive, retry after the timeout."""


_MCAST_ACK_KINDS: Final = {int(k): k for k in McastAckKind}


@dataclass(slots=True)
class McastAck:
    """The multicast fields of an MCAST_ACK control packet."""

    group: int
    epoch: int
    """Low 14 bits of the group epoch the child acknowledges under."""
    seq: int
    kind: McastAckKind
    from_node: int
    """The child."""
    to_node: int
    """The parent."""


def mcast_ack_packet(
    group: int, epoch: int, seq: int, kind: McastAckKind, from_node: int, to_node: int
) -> ControlPacket:
    """The control packet carrying a multicast ACK (``seq`` is taken mod 2**32)."""
    dst_port = (int(kind) << _MCAST_KIND_SHIFT) | (epoch & MCAST_EPOCH_MASK)
    return ControlPacket(MsgType.MCAST_ACK, seq & 0xFFFF_FFFF, from_node, to_node, group, dst_port)


def decode_mcast_ack_untrusted(p: ControlPacket) -> McastAck:
    """The multicast fields of a decoded MCAST_ACK; raise only :class:`BadPacket`."""
    if p.msg_type is not MsgType.MCAST_ACK:
        raise BadPacket("msg_type", f"{p.msg_type.name} is not MCAST_ACK")
    kind = _MCAST_ACK_KINDS.get(p.dst_port >> _MCAST_KIND_SHIFT)
    if kind is None:
        raise BadPacket("mcast_ack_kind", str(p.dst_port >> _MCAST_KIND_SHIFT))
    return McastAck(p.src_port, p.dst_port & MCAST_EPOCH_MASK, p.seq, kind, p.from_node, p.to_node)
