"""``emubench mpi-datatypes --quick`` runs real emurun jobs and writes a coherent record."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from emubench.common import read_json
from emubench.mpi_dtype import main

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow


def test_quick_run_writes_the_record_and_the_figure(tmp_path: Path) -> None:
    record_path, png = tmp_path / "dt.json", tmp_path / "dt.png"
    argv = ["--quick", "--nodes", "2", "--json", str(record_path), "--timeout", "600"]
    assert main([*argv, "--png", str(png)]) == 0
    record = read_json(record_path)
    ours = record["runs"]["emucluster"]
    assert ours["nodes"] == 2
    a2a, pair = ours["alltoallv"], ours["vector_pingpong"]
    assert len(a2a["mean_us"]) == len(a2a["sizes"]) > 0
    for mean, slowest in zip(a2a["mean_us"], a2a["max_us"], strict=True):
        assert 0 < mean <= slowest
    assert len(pair["vector_us"]) == len(pair["contiguous_us"]) == len(pair["sizes"])
    assert len(record["summary"]["vector_over_contiguous"]) == len(pair["sizes"])
    assert "mpich" not in record["runs"]  # no --mpi-python: no reference, and the figure says so
    assert png.stat().st_size > 0
