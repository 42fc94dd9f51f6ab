"""Type maps (run-length), type codes, message-spec parsing, staged receives, DLPack views and
pickling of datatypes: the pure parts of issue 15's datatype work, without a NIC."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from emucluster.mpi.buffer.address import Get_address
from emucluster.mpi.buffer.dlpack import dlpack_view
from emucluster.mpi.buffer.spec import message
from emucluster.mpi.datatype.constructors import ORDER_C
from emucluster.mpi.datatype.darray import (
    DISTRIBUTE_BLOCK,
    DISTRIBUTE_CYCLIC,
    DISTRIBUTE_DFLT_DARG,
)
from emucluster.mpi.datatype.datatype import Datatype, predefined
from emucluster.mpi.errors import ERR_BUFFER
from emucluster.mpi.errors import Exception as MPIException

INT, BYTE, DOUBLE = predefined["INT"], predefined["BYTE"], predefined["DOUBLE"]
INT_MAX = 2**31 - 1


def test_huge_contiguous_type_is_one_run() -> None:
    t = BYTE.Create_contiguous(INT_MAX)
    assert t.size == INT_MAX
    assert t.extent == INT_MAX
    assert len(t.typemap.counts) == 1
    assert int(t.typemap.counts[0]) == INT_MAX
    assert t.typemap.contiguous


def test_runs_merge_and_vector_packs_and_unpacks() -> None:
    assert INT.Create_vector(3, 2, 2).typemap.contiguous  # stride == blocklength: one run
    v = INT.Create_vector(3, 2, 4)
    assert (v.size, v.extent) == (24, 40)
    assert len(v.typemap.counts) == 3
    src = np.arange(10, dtype="i")
    packed = v.pack_from(memoryview(src).cast("B"), 0, 1)
    assert np.frombuffer(packed, "i").tolist() == [0, 1, 4, 5, 8, 9]
    dst = np.full(10, -1, dtype="i")
    v.unpack_into(memoryview(dst).cast("B"), 0, packed)
    assert dst.tolist() == [0, 1, -1, -1, 4, 5, -1, -1, 8, 9]


def test_struct_of_mixed_kinds_and_resized_bounds() -> None:
    s = INT.Create_struct([1, 2], [0, 8], [INT, DOUBLE])
    assert (s.size, s.extent, s.typemap.elements) == (20, 24, 3)
    r = INT.Create_resized(-4, 12)
    assert (r.lb, r.extent, r.true_lb, r.true_extent) == (-4, 12, 0, 4)


@pytest.mark.parametrize(
    ("nbytes", "elements"),
    [(0, 0), (4, 1), (6, None), (8, None), (12, 2), (20, 3), (19, None), (24, None)],
)
def test_elements_in_a_partial_element_count_whole_basic_elements(
    nbytes: int, elements: int | None
) -> None:
    s = INT.Create_struct([1, 2], [0, 8], [INT, DOUBLE])  # int, then two doubles: 20 bytes
    assert s.typemap.elements_in(nbytes) == elements


def test_elements_in_a_huge_contiguous_type_is_one_division() -> None:
    t = INT.Create_contiguous(INT_MAX // 4)
    assert t.typemap.elements_in(4_000_000) == 1_000_000
    assert t.typemap.elements_in(4_000_001) is None


def test_type_codes_round_trip() -> None:
    for name in ("INT", "DOUBLE", "INT32_T", "C_BOOL", "REAL16", "UNSIGNED_LONG"):
        t = predefined[name]
        assert Datatype.fromcode(t.tocode()).typechar == t.typechar
    assert (INT.typestr, INT.Dup().tocode()) == ("i4", "i")
    vec = INT.Create_vector(2, 1, 2)
    assert (vec.typechar, vec.typestr) == ("V", "V12")
    with pytest.raises(ValueError, match="cannot map"):
        vec.tocode()
    with pytest.raises(ValueError, match="cannot map"):
        Datatype.fromcode("abc@xyz")


def test_message_specs_as_mpi4py_reads_them() -> None:
    buf = np.arange(8, dtype="i")
    msg = message([buf, 3, 2, "i"], writable=False)  # count 3 from element 2, type code
    assert msg.elements == 3
    assert np.frombuffer(msg.view, "i").tolist() == [2, 3, 4]
    msg = message([buf, (2, 1), INT], writable=False)
    assert np.frombuffer(msg.view, "i").tolist() == [1, 2]
    with pytest.raises(ValueError, match="displacement"):
        message([bytearray(5), 0, 2, "i"], writable=False)
    with pytest.raises(ValueError, match="negative count"):
        message([bytearray(5), -1, "i"], writable=False)
    with pytest.raises(ValueError, match="2 to 4"):
        message([bytearray(5), 0, 0, "i", None], writable=False)
    with pytest.raises(KeyError):
        message([bytearray(5), 0, "\0"], writable=False)
    with pytest.raises(TypeError):
        message([[1, 2], 2, 0, "i"], writable=False)
    with pytest.raises(BufferError) as caught:
        message(b"abc", writable=True)
    assert isinstance(caught.value, MPIException)
    assert caught.value.Get_error_class() == ERR_BUFFER


def test_empty_receive_writes_nothing() -> None:
    msg = message([None, INT], writable=True)
    INT.unpack_into(msg.view, 0, b"")  # a read-only empty view used to raise here
    assert msg.elements == 0
    assert not msg.view.readonly


def test_staged_receive_into_a_vector_unpacks_once_delivered() -> None:
    v = INT.Create_vector(3, 1, 2)
    dst = np.full(6, -1, dtype="i")
    with pytest.raises(MPIException):
        message([dst, 1, v], writable=True)  # callers that cannot unpack are refused
    msg = message([dst, 1, v], writable=True, staged=True)
    assert msg.deliver is not None
    assert len(msg.view) == 12
    msg.view[:] = np.array([7, 8, 9], dtype="i").tobytes()
    msg.deliver(12)
    assert dst.tolist() == [7, -1, 8, -1, 9, -1]


class _DLPackOnly:
    """Exposes an array only through DLPack (no buffer protocol)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs: object) -> object:
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def test_dlpack_view_shares_memory_and_keeps_the_format() -> None:
    array = np.arange(4, dtype="i")
    view = dlpack_view(_DLPackOnly(array))
    assert view.format == "i"
    assert view.tolist() == [0, 1, 2, 3]
    view[1] = 42
    assert array[1] == 42
    assert message(_DLPackOnly(array), writable=False).datatype is INT
    assert Get_address(_DLPackOnly(array)) == array.ctypes.data == Get_address(array)


