"""The fast parse of ``[buf, datatype]`` message specs agrees with the general parser."""

from __future__ import annotations

import array

import numpy as np
import pytest

from emucluster import MPI
from emucluster.mpi.buffer import spec as buffers
from emucluster.mpi.buffer.spec import _message, _plain_pair, message


def _specs() -> list[tuple[str, list[object]]]:
    contig = MPI.DOUBLE.Create_contiguous(2)
    contig.Commit()
    return [
        ("uint8 BYTE", [np.arange(8, dtype=np.uint8), MPI.BYTE]),
        ("float64 DOUBLE", [np.arange(4, dtype=np.float64), MPI.DOUBLE]),
        ("2-D int32 INT", [np.arange(12, dtype=np.int32).reshape(3, 4), MPI.INT]),
        ("bytes BYTE", [b"abcdefgh", MPI.BYTE]),
        ("bytearray INT", [bytearray(16), MPI.INT]),
        ("memoryview DOUBLE", [memoryview(bytearray(24)), MPI.DOUBLE]),
        ("empty", [np.zeros(0, dtype=np.uint8), MPI.BYTE]),
        ("uint8 as DOUBLE", [np.zeros(16, dtype=np.uint8), MPI.DOUBLE]),
        ("contiguous derived", [np.zeros(8), contig]),
        ("tuple spec", (np.zeros(3, dtype=np.int64), MPI.INT64_T)),  # type: ignore[list-item]
    ]


@pytest.mark.parametrize(("name", "spec"), _specs(), ids=[n for n, _ in _specs()])
@pytest.mark.parametrize("writable", [False, True])
def test_fast_parse_equals_general_parse(name: str, spec: list[object], writable: bool) -> None:
    fast = _plain_pair(spec, writable)
    if writable and isinstance(spec[0], bytes):
        assert fast is None  # read-only: the general path raises
        return
    assert fast is not None, name
    slow = _message(list(spec), writable)
    assert bytes(fast.view) == bytes(slow.view)
    assert fast.view.format == slow.view.format == "B"
    assert fast.datatype is slow.datatype
    assert fast.elements == slow.elements
    assert fast.obj is slow.obj
    assert fast.view.readonly == slow.view.readonly
    if writable:  # the view writes through to the program's buffer
        fast.view[: len(fast.view)] = b"\x07" * len(fast.view)
        assert bytes(memoryview(spec[0]).cast("B")) == b"\x07" * len(fast.view)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "spec",
    [
        [np.zeros(8, dtype=np.uint8)[::2], MPI.BYTE],  # not contiguous
        [np.zeros(7, dtype=np.uint8), MPI.INT],  # not whole elements
        [np.zeros(4, dtype=np.uint8), MPI.DATATYPE_NULL],
        [np.zeros((2, 2), order="F"), MPI.DOUBLE],  # Fortran order: the general path
        [array.array("i", [1, 2]), MPI.INT],  # not one of the plain types
        [np.zeros(4, dtype=np.uint8), 4, MPI.BYTE],
        [np.zeros(4, dtype=np.uint8), "b"],
        [np.zeros(2, dtype=[("a", "i4"), ("b", "f8")]), MPI.BYTE],  # structured format
    ],
)
def test_fast_parse_leaves_everything_else_to_the_general_path(spec: list[object]) -> None:
    assert _plain_pair(spec, False) is None


def test_errors_are_the_general_paths() -> None:
    with pytest.raises(buffers.ReadOnlyBuffer):
        message([b"abcd", MPI.BYTE], writable=True)
    with pytest.raises(buffers.MessageSpecError):
        message([np.zeros(7, dtype=np.uint8), MPI.INT], writable=False)
    freed = MPI.INT.Create_contiguous(2)
    freed.Commit()
    freed.Free()
    with pytest.raises(MPI.Exception):
        message([np.zeros(8, dtype=np.uint8), freed], writable=False)


def test_a_derived_non_contiguous_type_is_still_packed() -> None:
    vector = MPI.INT.Create_vector(2, 1, 2)
    vector.Commit()
    data = np.arange(3, dtype=np.int32)  # one element: ints 0 and 2
    msg = message([data, vector], writable=False)
    assert np.frombuffer(msg.view, dtype=np.int32).tolist() == [0, 2]
