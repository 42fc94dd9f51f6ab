"""``MPI.buffer`` as mpi4py's byte sequence, the null buffer, ``release``, ``Get_address(None)``,
and the buffered-send buffer calls (read-only memory refused, MPI 4.1's flush)."""

from __future__ import annotations

import array

import pytest

from emucluster import MPI


def test_the_null_buffer_has_no_address_and_no_object() -> None:
    buf = MPI.buffer()
    assert (buf.address, buf.obj, buf.nbytes, len(buf), buf.readonly) == (0, None, 0, 0, False)
    buf[:] = 0  # an empty assignment is allowed
    assert memoryview(buf).strides == (1,)  # type: ignore[arg-type]
    bads: tuple[object, ...] = (None, 0, 0.0, [], ())
    for bad in bads:
        with pytest.raises(TypeError):
            MPI.buffer(bad)


def test_allocated_memory_has_an_address_even_when_empty() -> None:
    for size in (0, 1, 2):
        buf = MPI.buffer.allocate(size)
        assert buf.nbytes == size == memoryview(buf.obj).nbytes  # type: ignore[arg-type]
        assert buf.address != 0
    with pytest.raises(ValueError, match="non-negative"):
        MPI.buffer.allocate(-1)


def test_release_leaves_an_empty_buffer_and_keeps_the_memory() -> None:
    obj = array.array("B", [1, 2, 3])
    buf = MPI.buffer.frombuffer(obj, readonly=True)
    assert buf.readonly
    assert buf.address == obj.buffer_info()[0]
    buf.release()
    assert (buf.address, buf.nbytes, buf.readonly, buf.obj) == (0, 0, False, None)
    assert obj.tolist() == [1, 2, 3]


def test_items_are_indexed_as_a_byte_sequence() -> None:
    mem = MPI.Alloc_mem(16)
    with pytest.raises(NotImplementedError):
        del mem[0]
    for key, error in ((16, IndexError), (slice(None, None, 2), IndexError), (None, TypeError)):
        with pytest.raises(error):
            mem[key]
        with pytest.raises(error):
            mem[key] = 0
    mem[1:5] = b"abcd"
    mem[-1] = 9
    assert mem[1:5].tobytes() == b"abcd"
    assert (mem[0], mem[15]) == (0, 9)
    MPI.Free_mem(mem)
    assert (mem.address, mem.nbytes) == (0, 0)


def test_a_read_only_buffer_refuses_writes_with_type_error() -> None:
    buf = MPI.buffer(b"abc")
    assert buf.readonly
    with pytest.raises(TypeError):
        buf[:] = 0
    with pytest.raises(BufferError):
        MPI.Attach_buffer(buf)


def test_flush_buffer_keeps_the_buffer_attached() -> None:
    buf = MPI.Alloc_mem(1024 + MPI.BSEND_OVERHEAD)
    MPI.Attach_buffer(buf)
    try:
        MPI.COMM_SELF.Bsend([b"x" * 16, MPI.BYTE], 0, 7)
        MPI.Flush_buffer()
        MPI.Iflush_buffer().Wait()
        got = bytearray(16)
        MPI.COMM_SELF.Recv([got, MPI.BYTE], 0, 7)
        assert bytes(got) == b"x" * 16
    finally:
        assert MPI.Detach_buffer() is buf
        MPI.Free_mem(buf)


def test_get_address_of_none_is_null() -> None:
    assert MPI.Get_address(None) == 0
