"""The host-link codec tables: every op has one decoder and every record class one encoder,
the bytes match checked-in vectors, and malformed input gives only ProtocolViolation."""

from __future__ import annotations

import contextlib
import typing

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nicd import hostlink as hl
from nicd.errors import ProtocolViolation, UsageError
from nicd.hostlink import codec, gm, grim, mcast, nicvm
from tests.unit.hostlink_strategies import STRATEGIES

FAMILIES = {"gm": gm, "grim": grim, "mcast": mcast, "nicvm": nicvm}

# Every opcode's value, pinned: host and NIC must agree on each byte.
HOSTOP_VALUES = {
    "OPEN": 1, "SEND": 2, "PROVIDE": 3, "CLOSE": 4, "SET_ROUTES": 5, "GET_STATS": 6,
    "REGISTER": 7, "DEREGISTER": 8, "SIGNALS": 9, "ADD_ROUTES": 10, "OPENED": 20, "RECV": 21,
    "SENT": 22,
    "ERROR": 23, "ROUTES_OK": 24, "STATS": 25, "REFUSED": 26, "REGISTERED": 27, "RM_DONE": 28,
    "SENT_MANY": 29, "CONT": 40, "RM_MAP": 80, "RM_UNMAP": 81, "RM_XLATE_REQ": 82,
    "RM_XLATE": 83, "RM_STATUS": 84, "RM_SIGNALS": 85, "RM_WATCH": 86, "RM_LANDED": 87,
    "MCAST_GROUP": 60, "MCAST_FREE": 61, "MCAST_SEND": 62,
    "MULTISEND": 63, "MCAST_GROUP_OK": 64, "MCAST_ERROR": 65, "NICVM_LOAD": 70,
    "NICVM_PURGE": 71, "NICVM_LIST": 72, "NICVM_COMM": 73, "NICVM_DELEGATE": 74,
    "NICVM_REPLY": 75, "NICVM_DONE": 76, "NICVM_REPORT": 77,
}  # fmt: skip

ARGS = (1, 0x02000003, 0xFFFFFFFF, 4)

# One record of every class and the bytes the pre-table codec (d62a854) gave for it.
VECTORS = [
    (hl.OpenReq(0x1234), "011234"),
    (
        hl.SendReq(0x01020304, 5, 6, b"hi", 3, 7, ARGS),
        "0203010203040005000600070000000102000003ffffffff00000004000000026869",
    ),
    (hl.ProvideReq(9), "0300000009"),
    (hl.CloseReq(), "04"),
    (hl.SetRoutesReq({1: ("10.0.0.1", 7001)}), "05810192a831302e302e302e31cd1b59"),
    (hl.AddRoutesReq({1: ("10.0.0.1", 7001)}), "0a810192a831302e302e302e31cd1b59"),
    (hl.StatsReq(), "06"),
    (hl.RegisterReq(2, 4096, "shm"), "0700020000100073686d"),
    (hl.DeregisterReq(2), "080002"),
    (hl.SignalCtl(True, 0x1234, 7), "09010000123400000007"),
    (hl.Opened(3, 1, 4, 16), "140003000100040010"),
    (
        hl.RecvEvent(2, 3, b"ok", 1, 0, ARGS, 9),
        "150100020003000000090000000102000003ffffffff00000004000000026f6b",
    ),
    (hl.SentEvent(0xDEADBEEF), "16deadbeef"),
    (hl.ErrorEvent(5, 2, "peer_dead"), "17000000050002706565725f64656164"),
    (hl.RoutesOk(), "18"),
    (hl.StatsReply({"sent": 3}), "1981a473656e7403"),
    (hl.Refused("no"), "1a6e6f"),
    (hl.Registered(2), "1b0002"),
    (
        hl.RmWriteEvent(1, 2, 3, 0x100, 0x40, ARGS),
        "1c00010002000300000100000000400000000102000003ffffffff00000004",
    ),
    (hl.SentBatch((1, 2)), "1d0000000100000002"),
    (hl.RmMapReq(0x10000000, 64, 1, 128), "501000000000000040000100000080"),
    (hl.RmUnmapReq(0x10000000), "5110000000"),
    (hl.RmXlateReq(0x10000004, 8), "521000000400000008"),
    (hl.RmXlateReply(0x10000004, 0x10000000, 64, 2, 0), "53100000041000000000000040000200000000"),
    (hl.RmStatusEvent(7, 3), "54000000070003"),
    (hl.RmUpcallSignals(True, 0x1234), "550100001234"),
    (hl.RmWatch(True), "5601"),
    (hl.RmLanded(), "57"),
    (hl.McastGroupReq(4, 0, 1, (2, 3), 5, True), "3c010004000500000001000200020003"),
    (hl.McastFreeReq(4), "3d0004"),
    (
        hl.McastSendReq(6, 4, b"m", 2, ARGS),
        "3e00000006000400020000000102000003ffffffff00000004000000016d",
    ),
    (
        hl.MultiSendReq(6, (1, 2), 3, b"x", 14, 0, ARGS),
        "3f0e00000006000300000000000102000003ffffffff000000040002000000010001000278",
    ),
    (hl.McastGroupOk(4), "400004"),
    (hl.McastErrorEvent(4, 2, "retries"), "410004000272657472696573"),
    (hl.NicvmLoadReq("bc", "x", True), "4693a26263a178c3"),
    (hl.NicvmPurgeReq("bc"), "47a26263"),
    (hl.NicvmListReq(), "48"),
    (hl.NicvmCommReq(1, (0, 1)), "499201920001"),
    (
        hl.NicvmDelegateReq(8, "bc", 0, 1, b"p", ARGS),
        "4a00000008000000010000000102000003ffffffff0000000402626370",
    ),
    (hl.NicvmReply(False, "e", 2, 3, None), "4b95c2a1650203c0"),
    (hl.NicvmDone(8, "ok", 0, "", 0), "4c9508a26f6b00a000"),
    (hl.NicvmReport("bc", "fault", "d", 4), "4d94a26263a56661756c74a16404"),
]


