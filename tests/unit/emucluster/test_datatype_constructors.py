"""Derived-datatype constructors (emucluster.mpi.datatype.constructors and the ``Datatype``
methods over them): sizes, extents, true extents, envelopes, contents and decode of every
combiner, worked out by hand from the MPI standard's type-map rules; no processes."""

from __future__ import annotations

import numpy as np
import pytest

from emucluster.mpi.datatype import constructors
from emucluster.mpi.datatype.constructors import COMBINERS, ORDER_C, ORDER_F, ArgumentError
from emucluster.mpi.datatype.darray import (
    DISTRIBUTE_BLOCK,
    DISTRIBUTE_CYCLIC,
    DISTRIBUTE_DFLT_DARG,
    DISTRIBUTE_NONE,
)
from emucluster.mpi.datatype.datatype import Datatype, predefined
from emucluster.mpi.datatype.typemap import TypeMap
from emucluster.mpi.errors import ERR_ARG, ERR_COUNT, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException

INT, DOUBLE, CHAR, BYTE = (predefined[n] for n in ("INT", "DOUBLE", "CHAR", "BYTE"))
NULL = predefined["DATATYPE_NULL"]


def _shape(t: Datatype) -> tuple[int, int, int, int, int]:
    """(size, lb, extent, true lb, true extent)."""
    return (t.size, *t.Get_extent(), *t.Get_true_extent())


def _picked(t: Datatype, whole: np.ndarray) -> list[int]:
    """The elements one ``t`` picks from ``whole``, in type-map order."""
    data = t.pack_from(memoryview(whole).cast("B"), 0, 1)
    return np.frombuffer(data, whole.dtype).tolist()


def test_predefined_types_are_named_with_their_numpy_sizes() -> None:
    assert _shape(INT) == (4, 0, 4, 0, 4)
    assert _shape(DOUBLE) == (8, 0, 8, 0, 8)
    assert INT.Get_envelope() == (0, 0, 0, 0, COMBINERS["NAMED"])
    assert (INT.is_named, INT.is_predefined) == (True, True)
    assert INT.decode() == (INT, "NAMED", {})
    assert predefined["INT_INT"] is predefined["TWOINT"]
    assert predefined["DOUBLE_INT"].size == 16  # aligned (double, int) as the C struct
    with pytest.raises(MPIException) as caught:
        INT.Get_contents()
    assert caught.value.Get_error_class() == ERR_TYPE


def test_contiguous() -> None:
    t = INT.Create_contiguous(3)
    assert _shape(t) == (12, 0, 12, 0, 12)
    assert t.Get_envelope() == (1, 0, 0, 1, COMBINERS["CONTIGUOUS"])
    assert t.Get_contents() == ([3], [], [], [INT])
    assert t.decode() == (INT, "CONTIGUOUS", {"count": 3})
    assert t.typemap.contiguous
    assert _shape(INT.Create_contiguous(0)) == (0, 0, 0, 0, 0)


def test_contiguous_beyond_int_max_decodes_as_contiguous() -> None:
    """MPI 4.0 large counts: the whole count, combiner CONTIGUOUS (as MPICH 4 and later)."""
    count = 2**31 + 5
    t = BYTE.Create_contiguous(count)
    assert _shape(t) == (count, 0, count, 0, count)
    assert t.Get_contents() == ([count], [], [], [BYTE])
    assert t.decode() == (BYTE, "CONTIGUOUS", {"count": count})


def test_vector_and_hvector() -> None:
    v = INT.Create_vector(3, 2, 4)  # blocks of 2 ints, 4 ints apart
    assert _shape(v) == (24, 0, 40, 0, 40)
    assert v.Get_envelope() == (3, 0, 0, 1, COMBINERS["VECTOR"])
    assert v.Get_contents() == ([3, 2, 4], [], [], [INT])
    assert _picked(v, np.arange(12, dtype="i")) == [0, 1, 4, 5, 8, 9]
    backwards = INT.Create_vector(3, 2, -4)
    assert _shape(backwards) == (24, -32, 40, -32, 40)
    h = DOUBLE.Create_hvector(2, 3, 40)  # 3 doubles, 40 bytes apart
    assert _shape(h) == (48, 0, 64, 0, 64)
    assert h.Get_envelope() == (2, 1, 0, 1, COMBINERS["HVECTOR"])
    assert h.decode() == (DOUBLE, "HVECTOR", {"count": 2, "blocklength": 3, "stride": 40})


