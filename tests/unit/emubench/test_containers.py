"""``emubench containers``: the summary of a run, its figure, and its command-line checks
(the runs themselves need Docker: tests/integration/test_compose.py covers the cluster)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from emubench import containers

if TYPE_CHECKING:
    from pathlib import Path


def _run(pingpong_us: float, bcast_us: float) -> dict[str, Any]:
    return {
        "pingpong": {"sizes": [8], "uppercase_us": [pingpong_us], "lowercase_us": [1.0]},
        "collectives": {"bcast": {"mean_us": bcast_us, "max_us": bcast_us, "ranks": []}},
    }


def test_summary_puts_both_sides_and_their_ratio() -> None:
    summary = containers.summarise({"local": _run(200, 400), "containers": _run(300, 1000)})
    assert summary["pingpong_8B_one_way_us"] == {"local": 200, "containers": 300, "ratio": 1.5}
    assert summary["bcast_8B_mean_us"] == {"local": 400, "containers": 1000, "ratio": 2.5}


def test_figure_is_drawn(tmp_path: Path) -> None:
    runs = {"local": _run(200, 400), "containers": _run(300, 1000)}
    record = {
        "parameters": {"nodes": 8},
        "environment": {"cpus": 2},
        "summary": containers.summarise(runs),
    }
    containers.plot(record, str(tmp_path / "containers.png"))
    assert (tmp_path / "containers.png").stat().st_size > 1000


def test_a_directory_without_the_compose_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        containers.main(["--quick", "--project-dir", str(tmp_path)])
    assert exc.value.code == 2
