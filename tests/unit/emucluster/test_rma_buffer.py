"""``memoryview(win)`` without a job: Python 3.12 asks ``Win.__buffer__`` (PEP 688), which
raises ERR_WIN for WIN_NULL as mpi4py's ``Win`` does; Python 3.11 cannot ask a class for a
buffer, so there it is a TypeError. The live windows are tested through emurun
(tests/integration/mpi_programs/rma_buffer.py)."""

from __future__ import annotations

import sys

import pytest

from emucluster.mpi.errors import ERR_WIN
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.rma.window import WIN_NULL, Win


@pytest.mark.skipif(sys.version_info < (3, 12), reason="a Python class exports a buffer from 3.12")
def test_a_null_window_has_no_memory_to_view() -> None:
    for win in (WIN_NULL, Win()):
        with pytest.raises(MPIException) as raised:
            memoryview(win)
        assert raised.value.Get_error_class() == ERR_WIN


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.11's behaviour")
def test_python_311_cannot_view_a_window() -> None:
    with pytest.raises(TypeError):
        memoryview(WIN_NULL)
