"""emubench's CPU-under-skew jobs (NICVM broadcast, application-bypass reduce) run through
emurun and report every variant's CPU, measured with the public `emucluster.hosttime`."""

from __future__ import annotations

import json
import statistics
from typing import TYPE_CHECKING

import pytest

from tests.integration.mpirun import mpirun

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow


def test_nicvm_skew_job_reports_both_broadcasts(tmp_path: Path) -> None:
    out = tmp_path / "nicvm.json"
    result = mpirun(4, "-m", "emubench.nicvm", "skew", "--sizes", "32", "--skew-us", "300",
                    "--iters", "3", "--warmup", "1", "--out", str(out))  # fmt: skip
    assert result.code == 0, result.err
    ranks = json.loads(out.read_text())["ranks"]
    assert len(ranks) == 4
    for algorithm in ("binomial", "nicvm"):
        samples = [r["32"][algorithm] for r in ranks]
        assert all(len(s["cpu_us"]) == len(s["wall_us"]) == 3 for s in samples)
        assert statistics.fmean(x for s in samples for x in s["cpu_us"]) > 0


def test_reduce_skew_job_reports_each_variant(tmp_path: Path) -> None:
    out = tmp_path / "reduce.json"
    result = mpirun(4, "-m", "emubench.reduce_skew", "--skews", "300", "--elements", "4",
                    "--latency-elements", "1", "--iters", "3", "--warmup", "1",
                    "--out", str(out))  # fmt: skip
    assert result.code == 0, result.err
    report = json.loads(out.read_text())
    [cell] = report["utilisation"]
    for variant in ("nab", "ab", "ireduce"):
        samples = [r[variant] for r in cell["ranks"]]
        assert all(len(s["cpu_us"]) == 3 for s in samples)
        assert statistics.fmean(x for s in samples for x in s["cpu_us"]) > 0
    assert set(report["latency"][0]["last_node_samples"]) == {"nab", "ab", "ireduce"}
    assert sum(r["sends_up"] for r in report["app_bypass"]) > 0
