"""The fidelity gauge end to end (launcher/cpugauge.py): real processes, with and without the
fork server, their run delay read before they are reaped; no test asserts a measured value,
only presence, sanity, and the warning of a job that certainly waited (more busy ranks than
CPUs: a behaviour, not a timing)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from launcher.cpugauge import ENV_GAUGE_OUT, WARN_SHARE, parse_schedstat
from tests.integration.test_emurun import Job

if TYPE_CHECKING:
    from collections.abc import Iterator

WARNING = "emurun: warning: the ranks waited for a CPU"


def _busy(seconds: float) -> list[str]:
    """A rank that keeps a CPU busy for ``seconds`` of wall time."""
    code = f"import time\nt = time.monotonic() + {seconds}\nwhile time.monotonic() < t: pass\n"
    return [sys.executable, "-c", code]


def _counts_kept() -> bool:
    own = Path(f"/proc/{os.getpid()}/schedstat")
    return own.exists() and parse_schedstat(own.read_text()) is not None


pytestmark = pytest.mark.skipif(not _counts_kept(), reason="the kernel keeps no schedstat counts")


@pytest.fixture(params=["fork", "spawn"])
def job(request: pytest.FixtureRequest) -> Iterator[Job]:
    j = Job()
    j.env["EMU_FORKSERVER"] = "1" if request.param == "fork" else "0"
    yield j
    j.teardown()


def _one_cpu() -> set[int]:
    return {min(os.sched_getaffinity(0))}


def _usage(stats: Path) -> dict[str, object]:
    doc = json.loads((stats / "job.json").read_text())
    usage = doc["usage"]
    assert isinstance(usage, dict)
    return usage


def test_every_rank_and_nicd_has_a_run_delay(job: Job, tmp_path: Path) -> None:
    stats = tmp_path / "stats"
    r = job.run("-np", "2", "--cpu-report", "--stats", str(stats), *_busy(0.3))
    assert r.code == 0, r.err
    assert "wait %" in r.err  # the table's column
    assert "run delay unknown" not in r.err
    usage = _usage(stats)
    processes = usage["processes"]
    assert isinstance(processes, list)
    roles = sorted((p["role"], p["node"]) for p in processes)
    assert roles == [("host", 0), ("host", 1), ("nicd", 0), ("nicd", 1)]
    for p in processes:
        assert p["run_delay_s"] is not None, p
        assert p["run_delay_s"] >= 0
        assert 0 <= p["run_delay_share"] <= 1, p  # one thread read: it waited within its life
        if p["role"] == "nicd":
            assert 0 <= p["nicd_cpu_share"] <= 1
    gauge = usage["gauge"]
    assert isinstance(gauge, dict)
    assert 0 <= gauge["rank_run_delay_share"] <= 1
    assert 0 <= gauge["nicd_cpu_share"] <= 1
    assert gauge["run_delay_unknown"] == 0
    assert gauge["oversubscribed"] is (gauge["rank_run_delay_share"] > WARN_SHARE)
    assert r.err.count(WARNING) == (1 if gauge["oversubscribed"] else 0)
    job.assert_clean()


def test_busy_ranks_sharing_one_cpu_are_warned_about_once(job: Job, tmp_path: Path) -> None:
    # four ranks busy 3 s on one CPU get a quarter of it each: each waits ~75 % of its time,
    # three times the threshold, whatever else the machine runs (more load: more waiting)
    stats = tmp_path / "stats"
    r = job.run("-np", "4", "--stats", str(stats), *_busy(3.0), cpus=_one_cpu())
    assert r.code == 0, r.err
    assert r.err.count(WARNING) == 1, r.err
    assert "wait %" not in r.err  # no --cpu-report: the warning alone
    gauge = _usage(stats)["gauge"]
    assert isinstance(gauge, dict)
    assert gauge["oversubscribed"] is True
    assert gauge["rank_run_delay_share"] > 0.5
    job.assert_clean()


def test_quiet_keeps_the_warning_in_the_statistics_only(tmp_path: Path) -> None:
    job = Job()
    try:
        stats = tmp_path / "stats"
        out = tmp_path / "gauge.jsonl"
        job.env[ENV_GAUGE_OUT] = str(out)
        r = job.run("-q", "-np", "4", "--stats", str(stats), *_busy(3.0), cpus=_one_cpu())
        assert r.code == 0, r.err
        assert WARNING not in r.err
        gauge = _usage(stats)["gauge"]
        assert isinstance(gauge, dict)
        assert gauge["oversubscribed"] is True
        assert json.loads(out.read_text()) == {"job_id": job.id, **gauge}  # EMU_GAUGE_OUT
        job.assert_clean()
    finally:
        job.teardown()
