"""The ``emubench`` command line: help, forwarding, ``report`` from the committed JSON, the load
warning, ``all --quick`` never writing into ``docs/figures``; and `common`'s emurun argv."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from emubench import common
from emubench.__main__ import BENCHMARKS, main
from emubench.report import REPORT_FILE, ROWS, render
from emubench.suite import JOBS, RUNS_FILE
from launcher.cpugauge import Gauge, append_gauge

if TYPE_CHECKING:
    import pytest

ROOT = Path(__file__).resolve().parents[3]
FIGURES = ROOT / "docs" / "figures"


def _emubench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emubench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )


def test_help_lists_every_subcommand() -> None:
    done = _emubench("--help")
    assert done.returncode == 0, done.stderr
    for name in (*BENCHMARKS, "all", "report"):
        assert name in done.stdout


def test_a_subcommand_forwards_to_the_benchmarks_own_parser() -> None:
    done = _emubench("nicvm-vm", "--help")
    assert done.returncode == 0, done.stderr
    assert "--json" in done.stdout


def test_report_from_the_committed_json(tmp_path: Path) -> None:
    for path in FIGURES.glob("*.json"):
        shutil.copy(path, tmp_path / path.name)
    done = _emubench("report", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / REPORT_FILE).read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == len(ROWS) + 1  # the header and one row per figure
    assert "n/a (" not in text  # every extractor understood the committed JSON
    assert "not measured" not in text


def test_the_committed_report_is_current(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/figures/REPORT.md is `emubench report` of the committed JSON (rerun it if not)."""
    monkeypatch.chdir(ROOT)
    assert (FIGURES / REPORT_FILE).read_text() == render(Path("docs/figures"))


def test_a_busy_machine_is_flagged(tmp_path: Path) -> None:
    shutil.copy(FIGURES / "unexpected_queue.json", tmp_path)
    runs = {"cpus": 2, "jobs": {"unexpected-queue": {"command": "emubench unexpected-queue",
                                                     "load_before": [5.0, 4.0, 3.0]}}}  # fmt: skip
    common.write_json(tmp_path / RUNS_FILE, runs)
    row = next(line for line in render(tmp_path).splitlines() if "seed 004" in line)
    assert "5.00 at start" in row
    assert "WARNING: not idle" in row
    runs["jobs"]["unexpected-queue"]["load_before"] = [1.5, 1.0, 1.0]
    common.write_json(tmp_path / RUNS_FILE, runs)
    row = next(line for line in render(tmp_path).splitlines() if "seed 004" in line)
    assert "1.50 at start" in row
    assert "WARNING" not in row


def test_quick_never_writes_the_committed_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["all", "--quick", "--only", "no-such-benchmark"]) == 0
    out = capsys.readouterr().out
    written = Path(out.strip().splitlines()[-1].split("report ")[-1])
    assert written.name == REPORT_FILE
    assert FIGURES.resolve() not in written.resolve().parents
    shutil.rmtree(written.parent)


def test_every_job_is_a_subcommand_and_writes_into_its_directory() -> None:
    for job in JOBS:
        assert job.name in BENCHMARKS
        for quick in (False, True):
            args = job.args(Path("/out"), quick)
            assert any(arg.startswith("/out") for arg in args), (job.name, quick)
            assert not any("docs/figures" in arg for arg in args)


def test_emurun_command_runs_the_module_under_the_launcher() -> None:
    cmd = common.emurun_command(4, "emubench.grim", ["rank", "--iters", "3"],
                                emurun_args=["--nicd-args", "--send-tokens 8"])  # fmt: skip
    assert cmd[:5] == [sys.executable, "-m", "launcher.cli", "-np", "4"]
    assert cmd[5:8] == ["-q", "--timeout", "900"]
    assert cmd[8:10] == ["--nicd-args", "--send-tokens 8"]
    assert cmd[10:] == [sys.executable, "-m", "emubench.grim", "rank", "--iters", "3"]
    loud = common.emurun_command(2, ["./a.out"], quiet=False, timeout_s=None)
    assert loud == [sys.executable, "-m", "launcher.cli", "-np", "2", "./a.out"]


def test_median_and_environment() -> None:
    assert common.median([3.0, 1.0, 2.0]) == 2.0
    assert common.median([]) != common.median([])  # NaN for no samples
    env = common.environment([0.5, 0.4, 0.3], wait_policy="spin", nodes=2)
    assert env["wait_policy"] == "spin"
    assert env["nodes"] == 2
    load = env["load_average"]
    assert isinstance(load, dict)
    assert load["before"] == [0.5, 0.4, 0.3]


def test_environment_carries_the_gauge_of_the_jobs_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "_GAUGE_FILES", [])
    assert "run_delay" not in common.environment()  # no emurun job ran
    path = common._gauge_file()
    try:
        assert common._gauge_file() == path  # one file per process
        append_gauge(path, "j1", Gauge(0.75, 0.0, 0.5, 0))  # what emurun does at exit
        gauge = common.environment()["run_delay"]
        assert isinstance(gauge, dict)
        assert (gauge["jobs"], gauge["oversubscribed_jobs"]) == (1, 1)
    finally:
        os.unlink(path)


def test_relay_tree_floor_runs_every_collective_correctly() -> None:
    """The relay floor of mpi-compare on 1, 3 and 5 nodes (dissemination and tree barriers):
    every rank's bcast, NIC-forwarded bcast and reduce results are checked inside."""
    from emubench import relay_tree

    for nodes in (1, 3, 5):
        record = relay_tree.measure(nodes, 3, nic_priority="none", timeout=120)
        assert set(record["collectives"]) == set(relay_tree.OPS)
        for row in record["collectives"].values():
            assert len(row["ranks"]) == nodes
            assert row["max_us"] >= row["mean_us"] >= 0


def test_every_job_has_its_own_name_in_the_runs_file() -> None:
    idents = [job.ident for job in JOBS]
    assert len(set(idents)) == len(idents)
    assert {"mcast", "mcast-dilated", "nicvm-dilated", "reduce-skew-dilated"} <= set(idents)
