"""The NICVM family (thesis ch. 4, HostOp 70-77): module upload, purge, list, communicator
map and delegation; their records and codec.

DELEGATE is a struct record (it carries a message payload); the others are msgpack lists
whose field types the decoders check one by one. No I/O here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, cast

import msgpack

from nicd.errors import ProtocolViolation
from nicd.hostlink.records import CHUNK_BYTES, Args, Encoder, HostOp, encoder, packb

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "DECODERS",
    "ENCODERS",
    "NICVM_MAX_DELEGATE",
    "NICVM_REQUESTS",
    "NicvmCommReq",
    "NicvmDelegateReq",
    "NicvmDone",
    "NicvmListReq",
    "NicvmLoadReq",
    "NicvmPurgeReq",
    "NicvmRecord",
    "NicvmReply",
    "NicvmReport",
]

# NICVM_DELEGATE: op (8) | handle (32) | root rank (16) | communicator id (16) | user args 4 x 32
#                 | name length (8), then the name (UTF-8), then the payload (one record)
_DELEGATE: Final = struct.Struct(">BIHH4IB")
NICVM_MAX_DELEGATE: Final = CHUNK_BYTES - 512  # payload bytes of one delegated message
# NICVM_LIST: op (8) alone
_OP: Final = struct.Struct(">B")
# NICVM_LOAD [name, source, persist]; NICVM_PURGE name; NICVM_COMM [comm, [node, ...]];
# NICVM_REPLY [ok, error, line, column, modules | nil];
# NICVM_DONE [handle, outcome, result, detail, line]; NICVM_REPORT [name, outcome, detail, line]:
#                 op (8), then msgpack


@dataclass(slots=True)
class NicvmLoadReq:
    """Compile ``source`` into the NIC as module ``name`` (replacing one of that name). Unless
    ``persist``, the module is purged when this port closes. Answered by a NicvmReply."""

    name: str
    source: str
    persist: bool = False


@dataclass(slots=True)
class NicvmPurgeReq:
    """Remove module ``name``. Answered by a NicvmReply."""

    name: str


@dataclass(slots=True)
class NicvmListReq:
    """List the loaded modules. Answered by a NicvmReply with ``modules``."""


@dataclass(slots=True)
class NicvmCommReq:
    """The communicator map of this port (thesis §4.3.4): rank i of communicator ``comm`` is
    node ``nodes[i]`` (same port). Modules see rank, size and root through it. No reply."""

    comm: int
    nodes: tuple[int, ...]


@dataclass(slots=True)
class NicvmDelegateReq:
    """Hand ``payload`` to this NIC's module ``name`` as if it had arrived (the loopback path
    of Fig 4.5), for root rank ``root`` of communicator ``comm``. Answered by a NicvmDone
    naming ``handle`` once the module ran and its sends completed."""

    handle: int
    name: str
    root: int
    comm: int
    payload: bytes
    args: Args = (0, 0, 0, 0)


@dataclass(slots=True)
class NicvmReply:
    """The answer to a load, purge or list. A refused module gives ``ok`` False with the
    compiler's ``error`` and its ``line``/``column`` (0 when not about a position)."""

    ok: bool
    error: str = ""
    line: int = 0
    column: int = 0
    modules: list[dict[str, object]] | None = None


@dataclass(slots=True)
class NicvmDone:
    """A delegated message ``handle`` is finished: ``outcome`` ``ok``, ``out_of_fuel``,
    ``fault``, ``vm_error``, ``no_module``, ``no_comm`` or ``send_failed``; ``result`` is the
    module's result code; ``detail`` and ``line`` describe a failure."""

    handle: int
    outcome: str
    result: int = 0
    detail: str = ""
    line: int = 0


@dataclass(slots=True)
class NicvmReport:
    """To the owner of module ``name``: an invocation on a received packet failed
    (``outcome`` as in NicvmDone); the packet went to the host as it arrived."""

    name: str
    outcome: str
    detail: str = ""
    line: int = 0


NicvmRecord = (
    NicvmLoadReq
    | NicvmPurgeReq
    | NicvmListReq
    | NicvmCommReq
    | NicvmDelegateReq
    | NicvmReply
    | NicvmDone
    | NicvmReport
)

NICVM_REQUESTS: Final = (NicvmLoadReq, NicvmPurgeReq, NicvmListReq, NicvmCommReq, NicvmDelegateReq)
"""The NICVM records a host sends (the NIC answers with the others)."""


# -- encoders -------------------------------------------------------------------------------


def _encode_delegate(rec: NicvmDelegateReq) -> list[bytes]:
    name = rec.name.encode()
    if len(rec.payload) > NICVM_MAX_DELEGATE or not 0 < len(name) < 256:
        raise ValueError("delegated message too large or bad module name")
    head = _DELEGATE.pack(HostOp.NICVM_DELEGATE, rec.handle, rec.root & 0xFFFF,
                          rec.comm & 0xFFFF, *rec.args, len(name))  # fmt: skip
    return [b"".join((head, name, rec.payload))]


