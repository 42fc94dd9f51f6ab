"""The host side of one-sided communication without a NIC: target runs of datatypes, the
separate model's merge of private and public copies, target specs and op mapping."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from emucluster import MPI
from emucluster.mpi.rma.state import CTRL, LocalMemory
from emucluster.mpi.rma.transfer import _datatype_runs, _op_code, _parse_target
from nicd.contract import AtomicOp


def test_a_strided_target_is_cut_into_its_runs_and_adjacent_runs_merge() -> None:
    vector = MPI.INT.Create_vector(3, 2, 4).Commit()
    assert _datatype_runs(vector, 1, 8) == [(8, 8), (24, 8), (40, 8)]
    assert _datatype_runs(MPI.INT, 5, 4) == [(4, 20)]
    assert _datatype_runs(MPI.INT, 0, 4) == []
    dense = MPI.INT.Create_vector(2, 1, 1).Commit()  # contiguous in disguise
    assert _datatype_runs(dense, 3, 0) == [(0, 24)]
    vector.Free()
    dense.Free()


def test_target_specs_follow_mpi4py() -> None:
    msg = SimpleNamespace(elements=4, datatype=MPI.DOUBLE)
    assert _parse_target(None, msg) == (0, 4, MPI.DOUBLE)  # type: ignore[arg-type]
    assert _parse_target(3, msg) == (3, 4, MPI.DOUBLE)  # type: ignore[arg-type]
    assert _parse_target([2, 1, MPI.INT], msg) == (2, 1, MPI.INT)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="target"):
        _parse_target([1, 2, 3, 4], msg)  # type: ignore[arg-type]


def test_predefined_ops_map_to_nic_atomics_and_others_are_refused() -> None:
    assert _op_code(MPI.SUM) is AtomicOp.SUM
    assert _op_code(MPI.NO_OP) is AtomicOp.NO_OP
    assert _op_code(None) is AtomicOp.SUM
    with pytest.raises(MPI.Exception):
        _op_code(MPI.MAXLOC)


def test_separate_model_keeps_local_stores_and_remote_updates_both() -> None:
    block = SimpleNamespace(buf=memoryview(bytearray(CTRL + 8)))
    private = bytearray(b"abcdefgh")
    mem = LocalMemory(block, 8, memoryview(private))  # type: ignore[arg-type]
    assert bytes(mem.public) == b"abcdefgh"
    private[0:2] = b"XY"  # the program stores locally
    block.buf[CTRL + 6 : CTRL + 8] = b"RM"  # the NIC writes the public copy
    mem.sync()
    assert bytes(private) == b"XYcdefRM"
    assert bytes(mem.public) == b"XYcdefRM"
    assert bytes(mem.view) == b"XYcdefRM"


def test_allocate_memory_is_the_block_itself() -> None:
    block = SimpleNamespace(buf=memoryview(bytearray(CTRL + 4)))
    mem = LocalMemory(block, 4, None)  # type: ignore[arg-type]
    mem.view[:] = b"1234"
    mem.sync()
    assert bytes(block.buf[CTRL:]) == b"1234"
    assert np.frombuffer(mem.view, np.uint8).size == 4
