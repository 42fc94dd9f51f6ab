"""``memoryview(win)`` without a job: ``Win.__buffer__`` (PEP 688, called by Python 3.12, and
by Python 3.11 through the C base of emucluster.pep688 where it is built) raises ERR_WIN for
WIN_NULL as mpi4py's ``Win`` does; Python 3.11 without that extension (a pure-Python install)
cannot ask a class for a buffer, so there it is a TypeError. The live windows are tested
through emurun (tests/integration/mpi_programs/rma_buffer.py)."""

from __future__ import annotations

import pytest

from emucluster.mpi.errors import ERR_WIN
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.rma.window import WIN_NULL, Win
from emucluster.pep688 import EXPORTS


@pytest.mark.skipif(not EXPORTS, reason="Python 3.11 without the C extension exports no buffer")
def test_a_null_window_has_no_memory_to_view() -> None:
    for win in (WIN_NULL, Win()):
        with pytest.raises(MPIException) as raised:
            memoryview(win)
        assert raised.value.Get_error_class() == ERR_WIN


@pytest.mark.skipif(EXPORTS, reason="a pure-Python install on Python 3.11's behaviour")
def test_python_311_without_the_extension_cannot_view_a_window() -> None:
    with pytest.raises(TypeError):
        memoryview(WIN_NULL)
