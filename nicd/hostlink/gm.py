"""The GM port records' codec: struct layouts, encoders and decoders (HostOp 1-29).

The records themselves live in :mod:`nicd.hostlink.records`; this module adds the bytes.
``ENCODERS`` and ``DECODERS`` are this family's rows of the codec's two tables. Decoders may
raise ``struct.error`` and friends on malformed input; the Assembler turns those into
:class:`~nicd.errors.ProtocolViolation`. No I/O here.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

import msgpack

from nicd.errors import ProtocolViolation
from nicd.hostlink.records import (
    MAX_RECORD_BYTES,
    AddRoutesReq,
    Chunked,
    CloseReq,
    DeregisterReq,
    Encoder,
    ErrorEvent,
    GmRecord,
    HostOp,
    Opened,
    OpenReq,
    ProvideReq,
    RecvEvent,
    Refused,
    Registered,
    RegisterReq,
    RmWriteEvent,
    RoutesOk,
    SendReq,
    SentBatch,
    SentEvent,
    SetRoutesReq,
    SignalCtl,
    StatsReply,
    StatsReq,
    chunked,
    encoder,
    packb,
)

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DECODERS", "ENCODERS"]

# OPEN:     op (8) | port (16)
_OPEN: Final = struct.Struct(">BH")
# SEND:     op (8) | msg type (8) | handle (32) | dst node (16) | dst port (16) | AM handler (16)
#           | user args 4 x 32 | message length (32), then the first chunk of payload
_SEND: Final = struct.Struct(">BBIHHH4II")
# PROVIDE:  op (8) | receive tokens added (32)
_PROVIDE: Final = struct.Struct(">BI")
# OPENED:   op (8) | port (16) | node id (16) | nodes in the job (16) | send tokens (16)
_OPENED: Final = struct.Struct(">BHHHH")
# RECV:     op (8) | msg type (8) | src node (16) | src port (16) | AM handler (16)
#           | multicast group (16) | user args 4 x 32 | message length (32), then payload
_RECV: Final = struct.Struct(">BBHHHH4II")
# SENT:     op (8) | handle (32)
_SENT: Final = struct.Struct(">BI")
# Bound once (compiled, a Final name is a C static; ``_SEND.pack`` looks the method up by name)
_pack_send: Final = _SEND.pack
_unpack_send: Final = _SEND.unpack_from
_pack_recv: Final = _RECV.pack
_unpack_recv: Final = _RECV.unpack_from
# SENT_MANY: op (8), then handles (32 each)
_HANDLE: Final = struct.Struct(">I")
# ERROR:    op (8) | handle (32) | dst node (16), then the reason in UTF-8
_ERROR: Final = struct.Struct(">BIH")
# REGISTER: op (8) | region id (16) | size (32), then the shared-memory name in UTF-8
_REGISTER: Final = struct.Struct(">BHI")
# DEREGISTER, REGISTERED: op (8) | region id (16)
_REGION: Final = struct.Struct(">BH")
# RM_DONE:  op (8) | src node (16) | src port (16) | region id (16) | offset (32) | length (32)
#           | user args 4 x 32
_RM_DONE: Final = struct.Struct(">BHHHII4I")
# SIGNALS:  op (8) | enable (8) | host pid (32) | application-bypass events seen (32)
_SIGNALS: Final = struct.Struct(">BBII")
# CLOSE, GET_STATS, ROUTES_OK: op (8) alone
_OP: Final = struct.Struct(">B")
# SET_ROUTES, ADD_ROUTES, STATS: op (8), then msgpack ({node: [host, port]} / {name: counter})
# REFUSED:  op (8), then the reason in UTF-8


# -- encoders -------------------------------------------------------------------------------


def _encode_send(rec: SendReq) -> list[bytes]:
    a0, a1, a2, a3 = rec.args  # one by one: a starred call builds a list and a tuple
    head = _pack_send(HostOp.SEND, rec.msg_type, rec.handle, rec.dst_node, rec.dst_port,
                      rec.am_handler, a0, a1, a2, a3, len(rec.payload))  # fmt: skip
    return chunked(head, rec.payload)


def _encode_recv(rec: RecvEvent) -> list[bytes]:
    a0, a1, a2, a3 = rec.args
    head = _pack_recv(HostOp.RECV, rec.msg_type, rec.src_node, rec.src_port, rec.am_handler,
                      rec.mcast_group, a0, a1, a2, a3, len(rec.payload))  # fmt: skip
    return chunked(head, rec.payload)


def _encode_sent_batch(rec: SentBatch) -> list[bytes]:
    if len(rec.handles) * _HANDLE.size >= MAX_RECORD_BYTES:
        raise ValueError(f"{len(rec.handles)} handles do not fit one record")
    return [struct.pack(f">B{len(rec.handles)}I", HostOp.SENT_MANY, *rec.handles)]


def _encode_rm_write(rec: RmWriteEvent) -> list[bytes]:
    fields = (HostOp.RM_DONE, rec.src_node, rec.src_port, rec.region, rec.offset, rec.length)
    return [_RM_DONE.pack(*fields, *rec.args)]


def _encode_set_routes(rec: SetRoutesReq | AddRoutesReq) -> list[bytes]:
    table = {node: [host, port] for node, (host, port) in rec.routes.items()}
    op = HostOp.SET_ROUTES if isinstance(rec, SetRoutesReq) else HostOp.ADD_ROUTES
    return [packb(op, table)]


def _op_only(op: HostOp) -> Callable[[object], list[bytes]]:
    record = _OP.pack(op)
    return lambda _rec: [record]


ENCODERS: dict[type, Encoder] = dict(
    [
        encoder(SendReq, _encode_send),
        encoder(RecvEvent, _encode_recv),
        encoder(SentEvent, lambda rec: [_SENT.pack(HostOp.SENT, rec.handle)]),
        encoder(SentBatch, _encode_sent_batch),
        encoder(ProvideReq, lambda rec: [_PROVIDE.pack(HostOp.PROVIDE, rec.count)]),
        encoder(ErrorEvent, lambda rec: [
            _ERROR.pack(HostOp.ERROR, rec.handle, rec.dst_node) + rec.reason.encode()]),
        encoder(RmWriteEvent, _encode_rm_write),
        encoder(RegisterReq, lambda rec: [
            _REGISTER.pack(HostOp.REGISTER, rec.region, rec.size) + rec.name.encode()]),
        encoder(DeregisterReq, lambda rec: [_REGION.pack(HostOp.DEREGISTER, rec.region)]),
        encoder(SignalCtl, lambda rec: [
            _SIGNALS.pack(HostOp.SIGNALS, int(rec.enable), rec.pid, rec.seen)]),
        encoder(Registered, lambda rec: [_REGION.pack(HostOp.REGISTERED, rec.region)]),
        encoder(OpenReq, lambda rec: [_OPEN.pack(HostOp.OPEN, rec.port)]),
        encoder(Opened, lambda rec: [
            _OPENED.pack(HostOp.OPENED, rec.port, rec.node_id, rec.num_nodes, rec.send_tokens)]),
        encoder(CloseReq, _op_only(HostOp.CLOSE)),
        encoder(StatsReq, _op_only(HostOp.GET_STATS)),
        encoder(RoutesOk, _op_only(HostOp.ROUTES_OK)),
        encoder(SetRoutesReq, _encode_set_routes),
        encoder(AddRoutesReq, _encode_set_routes),
        encoder(StatsReply, lambda rec: [packb(HostOp.STATS, rec.stats)]),
        encoder(Refused, lambda rec: [bytes((HostOp.REFUSED,)) + rec.reason.encode()]),
    ]
)  # fmt: skip
"""GM record class -> encoder."""


# -- decoders -------------------------------------------------------------------------------


def _decode_send(record: bytes) -> Chunked[SendReq]:
    _, m, handle, node, port, am, a0, a1, a2, a3, total = _unpack_send(record)
    head = SendReq(handle, node, port, b"", m, am, (a0, a1, a2, a3))
    return Chunked(head, total, memoryview(record)[_SEND.size :])


def _decode_recv(record: bytes) -> Chunked[RecvEvent]:
    _, m, node, port, am, group, a0, a1, a2, a3, total = _unpack_recv(record)
    head = RecvEvent(node, port, b"", m, am, (a0, a1, a2, a3), group)
    return Chunked(head, total, memoryview(record)[_RECV.size :])


def _decode_sent_batch(record: bytes) -> SentBatch:
    if (len(record) - 1) % _HANDLE.size:
        raise ProtocolViolation("SENT_MANY is not a whole number of handles")
    return SentBatch(tuple(h for (h,) in _HANDLE.iter_unpack(memoryview(record)[1:])))


def _decode_error(record: bytes) -> ErrorEvent:
    _, handle, node = _ERROR.unpack_from(record)
    return ErrorEvent(handle, node, record[_ERROR.size :].decode())


def _decode_rm_write(record: bytes) -> RmWriteEvent:
    node, port, region, offset, length, a0, a1, a2, a3 = _RM_DONE.unpack(record)[1:]
    return RmWriteEvent(node, port, region, offset, length, (a0, a1, a2, a3))


def _decode_register(record: bytes) -> RegisterReq:
    _, region, size = _REGISTER.unpack_from(record)
    return RegisterReq(region, size, record[_REGISTER.size :].decode())


def _decode_signals(record: bytes) -> SignalCtl:
    _, enable, pid, seen = _SIGNALS.unpack(record)
    if enable > 1:
        raise ProtocolViolation(f"SIGNALS enable flag {enable}")
    return SignalCtl(bool(enable), pid, seen)


def _decode_set_routes(record: bytes) -> SetRoutesReq | AddRoutesReq:
    obj = msgpack.unpackb(record[1:], strict_map_key=False)
    if not isinstance(obj, dict):
        raise ProtocolViolation("routing table is not a map")
    routes: dict[int, tuple[str, int]] = {}
    for node, addr in obj.items():
        if not isinstance(node, int) or not isinstance(addr, list | tuple) or len(addr) != 2:
            raise ProtocolViolation(f"bad route entry {node!r}: {addr!r}")
        host, port = addr
        if not isinstance(host, str) or not isinstance(port, int):
            raise ProtocolViolation(f"bad route entry {node!r}: {addr!r}")
        routes[node] = (host, port)
    return SetRoutesReq(routes) if record[0] == HostOp.SET_ROUTES else AddRoutesReq(routes)


def _decode_stats(record: bytes) -> StatsReply:
    stats = msgpack.unpackb(record[1:], strict_map_key=False)
    if not isinstance(stats, dict):
        raise ProtocolViolation("STATS is not a map")
    return StatsReply(stats)


DECODERS: dict[HostOp, Callable[[bytes], GmRecord | Chunked[SendReq | RecvEvent]]] = {
    HostOp.OPEN: lambda record: OpenReq(_OPEN.unpack(record)[1]),
    HostOp.SEND: _decode_send,
    HostOp.PROVIDE: lambda record: ProvideReq(_PROVIDE.unpack(record)[1]),
    HostOp.CLOSE: lambda _record: CloseReq(),
    HostOp.SET_ROUTES: _decode_set_routes,
    HostOp.ADD_ROUTES: _decode_set_routes,
    HostOp.GET_STATS: lambda _record: StatsReq(),
    HostOp.REGISTER: _decode_register,
    HostOp.DEREGISTER: lambda record: DeregisterReq(_REGION.unpack(record)[1]),
    HostOp.SIGNALS: _decode_signals,
    HostOp.OPENED: lambda record: Opened(*_OPENED.unpack(record)[1:]),
    HostOp.RECV: _decode_recv,
    HostOp.SENT: lambda record: SentEvent(_SENT.unpack(record)[1]),
    HostOp.ERROR: _decode_error,
    HostOp.ROUTES_OK: lambda _record: RoutesOk(),
    HostOp.STATS: _decode_stats,
    HostOp.REFUSED: lambda record: Refused(record[1:].decode()),
    HostOp.REGISTERED: lambda record: Registered(_REGION.unpack(record)[1]),
    HostOp.RM_DONE: _decode_rm_write,
    HostOp.SENT_MANY: _decode_sent_batch,
}
"""GM opcode -> decoder (SEND and RECV return a :class:`Chunked` head)."""
