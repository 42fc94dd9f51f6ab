"""The host-link codec: the two tables (HostOp -> decoder, record type -> encoder) built once
from the families, ``encode_record``, and the :class:`Assembler` that joins chunked payloads.

Invariants: records of one connection arrive in order (SEQPACKET guarantees it), so a head
record is always followed by exactly the ``CONT`` records its length implies, and nothing
else of that connection comes in between. Every HostOp but ``CONT`` has exactly one decoder
and every record class exactly one encoder; no record reaches another family's encoder.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping

import msgpack

from nicd.errors import ProtocolViolation, UsageError
from nicd.hostlink.gm import DECODERS as GM_DECODERS
from nicd.hostlink.gm import ENCODERS as GM_ENCODERS
from nicd.hostlink.grim import DECODERS as GRIM_DECODERS
from nicd.hostlink.grim import ENCODERS as GRIM_ENCODERS
from nicd.hostlink.grim import GrimRecord
from nicd.hostlink.mcast import DECODERS as MCAST_DECODERS
from nicd.hostlink.mcast import ENCODERS as MCAST_ENCODERS
from nicd.hostlink.mcast import McastRecord, McastSendReq, MultiSendReq
from nicd.hostlink.nicvm import DECODERS as NICVM_DECODERS
from nicd.hostlink.nicvm import ENCODERS as NICVM_ENCODERS
from nicd.hostlink.nicvm import NicvmRecord
from nicd.hostlink.records import Chunked, Encoder, GmRecord, HostOp, RecvEvent, SendReq

__all__ = ["DECODERS", "ENCODERS", "Assembler", "HostRecord", "encode_record"]

HostRecord = GmRecord | GrimRecord | McastRecord | NicvmRecord
"""Every record of every family."""

ChunkHead = SendReq | RecvEvent | McastSendReq | MultiSendReq
"""The records whose payload may continue in CONT records."""

Decoder = Callable[[bytes], HostRecord | Chunked[ChunkHead]]


def _merged(tables: tuple[Mapping[type, Encoder], ...]) -> dict[type, Encoder]:
    merged: dict[type, Encoder] = {}
    for table in tables:
        for cls, encode in table.items():
            if cls in merged:
                raise ValueError(f"{cls.__name__} has two encoders")
            merged[cls] = encode
    return merged


def _merged_ops(tables: tuple[Mapping[HostOp, Decoder], ...]) -> dict[int, Decoder]:
    merged: dict[int, Decoder] = {}
    for table in tables:
        for op, decode in table.items():
            if op == HostOp.CONT:
                raise ValueError("CONT is the Assembler's; no family may decode it")
            if op in merged:
                raise ValueError(f"{op!r} has two decoders")
            merged[op] = decode
    return merged


ENCODERS: dict[type, Encoder] = _merged(
    (GM_ENCODERS, GRIM_ENCODERS, MCAST_ENCODERS, NICVM_ENCODERS)
)
"""Record class -> its encoder; looked up by exact type, so nothing falls through."""

DECODERS: dict[int, Decoder] = _merged_ops(
    (GM_DECODERS, GRIM_DECODERS, MCAST_DECODERS, NICVM_DECODERS)
)
"""Opcode -> its decoder (every HostOp but CONT, which the Assembler handles)."""


def encode_record(rec: object) -> list[bytes]:
    """Encode a record (a :data:`HostRecord`) as the list of SEQPACKET records that carry it.

    Raises :class:`~nicd.errors.UsageError` for an object that is no host record (``rec`` is
    typed ``object`` so that the compiled module checks it here, not in its argument check).
    """
    encode = ENCODERS.get(type(rec))
    if encode is None:
        raise UsageError(f"not a host record: {type(rec).__name__}")
    return encode(rec)


class Assembler:
    """Decodes the records of one connection, joining chunked payloads.

    ``feed`` raises :class:`ProtocolViolation` (and nothing else) for a malformed record or
    an unknown opcode; the caller counts it and decides whether that ends the connection.
    """

    def __init__(self, max_message: int = 1 << 30) -> None:
        self._max_message = max_message
        self._head: ChunkHead | None = None
        self._parts: list[memoryview] = []
        self._missing = 0

    def feed(self, record: bytes) -> HostRecord | None:
        """Take one SEQPACKET record; return a whole record when one is complete."""
        try:
            return self._feed(record)
        except (
            struct.error, IndexError, ValueError, TypeError, OverflowError, UnicodeDecodeError,
            msgpack.UnpackException,
        ) as exc:  # fmt: skip
            raise ProtocolViolation(f"malformed host record: {exc}") from None

    def _feed(self, record: bytes) -> HostRecord | None:
        op = record[0]
        if self._missing:
            if op != HostOp.CONT:
                raise ProtocolViolation(f"expected CONT, got opcode {op}")
            part = memoryview(record)[1:]
            if len(part) > self._missing:
                raise ProtocolViolation("CONT longer than the message")
            self._parts.append(part)
            self._missing -= len(part)
            return self._finish() if not self._missing else None
        decode = DECODERS.get(op)
        if decode is None:
            raise ProtocolViolation(f"unknown opcode {op}")
        out = decode(record)
        return self._start(out) if isinstance(out, Chunked) else out

    def _start(self, chunk: Chunked[ChunkHead]) -> HostRecord | None:
        head, total, first = chunk.head, chunk.total, chunk.first
        if total > self._max_message:
            raise ProtocolViolation(f"message of {total} bytes exceeds {self._max_message}")
        if len(first) > total:
            raise ProtocolViolation("payload longer than its stated length")
        if len(first) == total:
            head.payload = bytes(first)  # a fresh record, made by its decoder for this message
            return head
        self._head, self._parts, self._missing = head, [first], total - len(first)
        return None

    def _finish(self) -> HostRecord:
        head, parts = self._head, self._parts
        assert head is not None
        self._head, self._parts = None, []
        head.payload = b"".join(parts)  # the payload's one copy out of the records
        return head
