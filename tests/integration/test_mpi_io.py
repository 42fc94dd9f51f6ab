"""MPI-IO (``MPI.File``) in a real emurun job: what the ranks wrote is in the file, byte for
byte, at the places MPI's views, pointers and orderings put it (issue 31)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow


def _expected(size: int) -> np.ndarray:
    data = np.zeros(256 + 3 * size, dtype=np.int32)
    for r in range(size):
        data[4 * r : 4 * r + 4] = np.arange(4) + 100 * r
        for j in range(4):
            at = 64 + 2 * (j * size + r)
            data[at : at + 2] = [1000 * r + 2 * j, 1000 * r + 2 * j + 1]
        data[256 + 3 * r : 256 + 3 * r + 3] = 7000 + r
    return data


@pytest.mark.parametrize("nodes", [2, 3])
def test_ranks_write_and_read_one_file_through_views_and_pointers(
    tmp_path: Path, nodes: int
) -> None:
    result = mpirun(nodes, PROGRAMS / "io_suite.py", str(tmp_path))
    assert result.code == 0, result.err
    assert result.lines("io ok") == sorted(f"io ok {r}" for r in range(nodes))
    written = np.fromfile(tmp_path / "data.bin", dtype=np.int32)
    assert written.tolist() == _expected(nodes).tolist()