def test_indexed_and_hindexed() -> None:
    t = INT.Create_indexed([1, 2, 0, 3], [5, 0, 9, 10])
    assert _shape(t) == (24, 0, 52, 0, 52)  # an empty block does not set a bound
    assert t.Get_envelope() == (9, 0, 0, 1, COMBINERS["INDEXED"])
    assert t.decode()[2] == {"blocklengths": [1, 2, 0, 3], "displacements": [5, 0, 9, 10]}
    assert _picked(t, np.arange(13, dtype="i")) == [5, 0, 1, 10, 11, 12]
    h = INT.Create_hindexed([2, 1], [16, 0])
    assert _shape(h) == (12, 0, 24, 0, 24)
    assert h.Get_contents() == ([2, 2, 1], [16, 0], [], [INT])
    with pytest.raises(ArgumentError):
        INT.Create_indexed([1, 2], [0])


def test_indexed_block_and_hindexed_block() -> None:
    t = DOUBLE.Create_indexed_block(2, [4, 0, 9])
    assert _shape(t) == (48, 0, 88, 0, 88)
    assert t.Get_envelope() == (5, 0, 0, 1, COMBINERS["INDEXED_BLOCK"])
    assert t.decode()[2] == {"blocklength": 2, "displacements": [4, 0, 9]}
    h = DOUBLE.Create_hindexed_block(2, [40, 0])
    assert _shape(h) == (32, 0, 56, 0, 56)
    assert h.Get_envelope() == (2, 2, 0, 1, COMBINERS["HINDEXED_BLOCK"])
    assert h.decode()[2] == {"blocklength": 2, "displacements": [40, 0]}


def test_struct_pads_its_extent_to_the_largest_alignment() -> None:
    s = Datatype.Create_struct([1, 2, 1], [0, 8, 24], [INT, DOUBLE, CHAR])
    assert _shape(s) == (21, 0, 32, 0, 25)  # data end at 25; extent rounded to 8
    assert s.Get_envelope() == (4, 3, 0, 3, COMBINERS["STRUCT"])
    assert s.Get_contents() == ([3, 1, 2, 1], [0, 8, 24], [], [INT, DOUBLE, CHAR])
    old, combiner, kwargs = s.decode()
    assert (old, combiner) == (NULL, "STRUCT")  # several old types: none to name
    assert kwargs == {"blocklengths": [1, 2, 1], "displacements": [0, 8, 24],
                      "datatypes": [INT, DOUBLE, CHAR]}  # fmt: skip
    packed = Datatype.Create_struct([1, 1], [0, 4], [INT, CHAR])
    assert _shape(packed) == (5, 0, 8, 0, 5)
    nested = Datatype.Create_struct([1, 1], [0, 16], [packed, CHAR])
    assert nested.extent == 20  # the int inside the mixed part sets alignment 4
    assert _shape(Datatype.Create_struct([], [], [])) == (0, 0, 0, 0, 0)
    with pytest.raises(ArgumentError):
        Datatype.Create_struct([1, 2], [0, 8], [INT])


def test_subarray_in_c_and_fortran_order() -> None:
    c = INT.Create_subarray([4, 6], [2, 3], [1, 2])
    assert _shape(c) == (24, 0, 96, 32, 36)
    assert c.Get_envelope() == (8, 0, 0, 1, COMBINERS["SUBARRAY"])
    assert _picked(c, np.arange(24, dtype="i")) == [8, 9, 10, 14, 15, 16]
    f = INT.Create_subarray([4, 6], [2, 3], [1, 2], order=ORDER_F)
    assert _picked(f, np.arange(24, dtype="i")) == [9, 10, 13, 14, 17, 18]
    assert f.decode()[2] == {"sizes": [4, 6], "subsizes": [2, 3], "starts": [1, 2],
                             "order": ORDER_F}  # fmt: skip
    with pytest.raises(MPIException) as caught:
        INT.Create_subarray([4, 6], [2, 3], [3, 2])  # runs off the first dimension
    assert caught.value.Get_error_class() == ERR_ARG


def test_darray_block_cyclic_and_none() -> None:
    dflt = DISTRIBUTE_DFLT_DARG
    t = INT.Create_darray(4, 3, [4, 6], [DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC], [dflt, dflt],
                          [2, 2], ORDER_C)  # fmt: skip
    assert _shape(t) == (24, 0, 96, 52, 44)
    assert t.Get_envelope() == (12, 0, 0, 1, COMBINERS["DARRAY"])
    assert _picked(t, np.arange(24, dtype="i")) == [13, 15, 17, 19, 21, 23]
    assert t.decode()[2]["psizes"] == [2, 2]
    whole = INT.Create_darray(2, 1, [3, 4], [DISTRIBUTE_NONE, DISTRIBUTE_BLOCK], [dflt, dflt],
                              [1, 2])  # fmt: skip
    assert _picked(whole, np.arange(12, dtype="i")) == [2, 3, 6, 7, 10, 11]
    with pytest.raises(ArgumentError):
        INT.Create_darray(4, 5, [4, 6], [DISTRIBUTE_BLOCK] * 2, [dflt, dflt], [2, 2])