def test_datatypes_pickle_by_name_or_by_constructor() -> None:
    assert pickle.loads(pickle.dumps(INT)) is INT
    assert pickle.loads(pickle.dumps(predefined["DATATYPE_NULL"])) is predefined["DATATYPE_NULL"]
    v = DOUBLE.Create_vector(2, 3, 4)
    w = pickle.loads(pickle.dumps(v))
    assert w.decode()[1:] == v.decode()[1:]
    assert (w.size, w.extent) == (v.size, v.extent)


def test_freeing_an_old_type_keeps_the_derived_one() -> None:
    old = INT.Create_contiguous(2)
    new = old.Create_vector(2, 1, 2)
    old.Free()
    assert new.decode()[0].size == 8


def test_darray_owns_blocks_and_cycles_of_the_global_array() -> None:
    dflt = DISTRIBUTE_DFLT_DARG
    # 2 x 2 processes over a 4 x 6 array: rank 3 owns rows 2-3 (block) and columns 1, 3, 5
    t = INT.Create_darray(4, 3, [4, 6], [DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC], [dflt, dflt],
                          [2, 2], ORDER_C)  # fmt: skip
    assert t.extent == 4 * 6 * 4
    whole = np.arange(24, dtype="i")
    picked = np.frombuffer(t.pack_from(memoryview(whole).cast("B"), 0, 1), "i")
    assert picked.tolist() == [13, 15, 17, 19, 21, 23]
    again = t.decode()
    assert again[1] == "DARRAY"
    assert again[2]["psizes"] == [2, 2]
    sub = INT.Create_subarray([4, 6], [2, 3], [1, 2])
    picked = np.frombuffer(sub.pack_from(memoryview(whole).cast("B"), 0, 1), "i")
    assert picked.tolist() == [8, 9, 10, 14, 15, 16]
