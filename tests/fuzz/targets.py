"""The fuzz targets: one function per decoder that takes bytes from outside, in plain Python.

Each target takes one input (``bytes``) and returns normally when the decoder behaved: it
refused the input with its module's typed error, or it decoded it and the result survives a
round trip through the encoder. Anything else escapes as an exception: an untyped error out of
a decoder, or an ``AssertionError`` naming the round trip that failed. The coverage-guided
runner (`tests/fuzz/run.py`, with atheris) and the corpus replay in the normal suite
(`tests/fuzz/test_corpus.py`, without atheris) call the same functions.

* ``wire``: a datagram from a peer (``nicd.link.wire.decode_untrusted``, the bundle splitter,
  the multicast-ACK and NICVM-preamble decoders): ``BadPacket``, or re-encodes byte for byte;
* ``hostlink``: the records of one host connection (``nicd.hostlink.Assembler.feed``):
  ``ProtocolViolation``, or the record re-encodes and decodes equal;
* ``control``: a frame body and a stream of emurun <-> agent frames (``launcher.control``):
  ``ControlError``, or each message re-encodes and decodes equal;
* ``forkserver``: the fork server's records (``launcher.forkserver.records``): ``BadRecord``,
  or the record re-encodes and decodes equal;
* ``nicvm``: module source (``nicd.nicvm.compiler.compile_module``): ``NicvmError``, or a
  module whose one run on a packet ends without a VM error.
"""

from __future__ import annotations

import contextlib
import struct
from typing import TYPE_CHECKING, TypeVar

from launcher import control
from launcher.forkserver import records as fs
from nicd import hostlink as hl
from nicd.errors import BadPacket, ProtocolViolation
from nicd.link import bundle, wire
from nicd.nicvm import packet as nicvm_packet
from nicd.nicvm.compiler import compile_module
from nicd.nicvm.errors import NicvmError
from nicd.nicvm.vm import Outcome, Packet, run

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["TARGETS", "join_records", "split_records"]

_LEN16 = struct.Struct(">H")
_T = TypeVar("_T")
_R = TypeVar("_R")


# -- wire: packets from peers ---------------------------------------------------------------


def _unless_bad(decode: Callable[[_T], _R], arg: _T) -> _R | None:
    """``decode(arg)``, or None when it raises BadPacket."""
    try:
        return decode(arg)
    except BadPacket:
        return None


def _check_frame(frame: bytes) -> None:
    p = _unless_bad(wire.decode_untrusted, frame)
    if p is None:
        return
    again = wire.encode(p)
    assert again == frame, f"wire round trip: {frame.hex()} -> {p!r} -> {again.hex()}"
    if isinstance(p, wire.ControlPacket):
        if p.msg_type is wire.MsgType.MCAST_ACK:
            _check_mcast_ack(p)
        return
    _check_preamble(p.payload)


def _check_mcast_ack(p: wire.ControlPacket) -> None:
    ack = _unless_bad(wire.decode_mcast_ack_untrusted, p)
    if ack is None:
        return
    back = wire.mcast_ack_packet(
        ack.group, ack.epoch, ack.seq, ack.kind, ack.from_node, ack.to_node
    )
    back.route = p.route
    assert back == p, f"mcast ACK round trip: {p!r} -> {ack!r} -> {back!r}"


def _check_preamble(payload: bytes) -> None:
    pre = _unless_bad(nicvm_packet.decode_preamble_untrusted, payload)
    if pre is None:
        return
    again = nicvm_packet.encode_preamble(pre.name, pre.root, pre.comm, pre.hops)
    assert again == payload[: pre.body_offset], f"NICVM preamble round trip: {payload.hex()}"


def wire_input(data: bytes) -> None:
    """A datagram from a peer: a bundle of frames or one frame."""
    if bundle.is_bundle(data):
        frames = _unless_bad(bundle.split_bundle_untrusted, data)
        if frames is None:
            return
        again = bundle.encode_bundle(frames)
        assert again == data, f"bundle round trip: {data.hex()} -> {again.hex()}"
        for frame in frames:
            _check_frame(frame)
        return
    _check_frame(data)