def test_resized_and_dup() -> None:
    r = INT.Create_resized(-4, 12)
    assert _shape(r) == (4, -4, 12, 0, 4)
    assert (r.lb, r.ub, r.true_lb, r.true_ub) == (-4, 8, 0, 4)
    assert r.Get_contents() == ([], [-4, 12], [], [INT])
    assert r.decode()[1:] == ("RESIZED", {"lb": -4, "extent": 12})
    v = INT.Create_vector(2, 1, 3)
    d = v.Dup()
    assert d != v
    assert _shape(d) == _shape(v)
    assert d.Get_envelope() == (0, 0, 0, 1, COMBINERS["DUP"])
    assert d.decode()[1:] == ("DUP", {})
    assert d.decode()[0] == v  # a new handle of the same type
    assert INT.Create_dup().tocode() == "i"


def test_f90_value_index_and_match_size_pick_predefined_types() -> None:
    i = Datatype.Create_f90_integer(5)
    assert (i.size, i.name, i.is_named, i.is_predefined) == (4, "", False, True)
    assert i.decode()[1:] == ("F90_INTEGER", {"r": 5})
    assert Datatype.Create_f90_real(10, 100).size == 8
    assert Datatype.Create_f90_complex(5, 30).size == 8
    with pytest.raises(MPIException):
        Datatype.Create_f90_real(40, 100)
    assert Datatype.Get_value_index(DOUBLE, INT) is predefined["DOUBLE_INT"]
    assert Datatype.Get_value_index(INT, INT) is predefined["TWOINT"]
    assert Datatype.Get_value_index(INT, DOUBLE) is NULL
    assert Datatype.Get_value_index(CHAR, INT) is NULL
    assert Datatype.Match_size(constructors.TYPECLASS_REAL, 8) is predefined["REAL8"]
    assert Datatype.Match_size(constructors.TYPECLASS_COMPLEX, 32) is predefined["COMPLEX32"]
    with pytest.raises(MPIException):
        Datatype.Match_size(constructors.TYPECLASS_INTEGER, 16)


def test_argument_errors_come_before_the_null_type_error() -> None:
    with pytest.raises(MPIException) as caught:
        NULL.Create_contiguous(-1)
    assert caught.value.Get_error_class() == ERR_COUNT
    for make in (lambda: NULL.Create_contiguous(1), lambda: NULL.Create_resized(0, 4),
                 lambda: Datatype.Create_struct([1], [0], [NULL]), NULL.Dup):  # fmt: skip
        with pytest.raises(MPIException) as caught:
            make()
        assert caught.value.Get_error_class() == ERR_TYPE


def test_constructors_are_plain_functions_of_type_maps() -> None:
    old = INT.typemap
    made = constructors.vector(old, 3, 2, 4)
    assert (made.name, made.combiner, made.ints, made.addrs) == ("vector", "VECTOR", [3, 2, 4], [])
    assert isinstance(made.typemap, TypeMap)
    assert (made.typemap.size, made.typemap.extent) == (24, 40)
    assert constructors.contiguous(old, 4).typemap.contiguous
    s = constructors.struct([1, 1], [0, 8], [old, DOUBLE.typemap], [4, 8])
    assert (s.typemap.size, s.typemap.extent, s.ints, s.addrs) == (12, 16, [2, 1, 1], [0, 8])
    assert constructors.envelope("VECTOR", ([3, 2, 4], [], ["old"])) == (3, 0, 0, 1, 4)
    assert constructors.decode_kwargs("HINDEXED", [2, 2, 1], [16, 0], []) == {
        "blocklengths": [2, 1], "displacements": [16, 0]
    }  # fmt: skip
    assert constructors.f90_type("F90_INTEGER", 5) == ("INTEGER4", [5])
    assert constructors.f90_type("F90_COMPLEX", 10, 100) == ("COMPLEX16", [10, 100])
    assert constructors.value_index("LONG", "INT") == "LONG_INT"
    assert constructors.match_size(constructors.TYPECLASS_INTEGER, 2) == "INTEGER2"
    with pytest.raises(MPIException) as caught:
        constructors.live(None)
    assert caught.value.Get_error_class() == ERR_TYPE
