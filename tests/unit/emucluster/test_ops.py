"""MPI.Op on objects and buffers, datatypes, buffer specs and Status (no MPI init needed)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from emucluster.coll.context import simulate
from emucluster.mpi.buffer.spec import message
from emucluster.mpi.collective.ops import BufferCombine, ObjectCombine, Op
from emucluster.mpi.collective.ops import predefined_ops as ops
from emucluster.mpi.constants import ANY_SOURCE, ANY_TAG, UNDEFINED
from emucluster.mpi.datatype.datatype import predefined as dt
from emucluster.mpi.errors import ERR_BUFFER, ERR_COUNT, ERR_TRUNCATE, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.request.status import Status


@pytest.mark.parametrize(
    ("name", "values", "expected"),
    [
        ("SUM", [1, 2, 3, 4], 10),
        ("SUM", ["a", "b", "c"], "abc"),
        ("SUM", [[1], [2]], [1, 2]),
        ("PROD", [2, 3, 4], 24),
        ("MAX", [3, 9, 2], 9),
        ("MIN", [3, 9, 2], 2),
        ("LAND", [0, 1, 1, 1], False),
        ("LOR", [0, 1, 1, 1], True),
        ("LXOR", [0, 1, 1, 1], True),
        ("BAND", [1, 2, 3, 4], 0),
        ("BOR", [1, 2, 4], 7),
        ("BXOR", [1, 3, 7], 5),
        ("MAXLOC", [(0, 0), (1, 1), (0, 2), (1, 3)], (1, 1)),
        ("MINLOC", [(5, 3), (5, 2), (5, 1), (5, 0)], (5, 0)),
        ("REPLACE", [0, 1, 2, 3], 3),
        ("NO_OP", [0, 1, 2, 3], 0),
    ],
)
def test_object_ops_in_rank_order(name: str, values: list[object], expected: object) -> None:
    """The results mpi4py over MPICH gives for allreduce of these values over 4 ranks."""
    op = ops[name]
    acc = values[0]
    for value in values[1:]:
        acc = op(acc, value)
    assert acc == expected


def test_object_ops_on_numpy_arrays_are_elementwise() -> None:
    a, b = np.array([1, 5]), np.array([4, 2])
    assert ops["MAX"](a, b).tolist() == [4, 5]
    assert ops["MIN"](a, b).tolist() == [1, 2]
    assert ops["SUM"](a, b).tolist() == [5, 7]


def test_user_op_gets_none_datatype_for_objects() -> None:
    calls: list[object] = []

    def concat(x: str, y: str, datatype: object) -> str:
        calls.append(datatype)
        return f"({x}.{y})"

    op = Op.Create(concat, commute=False)
    assert not op.is_commutative
    assert not op.is_predefined
    assert op("0", "1") == "(0.1)"
    assert calls == [None]


@pytest.mark.parametrize(
    ("name", "a", "b", "expected"),
    [
        ("SUM", [1.5, 2.0], [1.0, -1.0], [2.5, 1.0]),
        ("MAX", [1.0, 7.0], [3.0, 2.0], [3.0, 7.0]),
        ("PROD", [2.0, 3.0], [4.0, 0.5], [8.0, 1.5]),
        ("LAND", [1.0, 0.0], [1.0, 1.0], [1.0, 0.0]),
    ],
)
def test_buffer_ops_on_doubles(
    name: str, a: list[float], b: list[float], expected: list[float]
) -> None:
    out = ops[name].combine_bytes(np.array(a).tobytes(), np.array(b).tobytes(), dt["DOUBLE"])
    assert np.frombuffer(out).tolist() == expected


def test_bitwise_ops_reject_floats() -> None:
    with pytest.raises(MPIException):
        ops["BAND"].combine_bytes(np.ones(2).tobytes(), np.ones(2).tobytes(), dt["DOUBLE"])


def test_maxloc_minloc_on_pair_buffers() -> None:
    pair = dt["DOUBLE_INT"].dtype
    a = np.array([(1.0, 0), (5.0, 0), (2.0, 0)], dtype=pair)
    b = np.array([(1.0, 1), (3.0, 1), (9.0, 1)], dtype=pair)
    out = np.frombuffer(ops["MAXLOC"].combine_bytes(a.tobytes(), b.tobytes(), dt["DOUBLE_INT"]),
                        dtype=pair)  # fmt: skip
    assert out.tolist() == [(1.0, 0), (5.0, 0), (9.0, 1)]
    out = np.frombuffer(ops["MINLOC"].combine_bytes(b.tobytes(), a.tobytes(), dt["DOUBLE_INT"]),
                        dtype=pair)  # fmt: skip
    assert out.tolist() == [(1.0, 0), (3.0, 1), (2.0, 0)]


def test_user_op_on_buffers_follows_inoutbuf_rule() -> None:
    def sub(inbuf: memoryview, inoutbuf: memoryview, datatype: object) -> None:
        x = np.frombuffer(inbuf, dtype="i4")
        y = np.frombuffer(inoutbuf, dtype="i4")
        y[:] = x - y  # inoutbuf = inbuf op inoutbuf

    op = Op.Create(sub)
    out = op.combine_bytes(np.array([10, 20], "i4").tobytes(), np.array([1, 2], "i4").tobytes(),
                           dt["INT"])  # fmt: skip
    assert np.frombuffer(out, "i4").tolist() == [9, 18]
    inout = np.array([1, 2], "i4")
    op.Reduce_local(np.array([10, 20], "i4"), inout)
    assert inout.tolist() == [9, 18]


def test_combines_keep_commutativity() -> None:
    assert ObjectCombine(ops["SUM"]).commute
    assert not ObjectCombine(ops["REPLACE"]).commute
    combine = BufferCombine(ops["SUM"], dt["INT"])
    a, b = np.array([1, 2], "i").tobytes(), np.array([3, 4], "i").tobytes()
    assert np.frombuffer(combine(a, b), "i").tolist() == [4, 6]
    obj = ObjectCombine(ops["SUM"])
    assert pickle.loads(obj(pickle.dumps("a"), pickle.dumps("b"))) == "ab"


# -- buffers and datatypes ---------------------------------------------------------------------


def test_message_specs() -> None:
    arr = np.arange(10, dtype="d")
    msg = message(arr, writable=False)
    assert msg.datatype is dt["DOUBLE"]
    assert msg.elements == 10
    assert len(msg.view) == 80
    msg = message([arr, dt["DOUBLE"]], writable=False)
    assert msg.elements == 10
    msg = message([arr, 3, dt["DOUBLE"]], writable=False)
    assert msg.elements == 3
    assert bytes(msg.view) == arr[:3].tobytes()
    msg = message([arr, (2, 5), dt["DOUBLE"]], writable=False)
    assert bytes(msg.view) == arr[5:7].tobytes()
    msg = message([arr, 4], writable=False)
    assert msg.elements == 4
    assert msg.datatype is dt["DOUBLE"]
    assert message(b"abc", writable=False).datatype is dt["BYTE"]
    assert message(np.zeros(3, "i"), writable=False).datatype is dt["INT"]
    assert message(np.zeros(3, "i8"), writable=False).datatype.Get_size() == 8
    assert message(None, writable=True).elements == 0
    pairs = np.zeros(2, dtype=dt["DOUBLE_INT"].dtype)
    assert message(pairs, writable=False).datatype is dt["DOUBLE_INT"]


@pytest.mark.parametrize(
    ("spec", "writable", "code"),
    [
        (b"abc", True, ERR_BUFFER),
        (np.zeros((4, 4))[:, 0], False, ERR_BUFFER),
        (object(), False, ERR_BUFFER),
        ([np.zeros(2), 5, dt["DOUBLE"]], False, ERR_COUNT),
        ([np.zeros(2), 1, "DOUBLE"], False, ERR_TYPE),
        (np.zeros(2, dtype="e"), False, ERR_TYPE),
    ],
)
def test_bad_message_specs(spec: object, writable: bool, code: int) -> None:
    with pytest.raises(MPIException) as info:
        message(spec, writable=writable)
    assert info.value.Get_error_class() == code


def test_datatype_sizes_and_names() -> None:
    assert dt["DOUBLE"].Get_size() == 8
    assert dt["DOUBLE"].Get_name() == "MPI_DOUBLE"
    assert dt["INT32_T"].size == 4
    assert dt["UINT8_T"].extent == 1
    assert dt["DOUBLE"].Get_extent() == (0, 8)
    three = dt["INT"].Create_contiguous(3).Commit()
    assert three.size == 12
    assert three.element_dtype == np.dtype("i")
    with pytest.raises(MPIException):
        dt["DATATYPE_NULL"].Get_size()


def test_status_defaults_and_counts() -> None:
    status = Status()
    assert (status.source, status.tag, status.error, status.Get_count()) == (
        ANY_SOURCE, ANY_TAG, 0, 0
    )  # fmt: skip
    status.set(3, 7, 24)
    assert status.Get_source() == 3
    assert status.Get_tag() == 7
    assert status.Get_count(dt["DOUBLE"]) == 3
    assert status.Get_count(dt["INT"]) == 6
    assert status.count == 24
    status.set(3, 7, 20)
    assert status.Get_count(dt["DOUBLE"]) == UNDEFINED
    assert Status(status) == status


def test_exception_carries_its_class() -> None:
    exc = MPIException(ERR_TRUNCATE, "detail")
    assert isinstance(exc, RuntimeError)
    assert exc.Get_error_class() == ERR_TRUNCATE == exc.error_class
    assert "MPI_ERR_TRUNCATE" in str(exc)
    assert "detail" in exc.Get_error_string()


# -- the collective contract's simulator ---------------------------------------------------------


def _ring_shift(ctx, data: bytes):  # type: ignore[no-untyped-def]
    send = ctx.isend(data, (ctx.rank + 1) % ctx.size, 0)
    recv = ctx.irecv((ctx.rank - 1) % ctx.size, 0)
    yield [send, recv]
    return recv.result


def test_simulate_runs_a_ring() -> None:
    results = simulate(_ring_shift, 5, lambda r: (bytes([r]),))
    assert results == [bytes([(r - 1) % 5]) for r in range(5)]