# -- hostlink: the records of one host connection --------------------------------------------


def split_records(data: bytes) -> Iterator[bytes]:
    """The SEQPACKET records an input stands for: each a 16-bit length, then its bytes (a
    record cut short by the end of the input is taken as it is)."""
    at = 0
    while at + _LEN16.size <= len(data):
        (length,) = _LEN16.unpack_from(data, at)
        at += _LEN16.size
        yield data[at : at + length]
        at += length


def join_records(records: list[bytes]) -> bytes:
    """The input that :func:`split_records` splits into ``records`` (for seeds)."""
    return b"".join(_LEN16.pack(len(r)) + r for r in records)


def hostlink_input(data: bytes) -> None:
    """Records of one connection fed in order to one Assembler, as nicd (and the host) do."""
    assembler = hl.Assembler(max_message=1 << 20)
    for record in split_records(data):
        try:
            rec = assembler.feed(record)
        except ProtocolViolation:
            continue  # counted by the caller; the assembler must stay usable
        if rec is None:
            continue
        wire_records = hl.encode_record(rec)
        fresh = hl.Assembler(max_message=1 << 20)
        back = [fresh.feed(r) for r in wire_records]
        assert back[:-1] == [None] * (len(back) - 1), f"{rec!r}: a record finished early"
        assert back[-1] == rec, f"host record round trip: {record.hex()} -> {rec!r} -> {back!r}"


# -- control: emurun <-> agent -----------------------------------------------------------------


def _check_message(message: control.Message) -> None:
    frame = control.encode_message(message)
    back = control.decode_message_untrusted(frame[4:])
    assert back == message, f"control round trip: {message!r} -> {back!r}"


def control_input(data: bytes) -> None:
    """One frame body, then the same bytes as a connection's stream, cut in two."""
    with contextlib.suppress(control.ControlError):
        _check_message(control.decode_message_untrusted(data))
    decoder = control.FrameDecoder()
    cut = data[0] % (len(data) + 1) if data else 0
    try:
        for part in (data[:cut], data[cut:]):
            for message in decoder.feed(part):
                _check_message(message)
    except control.ControlError:
        return


# -- forkserver: launcher <-> zygote -----------------------------------------------------------


def forkserver_input(data: bytes) -> None:
    """The same bytes as a Hello, a Request (with each fd count from 0 to 16) and a report."""
    try:
        hello = fs.decode_hello_untrusted(data)
    except fs.BadRecord:
        pass
    else:
        assert fs.decode_hello_untrusted(fs.encode_hello(hello)) == hello, repr(hello)
    for nfds in range(fs.MAX_FDS + 1):  # at most one fd count fits the record
        try:
            req = fs.decode_request_untrusted(data, nfds)
        except fs.BadRecord:
            continue
        assert fs.decode_request_untrusted(fs.encode_request(req), nfds) == req, repr(req)
    try:
        report = fs.decode_report_untrusted(data)
    except fs.BadRecord:
        return
    assert fs.decode_report_untrusted(fs.encode_report(report)) == report, repr(report)


# -- nicvm: module source from a host ----------------------------------------------------------

_FUEL = 2_000  # enough to reach most of a small module's code, little enough to stay fast


def nicvm_input(data: bytes) -> None:
    """Compile the source; a module that compiles runs once on a packet without a VM error."""
    source = data.decode("utf-8", "replace")
    try:
        module = compile_module(source)
    except NicvmError:
        return
    ctx = Packet(rank=1, size=4, root=0, args=[1, 2, 3, 4], payload=bytearray(range(32)))
    result = run(module, ctx, fuel=_FUEL)
    assert result.outcome is not Outcome.VM_ERROR, f"VM error: {result.detail}"


TARGETS: dict[str, Callable[[bytes], None]] = {
    "wire": wire_input,
    "hostlink": hostlink_input,
    "control": control_input,
    "forkserver": forkserver_input,
    "nicvm": nicvm_input,
}
"""Target name -> its entry point."""