ENCODERS: dict[type, Encoder] = dict(
    [
        encoder(NicvmDelegateReq, _encode_delegate),
        encoder(NicvmLoadReq, lambda rec: [
            packb(HostOp.NICVM_LOAD, [rec.name, rec.source, rec.persist])]),
        encoder(NicvmPurgeReq, lambda rec: [packb(HostOp.NICVM_PURGE, rec.name)]),
        encoder(NicvmListReq, lambda _rec: [_OP.pack(HostOp.NICVM_LIST)]),
        encoder(NicvmCommReq, lambda rec: [
            packb(HostOp.NICVM_COMM, [rec.comm, list(rec.nodes)])]),
        encoder(NicvmReply, lambda rec: [
            packb(HostOp.NICVM_REPLY, [rec.ok, rec.error, rec.line, rec.column, rec.modules])]),
        encoder(NicvmDone, lambda rec: [
            packb(HostOp.NICVM_DONE, [rec.handle, rec.outcome, rec.result, rec.detail, rec.line])]),
        encoder(NicvmReport, lambda rec: [
            packb(HostOp.NICVM_REPORT, [rec.name, rec.outcome, rec.detail, rec.line])]),
    ]
)  # fmt: skip
"""NICVM record class -> encoder."""


# -- decoders -------------------------------------------------------------------------------


def _fields(record: bytes, types: tuple[type, ...]) -> list[object]:
    obj = msgpack.unpackb(record[1:], strict_map_key=False)
    if not isinstance(obj, list) or len(obj) != len(types):
        raise ProtocolViolation("malformed NICVM record")
    for value, kind in zip(obj, types, strict=True):
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ProtocolViolation(f"malformed NICVM record field {value!r}")
    return obj


def _decode_delegate(record: bytes) -> NicvmDelegateReq:
    _, handle, root, comm, a0, a1, a2, a3, length = _DELEGATE.unpack_from(record)
    end = _DELEGATE.size + length
    if not length:
        raise ProtocolViolation("NICVM_DELEGATE without a module name")
    if len(record) < end:
        raise ProtocolViolation("NICVM_DELEGATE shorter than its name")
    if len(record) - end > NICVM_MAX_DELEGATE:
        raise ProtocolViolation(f"NICVM_DELEGATE payload over {NICVM_MAX_DELEGATE} bytes")
    name = record[_DELEGATE.size : end].decode()
    return NicvmDelegateReq(handle, name, root, comm, record[end:], (a0, a1, a2, a3))


def _decode_purge(record: bytes) -> NicvmPurgeReq:
    name = msgpack.unpackb(record[1:])
    if not isinstance(name, str):
        raise ProtocolViolation("NICVM_PURGE without a name")
    return NicvmPurgeReq(name)


def _decode_load(record: bytes) -> NicvmLoadReq:
    load = _fields(record, (str, str, bool))
    return NicvmLoadReq(*cast("tuple[str, str, bool]", tuple(load)))


def _decode_comm(record: bytes) -> NicvmCommReq:
    comm, nodes = cast("tuple[int, list[object]]", tuple(_fields(record, (int, list))))
    if not all(isinstance(n, int) and 0 <= n <= 0xFFFF for n in nodes) or not nodes:
        raise ProtocolViolation("NICVM_COMM nodes must be node ids")
    return NicvmCommReq(comm, tuple(cast("list[int]", nodes)))


def _decode_reply(record: bytes) -> NicvmReply:
    ok, error, line, column, modules = msgpack.unpackb(record[1:], strict_map_key=False)
    if modules is not None and not isinstance(modules, list):
        raise ProtocolViolation("NICVM_REPLY modules is not a list")
    return NicvmReply(bool(ok), str(error), int(line), int(column), modules)


def _decode_done(record: bytes) -> NicvmDone:
    done = _fields(record, (int, str, int, str, int))
    return NicvmDone(*cast("tuple[int, str, int, str, int]", tuple(done)))


def _decode_report(record: bytes) -> NicvmReport:
    report = _fields(record, (str, str, str, int))
    return NicvmReport(*cast("tuple[str, str, str, int]", tuple(report)))


DECODERS: dict[HostOp, Callable[[bytes], NicvmRecord]] = {
    HostOp.NICVM_LOAD: _decode_load,
    HostOp.NICVM_PURGE: _decode_purge,
    HostOp.NICVM_LIST: lambda _record: NicvmListReq(),
    HostOp.NICVM_COMM: _decode_comm,
    HostOp.NICVM_DELEGATE: _decode_delegate,
    HostOp.NICVM_REPLY: _decode_reply,
    HostOp.NICVM_DONE: _decode_done,
    HostOp.NICVM_REPORT: _decode_report,
}
"""NICVM opcode -> decoder."""
