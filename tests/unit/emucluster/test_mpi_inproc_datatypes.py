"""Derived datatypes through ``Send``/``Recv`` and the collectives on an in-process job
(tests/unit/mpisim.py): what lands where, with the counts a Status reports."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.unit.mpisim import MPI, run


def _pair(body: Any, **options: Any) -> Any:
    """Run ``body`` on two ranks; rank 1's result."""
    return run(2, body, **options)[1]


@pytest.mark.parametrize("eager_limit", [16_287, 64])
def test_vector_send_contiguous_receive(eager_limit: int) -> None:
    """A column of a 4x5 int32 matrix goes as a vector and arrives packed."""

    def body(comm: Any) -> Any:
        column = MPI.INT.Create_vector(4, 1, 5).Commit()
        if comm.rank == 0:
            matrix = np.arange(20, dtype=np.int32).reshape(4, 5)
            comm.Send([matrix.reshape(-1)[1:], 1, column], dest=1)  # the column at 1
            column.Free()
            return None
        out = np.zeros(4, dtype=np.int32)
        status = MPI.Status()
        comm.Recv([out, 4, MPI.INT], source=0, status=status)
        column.Free()
        return out.tolist(), status.Get_count(MPI.INT), status.Get_count(MPI.BYTE)

    assert _pair(body, eager_limit=eager_limit) == ([1, 6, 11, 16], 4, 16)


def test_contiguous_send_vector_receive_scatters_into_place() -> None:
    def body(comm: Any) -> Any:
        every_other = MPI.DOUBLE.Create_vector(3, 2, 4).Commit()
        if comm.rank == 0:
            comm.Send(np.array([1.0, 2, 3, 4, 5, 6]), dest=1)
            every_other.Free()
            return None
        out = np.zeros(12)
        status = MPI.Status()
        comm.Recv([out, 1, every_other], source=0, status=status)
        counts = status.Get_count(every_other), status.Get_elements(MPI.DOUBLE)
        every_other.Free()
        return out.tolist(), counts

    out, counts = _pair(body)
    assert out == [1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0, 0]
    assert counts == (1, 6)


def test_indexed_and_indexed_block_on_both_sides() -> None:
    def body(comm: Any) -> Any:
        send_t = MPI.INT64_T.Create_indexed([2, 1, 3], [0, 4, 7]).Commit()
        recv_t = MPI.INT64_T.Create_indexed_block(2, [1, 5, 9]).Commit()
        if comm.rank == 0:
            comm.Send([np.arange(10, dtype=np.int64) * 11, 1, send_t], dest=1, tag=3)
            out = None
        else:
            buf = np.full(12, -1, dtype=np.int64)
            comm.Recv([buf, 1, recv_t], source=0, tag=3)
            out = buf.tolist()
        send_t.Free()
        recv_t.Free()
        return out

    # sent elements 0,1 | 4 | 7,8,9 (times 11) land in blocks at 1-2, 5-6, 9-10
    assert _pair(body) == [-1, 0, 11, -1, -1, 44, 77, -1, -1, 88, 99, -1]


def test_struct_of_mixed_fields_matches_a_numpy_record() -> None:
    record = np.dtype([("id", np.int32), ("x", np.float64), ("tag", "S4")], align=True)

    def body(comm: Any) -> Any:
        fields = [MPI.INT32_T, MPI.DOUBLE, MPI.CHAR]
        offsets = [record.fields[name][1] for name in ("id", "x", "tag")]
        struct = MPI.Datatype.Create_struct([1, 1, 4], offsets, fields)
        rec_t = struct.Create_resized(0, record.itemsize).Commit()
        struct.Free()
        if comm.rank == 0:
            data = np.array([(1, 0.5, b"abcd"), (2, -1.25, b"wxyz"), (3, 8.0, b"qq")],
                            dtype=record)  # fmt: skip
            comm.Send([data, 3, rec_t], dest=1)
            rec_t.Free()
            return None
        out = np.zeros(3, dtype=record)
        status = MPI.Status()
        comm.Recv([out, 3, rec_t], source=0, status=status)
        got = [(int(a), float(b), bytes(c)) for a, b, c in out.tolist()]
        count = status.Get_count(rec_t)
        rec_t.Free()
        return got, count, rec_t == MPI.DATATYPE_NULL

    got, count, freed = _pair(body)
    assert got == [(1, 0.5, b"abcd"), (2, -1.25, b"wxyz"), (3, 8.0, b"qq")]
    assert count == 3
    assert freed


def test_subarray_block_of_a_matrix() -> None:
    def body(comm: Any) -> Any:
        block = MPI.INT.Create_subarray([6, 6], [2, 3], [1, 2]).Commit()
        if comm.rank == 0:
            comm.Send([np.arange(36, dtype=np.int32).reshape(6, 6), 1, block], dest=1)
            block.Free()
            return None
        out = np.zeros((6, 6), dtype=np.int32)
        comm.Recv([out, 1, block], source=0)
        block.Free()
        return out[1:3, 2:5].tolist(), int(out.sum() - out[1:3, 2:5].sum())

    assert _pair(body) == ([[8, 9, 10], [14, 15, 16]], 0)


