"""mpi4py's private names that its pure-Python packages import from ``mpi4py.MPI``
(``mpi4py.util.pkl5``, ``mpi4py.util.dtlib``): ``Pickle.dumps_oob``/``loads_oob``,
``_comm_lock``, ``_commctx_intra``, ``_typecode``, ``_typealign``."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from emucluster.mpi.buffer.membuf import buffer
from emucluster.mpi.buffer.serial import Pickle
from emucluster.mpi.comm.commctx import comm_lock, commctx_intra
from emucluster.mpi.datatype.datatype import predefined
from emucluster.mpi.datatype.private import typealign, typecode
from tests.unit.mpisim import MPI, run


def test_dumps_oob_sends_large_buffers_out_of_band_and_loads_them_back() -> None:
    serial = Pickle()
    big, small = np.arange(100_000, dtype=np.float64), np.arange(10, dtype=np.int8)
    data, buffers = serial.dumps_oob({"big": big, "small": small})
    assert [b.nbytes for b in buffers] == [big.nbytes]  # the small array stays in band
    assert all(type(b) is buffer for b in buffers)  # MPI.buffer views, as mpi4py gives
    assert buffers[0].address == big.ctypes.data  # of the object's memory, not a copy
    assert len(data) < 1000
    back = serial.loads_oob(data, [bytearray(b) for b in buffers])
    assert np.array_equal(back["big"], big)
    assert np.array_equal(back["small"], small)


def test_dumps_oob_with_a_lower_threshold_and_a_custom_protocol() -> None:
    serial = Pickle(protocol=pickle.HIGHEST_PROTOCOL)
    serial.THRESHOLD = 8
    data, buffers = serial.dumps_oob(np.arange(4, dtype=np.int32))
    assert [b.nbytes for b in buffers] == [16]
    serial.THRESHOLD = None  # the default again, as mpi4py
    assert serial.THRESHOLD == 262144
    assert serial.loads_oob(data, buffers).tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("name", "code", "align"),
    [("INT", "i", 4), ("DOUBLE", "d", 8), ("LONG_DOUBLE", "g", 16), ("C_DOUBLE_COMPLEX", "D", 8),
     ("DOUBLE_INT", None, 8), ("SHORT_INT", None, 4), ("INT_INT", None, 4)],
)  # fmt: skip
def test_typecode_and_typealign_of_predefined_types(
    name: str, code: str | None, align: int
) -> None:
    assert typecode(predefined[name]) == code
    assert typealign(predefined[name]) == align


def test_a_derived_type_has_no_code_nor_alignment() -> None:
    pair = predefined["INT"].Create_contiguous(2)
    assert typecode(pair) is None
    assert typealign(pair) is None
    pair.Free()


def test_commctx_intra_is_one_cached_duplicate_with_advancing_tags_freed_with_its_comm() -> None:
    def body(comm: Any) -> Any:
        dup, first = commctx_intra(comm)
        again, second = commctx_intra(comm)
        assert again is dup
        assert dup != comm
        assert dup.Get_size() == comm.Get_size()
        # the duplicate's messages never match the communicator's own
        peer = 1 - comm.rank
        comm.send("on comm", dest=peer, tag=first)
        dup.send("on dup", dest=peer, tag=first)
        got = dup.recv(source=peer, tag=first), comm.recv(source=peer, tag=first)
        child = comm.Dup()  # a Dup does not share (nor copy) the context
        child_dup, child_tag = commctx_intra(child)
        assert child_dup is not dup
        child.Free()
        assert child_dup == MPI.COMM_NULL or child_dup._st is None  # freed with its comm
        return first, second, child_tag, got

    results = run(2, body)
    assert results == [(0, 1, 0, ("on dup", "on comm"))] * 2


def test_comm_lock_is_the_lock_table_entry() -> None:
    def body(comm: Any) -> Any:
        lock = comm_lock(comm, "send")
        assert lock is comm_lock(comm, "send")
        assert lock is not comm_lock(comm, "recv")
        assert comm_lock(comm) is comm_lock(comm, None)
        with lock:
            assert lock.locked()
        return True

    assert run(2, body) == [True, True]
