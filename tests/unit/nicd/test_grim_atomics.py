"""Remote atomics on the NIC: nicd.grim.atomics (pure) and RM_ATOMIC through two NicCores on
netsim's virtual network, the target host never involved."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from nicd.grim.atomics import AtomicError, AtomicOp, apply_atomic, pack_meta, unpack_meta
from nicd.hostlink.grim import RmStatus
from nicd.link.wire import MsgType
from tests.unit.nicd.test_grim_nic import PORT, VBASE, Pair


def _apply(op: AtomicOp, code: str, start: list[int], operand: list[int]) -> tuple[list, list]:
    mem = bytearray(np.array(start, code).tobytes())
    old = apply_atomic(int(op), code, memoryview(mem), np.array(operand, code).tobytes())
    return np.frombuffer(mem, code).tolist(), np.frombuffer(old, code).tolist()


@pytest.mark.parametrize(
    ("op", "after"),
    [
        (AtomicOp.SUM, [11, 22, 3]),
        (AtomicOp.PROD, [10, 40, 0]),
        (AtomicOp.MAX, [10, 20, 3]),
        (AtomicOp.MIN, [1, 2, 0]),
        (AtomicOp.BOR, [11, 22, 3]),
        (AtomicOp.BAND, [0, 0, 0]),
        (AtomicOp.LAND, [1, 1, 0]),
        (AtomicOp.REPLACE, [10, 20, 0]),
        (AtomicOp.NO_OP, [1, 2, 3]),
    ],
)
def test_each_op_applies_per_element_and_returns_the_old_contents(
    op: AtomicOp, after: list[int]
) -> None:
    mem, old = _apply(op, "i", [1, 2, 3], [10, 20, 0])
    assert mem == after
    assert old == [1, 2, 3]


def test_compare_and_swap_writes_only_on_equality() -> None:
    mem = bytearray(struct.pack("<q", 5))
    old = apply_atomic(AtomicOp.CAS, "q", memoryview(mem), struct.pack("<qq", 4, 9))
    assert (old, bytes(mem)) == (struct.pack("<q", 5), struct.pack("<q", 5))
    apply_atomic(AtomicOp.CAS, "q", memoryview(mem), struct.pack("<qq", 5, 9))
    assert struct.unpack("<q", mem)[0] == 9


def test_floats_sum_and_refuse_bitwise_ops_writing_nothing() -> None:
    assert _apply(AtomicOp.SUM, "d", [1.5], [2.0])[0] == [3.5]
    mem = bytearray(np.array([1.0]).tobytes())
    with pytest.raises(AtomicError):
        apply_atomic(AtomicOp.BXOR, "d", memoryview(mem), np.array([1.0]).tobytes())
    assert np.frombuffer(mem).tolist() == [1.0]
    with pytest.raises(AtomicError):
        apply_atomic(99, "i", memoryview(bytearray(4)), bytes(4))
    with pytest.raises(AtomicError):
        apply_atomic(AtomicOp.SUM, "i", memoryview(bytearray(4)), bytes(3))


def test_meta_round_trips() -> None:
    assert unpack_meta(pack_meta(AtomicOp.MIN, "Q", fetch=True)) == (4, "Q", True)
    assert unpack_meta(pack_meta(AtomicOp.SUM, "b", fetch=False)) == (1, "b", False)


def test_rm_atomic_fetch_and_add_on_the_nic_returns_old_values_to_the_initiator() -> None:
    p = Pair()
    p.block(1, VBASE, 64, 0, static=True)  # target window
    p.block(0, VBASE, 64, 128, static=True)  # initiator's result block
    p.memory[1][0:8] = struct.pack("<q", 40)
    meta = pack_meta(AtomicOp.SUM, "q", fetch=True)
    p.host_send(0, PORT, MsgType.RM_ATOMIC, struct.pack("<q", 2), 0, (VBASE, VBASE + 8, 0, 0))
    assert p.statuses(0) == [(0, RmStatus.BAD_OP)]  # meta 0: no such op, nothing written
    p.host_send(0, PORT, MsgType.RM_ATOMIC, struct.pack("<q", 2), 0, (VBASE, VBASE + 8, 7, meta))
    assert struct.unpack_from("<q", p.memory[1], 0)[0] == 42
    assert struct.unpack_from("<q", p.memory[0], 136)[0] == 40
    assert p.statuses(0)[-1] == (7, RmStatus.OK)
    assert not p.host[1]  # the target host took no part


def test_rm_atomic_without_fetch_reports_a_status_and_refuses_out_of_range() -> None:
    p = Pair()
    p.block(1, VBASE, 16, 0, static=True)
    meta = pack_meta(AtomicOp.MAX, "i", fetch=False)
    p.host_send(0, PORT, MsgType.RM_ATOMIC, struct.pack("<ii", 3, -1), 0, (VBASE, 0, 1, meta))
    assert struct.unpack_from("<ii", p.memory[1], 0) == (3, 0)
    p.host_send(0, PORT, MsgType.RM_ATOMIC, bytes(8), 0, (VBASE + 12, 0, 2, meta))
    cas = pack_meta(AtomicOp.CAS, "i", fetch=False)
    p.host_send(0, PORT, MsgType.RM_ATOMIC, struct.pack("<ii", 3, 8), 0, (VBASE, 0, 3, cas))
    assert struct.unpack_from("<i", p.memory[1], 0) == (8,)
    assert p.statuses(0) == [(1, RmStatus.OK), (2, RmStatus.OUT_OF_RANGE), (3, RmStatus.OK)]
