"""The fidelity gauge's pure parts: schedstat text, shares, the job's gauge, the warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.cpugauge import (
    WARN_SHARE,
    Gauge,
    append_gauge,
    gauge,
    gauge_json,
    nicd_cpu_share,
    parse_schedstat,
    read_run_delay,
    run_delay_share,
    summarise,
    warning,
)
from launcher.plan import LaunchPlan, Program
from launcher.report import ProcessUsage, gauge_verdict


@pytest.mark.parametrize(
    ("text", "delay"),
    [
        ("123456 2500000000 17\n", 2.5),
        ("0 87805 1", 87805e-9),  # no on-CPU time counted yet: still a reading
        ("5 0 1", 0.0),
        ("0 0 0\n", None),  # a kernel that keeps no counts
        ("", None),
        ("1 2", None),
        ("1 2 3 4", None),
        ("1 -2 3", None),
        ("a b c", None),
        ("1 2.5 3", None),
    ],
)
def test_parse_schedstat(text: str, delay: float | None) -> None:
    assert parse_schedstat(text) == delay


def test_read_run_delay_of_a_zombie_then_of_nothing() -> None:
    own = Path(f"/proc/{os.getpid()}/schedstat")
    if not own.exists() or parse_schedstat(own.read_text()) is None:
        pytest.skip("this kernel keeps no schedstat counts")
    child = subprocess.Popen([sys.executable, "-c", "sum(range(10**6))"])
    info = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    assert info is not None
    assert info.si_pid == child.pid
    delay = read_run_delay(child.pid)
    assert delay is not None
    assert delay >= 0
    assert child.wait(timeout=60) == 0
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert read_run_delay(pid_max + 1) is None  # no such process


def _usage(role: str, node: int, cpu: float, wall: float, delay: float | None) -> ProcessUsage:
    return ProcessUsage(role, node, 100 + node, cpu, 0.0, wall, 0, delay)


def test_shares() -> None:
    assert run_delay_share(_usage("host", 0, 1.0, 2.0, 0.5)) == 0.25
    assert run_delay_share(_usage("host", 0, 1.0, 2.0, None)) is None
    assert run_delay_share(_usage("host", 0, 1.0, 0.0, 0.5)) is None
    assert nicd_cpu_share(3.0, 1.0) == 0.75
    assert nicd_cpu_share(0.0, 0.0) is None


def test_gauge_means_per_role_and_skips_unknowns() -> None:
    usages = [
        _usage("host", 0, 1.0, 2.0, 1.0),
        _usage("host", 1, 1.0, 2.0, None),
        _usage("host", 2, 1.0, 4.0, 0.0),
        _usage("nicd", 0, 1.0, 4.0, 0.4),
    ]
    g = gauge(usages)
    assert g == Gauge(rank_share=0.25, nicd_share=0.1, nicd_cpu_share=0.25, unknown=1)
    assert g.oversubscribed is (WARN_SHARE < 0.25)
    assert gauge([]) == Gauge(None, None, None, 0)
    assert gauge([]).oversubscribed is None


def test_warning_only_above_the_threshold() -> None:
    assert warning(Gauge(None, None, None, 3)) is None
    assert warning(Gauge(WARN_SHARE, 0.9, 0.5, 0)) is None
    assert warning(Gauge(0.0, 0.9, 0.5, 0)) is None  # the nicds' waits alone do not warn
    line = warning(Gauge(0.625, 0.1, 0.5, 0))
    assert line is not None
    assert "\n" not in line
    assert "62%" in line or "63%" in line
    assert f"{WARN_SHARE:.0%}" in line


def test_appended_gauges_summarise(tmp_path: Path) -> None:
    out = tmp_path / "gauge.jsonl"
    append_gauge(str(out), "j1", Gauge(0.5, 0.1, 0.6, 0))
    append_gauge(str(out), "j2", Gauge(0.1, 0.0, 0.4, 0))
    append_gauge(str(out), "j3", Gauge(None, None, None, 4))
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    assert json.loads(lines[0]) == {"job_id": "j1", **gauge_json(Gauge(0.5, 0.1, 0.6, 0))}
    summary = summarise(out.read_text() + "not json\n[1]\n")
    assert summary == {
        "jobs": 3,
        "oversubscribed_jobs": 1,
        "rank_run_delay_share_mean": pytest.approx(0.3),
        "rank_run_delay_share_max": 0.5,
        "nicd_cpu_share_mean": pytest.approx(0.5),
        "warn_share": WARN_SHARE,
        "unreadable": 2,
    }
    assert summarise("")["jobs"] == 0


def _plan(**kw: object) -> LaunchPlan:
    return LaunchPlan(np=2, program=Program(("/py", "a.py"), "a.py"), job_id="j9", python="/py",
                      **kw)  # type: ignore[arg-type]  # fmt: skip


WAITED = [
    ProcessUsage("host", 0, 1, 0.5, 0.0, 2.0, 0, 1.5),
    ProcessUsage("host", 1, 2, 0.5, 0.0, 2.0, 0, 1.5),
]


def test_the_verdict_warns_unless_quiet_and_appends_the_gauge(tmp_path: Path) -> None:
    (line,) = gauge_verdict(_plan(), WAITED)
    assert line.startswith("warning: the ranks waited for a CPU 75%")
    assert gauge_verdict(_plan(quiet=True), WAITED) == []
    assert len(gauge_verdict(_plan(quiet=True, cpu_report=True), WAITED)) == 1
    calm = [ProcessUsage("host", 0, 1, 0.5, 0.0, 2.0, 0, 0.1)]
    assert gauge_verdict(_plan(), calm) == []
    out = tmp_path / "g.jsonl"
    assert gauge_verdict(_plan(quiet=True, gauge_out=str(out)), WAITED) == []
    assert json.loads(out.read_text())["oversubscribed"] is True
    (failed,) = gauge_verdict(_plan(quiet=True, gauge_out=str(tmp_path / "no" / "g")), WAITED)
    assert failed.startswith("cannot write the gauge to")
