"""emubench rma's tables and figure from a record of the shape emubench.rma_rank writes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from emubench import rma

if TYPE_CHECKING:
    from pathlib import Path


def _run(scale: float) -> dict[str, Any]:
    overlap = {
        "target_alone_wall_s": 1.0, "target_alone_cpu_s": 1.0,
        "target_with_epochs_wall_s": 1.1, "target_with_epochs_cpu_s": 1.0,
        "epoch_us_target_computing": 50 * scale, "epoch_max_us_target_computing": 90 * scale,
        "epoch_us_target_in_mpi": 40.0, "epoch_max_us_target_in_mpi": 60.0,
        "epochs": 10, "epochs_done_while_target_computed": 10,
    }  # fmt: skip
    lat = {"put_us": {"8": 20.0 * scale, "4096": 30.0}, "get_us": {"8": 25.0, "4096": 35.0}}
    return {"latency": lat, "overlap": overlap}


def test_tables_and_figure_name_every_implementation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    record = {
        "parameters": {"sizes": [8, 4096]},
        "runs": {"emucluster nic": _run(1), "emucluster host": _run(1e4), "mpich": _run(0.1)},
    }
    rma.print_tables(record)
    out = capsys.readouterr().out
    assert all(name in out for name in record["runs"])
    assert "epochs_done_while_target_computed" in out
    png = tmp_path / "rma.png"
    rma.plot(record, str(png))
    assert png.stat().st_size > 1000
    json.dumps(record)  # the record stays JSON-able
