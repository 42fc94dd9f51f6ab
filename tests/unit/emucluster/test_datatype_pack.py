"""``Datatype.Pack`` / ``Unpack`` and their external32 forms (emucluster.mpi.datatype.pack)
on numpy buffers: round trips through derived types, big-endian external32, positions and
truncation; and the byte views they read buffers through (emucluster.mpi.buffer.view)."""

from __future__ import annotations

import numpy as np
import pytest

from emucluster.mpi.buffer.view import NotABuffer, NotContiguous, ReadOnlyBuffer, byte_view
from emucluster.mpi.datatype import pack
from emucluster.mpi.datatype.datatype import Datatype, predefined
from emucluster.mpi.errors import ERR_ARG, ERR_TRUNCATE
from emucluster.mpi.errors import Exception as MPIException

INT, DOUBLE, SHORT, CHAR = (predefined[n] for n in ("INT", "DOUBLE", "SHORT", "CHAR"))


def test_pack_gathers_a_vector_and_unpack_scatters_it_back() -> None:
    v = INT.Create_vector(2, 2, 3)  # picks 0, 1, 3, 4 of each 5-int element (extent 20)
    src = np.arange(10, dtype="i")  # two elements of the vector's extent
    out = bytearray(v.Pack_size(2) + 4)
    assert v.Pack_size(2) == 32
    end = v.Pack(src, out, 4)
    assert end == 36
    assert np.frombuffer(out[4:], "i").tolist() == [0, 1, 3, 4, 5, 6, 8, 9]
    back = np.full(10, -1, dtype="i")
    assert v.Unpack(out, 4, back) == 36
    assert back.tolist() == [0, 1, -1, 3, 4, 5, 6, -1, 8, 9]


def test_pack_positions_chain_several_calls_into_one_buffer() -> None:
    a, b = np.arange(3, dtype="d"), np.arange(4, dtype="h")
    out = bytearray(DOUBLE.Pack_size(3) + SHORT.Pack_size(4))
    position = DOUBLE.Pack(a, out, 0)
    position = SHORT.Pack(b, out, position)
    assert position == len(out)
    a2, b2 = np.zeros(3, "d"), np.zeros(4, "h")
    assert SHORT.Unpack(out, DOUBLE.Unpack(out, 0, a2), b2) == len(out)
    assert (a2.tolist(), b2.tolist()) == (a.tolist(), b.tolist())


def test_struct_round_trip_on_a_numpy_record_array() -> None:
    record = np.dtype([("i", "i4"), ("d", "f8"), ("c", "S1")], align=True)
    s = Datatype.Create_struct([1, 1, 1], [0, 8, 16], [INT, DOUBLE, CHAR])
    assert (s.size, s.extent) == (13, record.itemsize)
    rows = np.array([(1, 1.5, b"a"), (2, -2.5, b"b")], dtype=record)
    out = bytearray(s.Pack_size(2))
    s.Pack(rows, out, 0)
    back = np.zeros(2, dtype=record)
    s.Unpack(out, 0, back)
    assert back.tolist() == rows.tolist()


def test_external32_is_big_endian_and_round_trips() -> None:
    ints = np.array([1, -2, 0x01020304], dtype="i")
    out = bytearray(INT.Pack_external_size("external32", 3))
    assert INT.Pack_external("external32", ints, out, 0) == 12
    assert bytes(out) == ints.astype(">i4").tobytes()
    s = Datatype.Create_struct([1, 1], [0, 8], [INT, DOUBLE])
    rows = np.array([(7, 0.25)], dtype=np.dtype([("i", "i4"), ("d", "f8")], align=True))
    out = bytearray(s.Pack_external_size("external32", 1))
    s.Pack_external("external32", rows, out, 0)
    expected = np.array([7], ">i4").tobytes() + np.array([0.25], ">f8").tobytes()
    assert bytes(out) == expected
    back = np.zeros_like(rows)
    assert s.Unpack_external("external32", out, 0, back) == 12
    assert back.tolist() == rows.tolist()


def test_bad_representation_truncation_and_buffers_are_errors() -> None:
    with pytest.raises(MPIException) as caught:
        INT.Pack_external("native", np.arange(2, dtype="i"), bytearray(8), 0)
    assert caught.value.Get_error_class() == ERR_ARG
    with pytest.raises(MPIException) as caught:
        INT.Pack(np.arange(4, dtype="i"), bytearray(8), 0)
    assert caught.value.Get_error_class() == ERR_TRUNCATE
    with pytest.raises(MPIException) as caught:
        INT.Unpack(bytearray(8), 4, np.zeros(2, "i"))
    assert caught.value.Get_error_class() == ERR_TRUNCATE
    with pytest.raises(ReadOnlyBuffer):
        INT.Pack(np.arange(2, dtype="i"), bytes(8), 0)
    with pytest.raises(NotABuffer):
        INT.Pack([1, 2], bytearray(8), 0)


def test_pack_functions_work_on_type_maps_and_byte_views() -> None:
    m = SHORT.Create_vector(2, 1, 2).typemap
    src = memoryview(np.arange(4, dtype="h")).cast("B")
    dst = memoryview(bytearray(pack.pack_size(m, 1)))
    assert pack.pack(m, src, dst, 0, external=True) == 4
    assert bytes(dst) == np.array([0, 2], ">i2").tobytes()
    back = memoryview(bytearray(8))
    assert pack.unpack(m, dst, 0, back, external=True) == 4
    assert np.frombuffer(back, "h").tolist() == [0, 0, 2, 0]
    with pytest.raises(MPIException):
        pack.check_rep("internal")


def test_byte_view_flattens_fortran_order_and_refuses_strided_buffers() -> None:
    f = np.asfortranarray(np.arange(6, dtype="i").reshape(2, 3))
    assert np.frombuffer(byte_view(f, writable=False), "i").tolist() == [0, 3, 1, 4, 2, 5]
    with pytest.raises(NotContiguous):
        byte_view(np.arange(6, dtype="i")[::2], writable=False)
    with pytest.raises(ReadOnlyBuffer):
        byte_view(b"abc", writable=True)
    assert bytes(byte_view(b"abc", writable=False)) == b"abc"
