"""The point-to-point fast path for plain buffers (``emucluster.mpi.buffer.spec.plain_view``)
gives the bytes the general message parser gives, or leaves the spec to it; and the
``Send``/``Recv``/``Isend``/``Wait`` and ``send``/``recv`` calls that use it deliver what the
general path delivers, errors included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from emucluster.mpi.buffer import spec as buffers
from emucluster.mpi.buffer.spec import message, plain_view
from emucluster.mpi.datatype import formats
from tests.unit.mpisim import MPI, run

_DTYPES = ["u1", "i1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8", "c8", "c16", "?",
           "f2", ">f8", "<i4", "g", "S3", "i4,f8"]  # fmt: skip


def _arrays() -> st.SearchStrategy[np.ndarray[Any, Any]]:
    shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
    base = st.sampled_from(_DTYPES).flatmap(lambda dt: hnp.arrays(np.dtype(dt), shapes))

    def layout(array: np.ndarray[Any, Any], how: int) -> np.ndarray[Any, Any]:
        if how == 1 and array.ndim:
            return array[::2]  # strided: not contiguous
        if how == 2:
            return np.asfortranarray(array)
        if how == 3:
            array.flags.writeable = False
        return array

    return st.builds(layout, base, st.integers(0, 3))


def _buffers() -> st.SearchStrategy[object]:
    raw = st.binary(max_size=24)
    return st.one_of(
        _arrays(),
        raw,
        raw.map(bytearray),
        raw.map(lambda b: memoryview(bytearray(b))),
        raw.map(lambda b: memoryview(b)[::2]),
        _arrays().map(memoryview),
    )


def _general(spec: object, writable: bool) -> memoryview | BaseException:
    try:
        return message(spec, writable=writable, staged=True).view
    except Exception as exc:
        return exc


@settings(max_examples=200, deadline=None)
@given(buf=_buffers(), writable=st.booleans(), as_pair=st.sampled_from([None, "BYTE", "INT"]))
def test_the_fast_path_gives_the_general_paths_bytes_or_leaves_the_spec_to_it(
    buf: object, writable: bool, as_pair: str | None
) -> None:
    spec: object = buf if as_pair is None else [buf, getattr(MPI, as_pair)]
    fast = plain_view(spec, writable)
    if fast is None:
        return  # the general path parses it (or raises its error): nothing was decided here
    slow = _general(spec, writable)
    assert isinstance(slow, memoryview), f"the general path refused it: {slow!r}"
    assert fast.format == "B"
    assert fast.ndim == 1
    assert bytes(fast) == bytes(slow)
    assert fast.readonly == slow.readonly
    if writable and len(fast):  # both write into the program's buffer, not into copies
        fast[0] = (fast[0] + 1) % 256
        assert slow[0] == fast[0]


@pytest.mark.parametrize(
    "buf",
    [
        bytearray(8),
        b"12345678",
        np.zeros(3),
        np.zeros((2, 3), dtype=np.int32),
        np.zeros(4, dtype=np.complex128),
        memoryview(bytearray(5)),
    ],
)
def test_the_common_buffers_take_the_fast_path(buf: object) -> None:
    assert plain_view(buf, False) is not None
    assert plain_view([buf, MPI.BYTE], False) is not None


def test_the_fast_formats_are_formats_of_predefined_datatypes() -> None:
    """A format the fast path accepts is one the general path infers a datatype for."""
    assert buffers._NATIVE_FORMATS.issubset(formats._BY_FORMAT)


@pytest.mark.parametrize(
    "spec",
    [
        b"read-only",
        np.zeros(4)[::2],
        np.zeros(2, dtype=">f8"),
        np.zeros(2, dtype="f2"),
        [bytearray(7), MPI.INT],
        [np.zeros(4), MPI.DOUBLE.Create_vector(2, 1, 2)],
    ],
)
def test_receive_buffers_the_fast_path_must_not_take(spec: object) -> None:
    assert plain_view(spec, True) is None


def test_blocking_calls_on_the_fast_path_deliver_status_and_errors() -> None:
    """Send/Recv of plain buffers (fast) and of a derived type (general) side by side;
    status filled; a short buffer is ERR_TRUNCATE; the lowercase calls too."""

    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.Send(np.arange(4, dtype="f8"), 1, 1)
            comm.Send([np.arange(4, dtype="i4"), MPI.INT], 1, 2)
            comm.Send(b"too long for it", 1, 3)
            comm.Isend(bytearray(b"abc"), 1, 4).Wait()
            comm.send({"k": [1, 2]}, 1, 5)
            comm.send(None, 1, 6)
            vector = MPI.INT.Create_vector(2, 1, 2).Commit()
            comm.Send([np.arange(4, dtype="i4"), 1, vector], 1, 7)
            return None
        status = MPI.Status()
        floats = np.zeros(4)
        comm.Recv(floats, 0, 1, status)
        got = [floats.tolist(), status.Get_source(), status.Get_tag(), status.Get_count(MPI.DOUBLE)]
        ints = np.zeros(4, dtype="i4")
        comm.Recv([ints, MPI.INT], MPI.ANY_SOURCE, MPI.ANY_TAG, status)
        got += [ints.tolist(), status.Get_tag()]
        with pytest.raises(MPI.Exception) as truncated:
            comm.Recv(bytearray(4), 0, 3, status)
        got += [truncated.value.Get_error_class() == MPI.ERR_TRUNCATE]
        small = bytearray(3)
        comm.Irecv(small, 0, 4).Wait(status)
        got += [bytes(small), status.Get_count()]
        got += [comm.recv(source=0, tag=5, status=status), status.Get_tag()]
        got += [comm.recv(source=0, tag=6)]
        pair = np.zeros(2, dtype="i4")
        comm.Recv([pair, MPI.INT], 0, 7)
        got += [pair.tolist()]
        return got

    got = run(2, body)[1]
    assert got == [
        [0.0, 1.0, 2.0, 3.0], 0, 1, 4,
        [0, 1, 2, 3], 2,
        True,
        b"abc", 3,
        {"k": [1, 2]}, 5,
        None,
        [0, 2],
    ]  # fmt: skip


def test_a_wait_on_a_send_done_at_once_makes_the_request_null_and_fills_the_status() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            status = MPI.Status()
            status.Set_source(5)
            request = comm.Isend(np.zeros(2), 1, 1)
            assert request.Wait(status) is True
            assert request == MPI.REQUEST_NULL
            assert status.Get_source() == MPI.ANY_SOURCE
            assert status.Get_count() == 0
            assert request.Wait() is True  # a null request waits at once
            return status.Get_tag() == MPI.ANY_TAG
        out = np.ones(2)
        comm.Recv(out, 0, 1)
        return out.tolist()

    assert run(2, body) == [True, [0.0, 0.0]]