def test_hvector_and_hindexed_with_byte_strides() -> None:
    def body(comm: Any) -> Any:
        hvec = MPI.SHORT.Create_hvector(3, 2, 10).Commit()  # 2 shorts every 10 bytes
        hidx = MPI.SHORT.Create_hindexed([2, 4], [0, 8]).Commit()
        if comm.rank == 0:
            comm.Send([np.arange(15, dtype=np.int16), 1, hvec], dest=1)
            out = None
        else:
            buf = np.full(8, -1, dtype=np.int16)
            comm.Recv([buf, 1, hidx], source=0)
            out = buf.tolist()
        hvec.Free()
        hidx.Free()
        return out

    # hvec picks shorts 0,1 | 5,6 | 10,11; hidx places 2 at shorts 0-1 and 4 at shorts 4-7
    assert _pair(body) == [0, 1, -1, -1, 5, 6, 10, 11]


def test_a_large_derived_send_goes_by_rendezvous() -> None:
    def body(comm: Any) -> Any:
        strided = MPI.DOUBLE.Create_vector(5000, 1, 2).Commit()
        if comm.rank == 0:
            comm.Send([np.arange(10_000, dtype=np.float64), 1, strided], dest=1)
            strided.Free()
            return comm.Get_queue_stats()["protocol"]["rts_sent"]
        out = np.zeros(5000)
        comm.Recv(out, source=0)
        strided.Free()
        return bool(np.array_equal(out, np.arange(0, 10_000, 2, dtype=np.float64)))

    assert run(2, body, eager_limit=1024) == [1, True]


def test_a_message_shorter_than_the_type_counts_basic_elements() -> None:
    def body(comm: Any) -> Any:
        pairs = MPI.INT.Create_contiguous(2).Commit()
        if comm.rank == 0:
            comm.Send(np.arange(5, dtype=np.int32), dest=1)
            pairs.Free()
            return None
        out = np.zeros(8, dtype=np.int32)
        status = MPI.Status()
        comm.Recv([out, 4, pairs], source=0, status=status)
        result = status.Get_count(pairs), status.Get_elements(pairs), out.tolist()
        pairs.Free()
        return result

    assert _pair(body) == (MPI.UNDEFINED, 5, [0, 1, 2, 3, 4, 0, 0, 0])


def test_a_derived_type_longer_than_the_buffer_raises_err_truncate() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.Send(np.arange(7, dtype=np.int32), dest=1)
            return None
        spread = MPI.INT.Create_vector(2, 1, 3).Commit()
        out = np.zeros(8, dtype=np.int32)
        try:
            comm.Recv([out, 1, spread], source=0)
            return None
        except MPI.Exception as exc:
            return exc.Get_error_class()
        finally:
            spread.Free()

    assert _pair(body) == MPI.ERR_TRUNCATE


def test_packed_bytes_unpack_on_the_other_side() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            buf = bytearray(64)
            pos = MPI.INT.Pack(np.array([7, 8, 9], dtype=np.int32), buf, 0, comm)
            pos = MPI.DOUBLE.Pack(np.array([2.5]), buf, pos, comm)
            comm.Send([buf, pos, MPI.PACKED], dest=1)
            return pos
        status = MPI.Status()
        comm.Probe(source=0, status=status)
        buf = bytearray(status.Get_count(MPI.PACKED))
        comm.Recv([buf, MPI.PACKED], source=0)
        ints = np.zeros(3, dtype=np.int32)
        dbl = np.zeros(1)
        pos = MPI.INT.Unpack(buf, 0, ints, comm)
        MPI.DOUBLE.Unpack(buf, pos, dbl, comm)
        return ints.tolist(), float(dbl[0])

    assert run(2, body) == [20, ([7, 8, 9], 2.5)]


@pytest.mark.parametrize("n", [2, 3, 5])
def test_a_derived_type_in_gather_and_bcast(n: int) -> None:
    """Every rank contributes the diagonal of its 3x3 matrix; the root gathers them packed."""

    def body(comm: Any) -> Any:
        diagonal = MPI.INT64_T.Create_vector(3, 1, 4).Commit()
        r, root = comm.rank, n - 1
        mine = np.arange(9, dtype=np.int64).reshape(3, 3) + 100 * r
        out = np.zeros(3 * n, dtype=np.int64) if r == root else None
        comm.Gather([mine, 1, diagonal], [out, 3, MPI.INT64_T] if r == root else None, root=root)
        shared = np.arange(9, dtype=np.int64) if r == root else np.zeros(9, dtype=np.int64)
        comm.Bcast([shared, 1, diagonal], root=root)
        diagonal.Free()
        return (None if out is None else out.tolist()), shared.tolist()

    results = run(n, body)
    diag = [0, 4, 8]
    assert results[n - 1][0] == [d + 100 * r for r in range(n) for d in diag]
    for r in range(n):
        assert results[r][1] == [0, 0, 0, 0, 4, 0, 0, 0, 8] if r != n - 1 else list(range(9))