def test_hostop_values_are_pinned() -> None:
    assert {op.name: int(op) for op in hl.HostOp} == HOSTOP_VALUES


def test_every_op_has_exactly_one_decoder() -> None:
    owners: dict[hl.HostOp, list[str]] = {}
    for name, family in FAMILIES.items():
        for op in family.DECODERS:
            owners.setdefault(op, []).append(name)
    assert set(owners) == set(hl.HostOp) - {hl.HostOp.CONT}
    assert all(len(names) == 1 for names in owners.values()), owners
    assert set(codec.DECODERS) == set(owners)


def test_every_record_class_has_exactly_one_encoder() -> None:
    classes = set(typing.get_args(hl.HostRecord))
    owners: dict[type, list[str]] = {}
    for name, family in FAMILIES.items():
        for cls in family.ENCODERS:
            owners.setdefault(cls, []).append(name)
    assert set(owners) == classes == set(codec.ENCODERS) == set(STRATEGIES)
    assert all(len(names) == 1 for names in owners.values()), owners
    assert {type(rec) for rec, _ in VECTORS} == classes


def test_a_table_built_with_a_duplicate_refuses() -> None:
    with pytest.raises(ValueError, match="two encoders"):
        codec._merged((gm.ENCODERS, gm.ENCODERS))
    with pytest.raises(ValueError, match="two decoders"):
        codec._merged_ops((grim.DECODERS, grim.DECODERS))


@pytest.mark.parametrize(("rec", "hex_"), VECTORS, ids=[type(r).__name__ for r, _ in VECTORS])
def test_vectors(rec: hl.HostRecord, hex_: str) -> None:
    assert hl.encode_record(rec) == [bytes.fromhex(hex_)]
    assert hl.Assembler().feed(bytes.fromhex(hex_)) == rec


@pytest.mark.parametrize(("rec", "hex_"), VECTORS, ids=[type(r).__name__ for r, _ in VECTORS])
def test_each_record_stays_in_its_family(rec: hl.HostRecord, hex_: str) -> None:
    """The opcode a record is encoded under is decoded by the family that encoded it."""
    [family] = [f for f in FAMILIES.values() if type(rec) in f.ENCODERS]
    assert bytes.fromhex(hex_)[0] in family.DECODERS


@pytest.mark.parametrize("cls", list(STRATEGIES), ids=lambda cls: cls.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_record_round_trips(cls: type, data: st.DataObject) -> None:
    rec = data.draw(STRATEGIES[cls])
    wire = hl.encode_record(rec)
    assert all(len(r) <= hl.MAX_RECORD_BYTES for r in wire)
    assembler = hl.Assembler()
    out = [assembler.feed(r) for r in wire]
    assert out[:-1] == [None] * (len(wire) - 1)
    assert out[-1] == rec
    assert type(out[-1]) is cls


def test_unknown_ops_are_protocol_violations() -> None:
    unknown = set(range(256)) - {int(op) for op in hl.HostOp}
    assert len(unknown) == 256 - len(hl.HostOp)
    for op in unknown:
        with pytest.raises(ProtocolViolation, match="unknown opcode"):
            hl.Assembler().feed(bytes([op]) + bytes(40))


def test_cont_alone_is_a_protocol_violation() -> None:
    with pytest.raises(ProtocolViolation):
        hl.Assembler().feed(bytes([hl.HostOp.CONT]) + bytes(40))


@pytest.mark.parametrize("bad", [object(), 7, b"\x01", hl.HostOp.OPEN], ids=repr)
def test_encoding_a_non_record_is_a_usage_error(bad: object) -> None:
    with pytest.raises(UsageError, match="not a host record"):
        hl.encode_record(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("rec", "hex_"), VECTORS, ids=[type(r).__name__ for r, _ in VECTORS])
def test_every_truncation_raises_only_protocol_violation(rec: hl.HostRecord, hex_: str) -> None:
    """A cut record is refused, or (a chunk head) waits for CONT; it never decodes as the
    record, and never raises anything but the typed error."""
    whole = bytes.fromhex(hex_)
    for cut in range(len(whole)):
        try:
            out = hl.Assembler().feed(whole[:cut])
        except ProtocolViolation:
            continue
        assert out != rec


msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats()
    | st.text(max_size=8) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(
        st.integers(0, 9) | st.text(max_size=3), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    op=st.sampled_from(list(hl.HostOp)),
    body=st.binary(max_size=80) | msgpack_values.map(lambda v: msgpack.packb(v)),
)
def test_any_bytes_after_any_op_give_a_record_or_protocol_violation(op: int, body: bytes) -> None:
    with contextlib.suppress(ProtocolViolation):
        hl.Assembler().feed(bytes([op]) + body)


@pytest.mark.parametrize(
    "fields",
    [[True, "e", float("inf"), 0, None], [True, "e", float("nan"), 0, None], [1, 2, 3], 5],
    ids=["inf-line", "nan-line", "short", "not-a-list"],
)
def test_a_malformed_nicvm_reply_is_a_protocol_violation(fields: object) -> None:
    record = bytes([hl.HostOp.NICVM_REPLY]) + msgpack.packb(fields)
    with pytest.raises(ProtocolViolation):
        hl.Assembler().feed(record)
