"""The CPU report and the output helpers of the launcher (no processes)."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import trio
import trio.testing

from launcher.children import LineReader, describe_exit, exit_code_of, tag_lines
from launcher.cleanup import job_segments
from launcher.cpugauge import WARN_SHARE
from launcher.plan import LaunchPlan, Program
from launcher.report import (
    UNKNOWN_LINE,
    ProcessUsage,
    describe_status,
    format_table,
    job_json,
    usage_json,
)
from nicd.config import FaultConfig

if TYPE_CHECKING:
    from pathlib import Path

USAGES = [
    ProcessUsage("nicd", 0, 101, 0.25, 0.5, 2.0, 0, 0.5),
    ProcessUsage("host", 1, 202, 1.0, 0.125, 1.5, -9, 0.75),
    ProcessUsage("host", 0, 201, 2.0, 0.0, 1.5, 0, 0.375),
]


def test_table_rows_hosts_first_then_totals() -> None:
    lines = format_table(USAGES, 3.0).splitlines()
    assert lines[0].split() == ["process", "pid", "user", "s", "system", "s", "cpu", "s",
                                "wall", "s", "wait", "s", "wait", "%", "nicd", "%",
                                "status"]  # fmt: skip
    assert [ln.split()[:2] for ln in lines[1:4]] == [["host", "0"], ["host", "1"], ["nicd", "0"]]
    assert lines[1].split()[3:] == ["2.000", "0.000", "2.000", "1.500", "0.375", "25.0", "0"]
    assert lines[2].split()[-1] == "SIGKILL"
    # node 0: the nicd's 0.75 s of the node's 2.75 s
    assert lines[3].split()[3:] == ["0.250", "0.500", "0.750", "2.000", "0.500", "25.0", "27.3",
                                    "0"]  # fmt: skip
    # the ranks' mean share: (25 % + 50 %) / 2
    assert lines[4].split() == ["all", "hosts", "3.000", "0.125", "3.125", "1.125", "37.5"]
    # all nicds' CPU over all CPU: 0.75 / 3.875
    assert lines[5].split() == ["all", "nicds", "0.250", "0.500", "0.750", "0.500", "25.0",
                                "19.4"]  # fmt: skip
    assert lines[6].split() == ["job", "3.000"]
    assert len(lines) == 7


def test_unknown_run_delays_show_as_question_marks_and_are_explained_once() -> None:
    usages = [
        ProcessUsage("host", 0, 201, 2.0, 0.0, 1.5, 0, None),
        ProcessUsage("host", 1, 202, 2.0, 0.0, 1.5, 0, None),
    ]
    lines = format_table(usages, 3.0).splitlines()
    assert lines[1].split()[7:] == ["?", "0"]
    assert lines[3].split()[5:] == ["?"]  # all hosts: no sum, no share
    assert lines[-1] == UNKNOWN_LINE
    assert sum(UNKNOWN_LINE in line for line in lines) == 1


def test_usage_json() -> None:
    doc = usage_json(USAGES[:1], 3.0)
    assert doc == {
        "wall_s": 3.0,
        "processes": [
            {"role": "nicd", "node": 0, "pid": 101, "user_s": 0.25, "system_s": 0.5,
             "wall_s": 2.0, "returncode": 0, "run_delay_s": 0.5, "run_delay_share": 0.25,
             "nicd_cpu_share": None},
        ],
        "gauge": {
            "rank_run_delay_share": None, "nicd_run_delay_share": 0.25, "nicd_cpu_share": 1.0,
            "run_delay_unknown": 0, "warn_share": WARN_SHARE, "oversubscribed": None,
        },
    }  # fmt: skip
    doc = usage_json(USAGES, 3.0)
    gauge = doc["gauge"]
    assert isinstance(gauge, dict)
    assert gauge["rank_run_delay_share"] == 0.375
    assert gauge["oversubscribed"] is True


def test_statuses() -> None:
    assert describe_status(None) == "?"
    assert describe_status(3) == "3"
    assert describe_status(-signal.SIGTERM) == "SIGTERM"
    assert describe_exit(2) == "exited with code 2"
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert exit_code_of(5) == 5
    assert exit_code_of(-15) == 143


def test_tag_lines() -> None:
    assert tag_lines(b"a\nb\n", b"[1] ") == b"[1] a\n[1] b\n"
    assert tag_lines(b"partial", b"[0] ") == b"[0] partial\n"
    assert tag_lines(b"\n", b"[2] ") == b"[2] \n"
    log = b"nicd[1] WARNING x\nTraceback\n"
    assert tag_lines(log, b"nicd[1] ", b"nicd[") == b"nicd[1] WARNING x\nnicd[1] Traceback\n"


async def test_line_reader_returns_whole_lines_then_the_rest() -> None:
    send, recv = trio.testing.memory_stream_pair()
    reader = LineReader(recv)
    await send.send_all(b"one\ntw")
    assert await reader.read_lines() == b"one\n"
    await send.send_all(b"o\nthree\nfo")
    assert await reader.read_lines() == b"two\nthree\n"
    await send.aclose()
    assert await reader.read_lines() == b"fo"
    assert await reader.read_lines() is None


async def test_line_reader_cuts_endless_lines() -> None:
    send, recv = trio.testing.memory_stream_pair()
    reader = LineReader(recv)
    await send.send_all(b"x" * 200_000)
    got = await reader.read_lines()
    assert got is not None
    assert 0 < len(got) < 200_000
    assert b"\n" not in got


def test_job_segments_match_the_prefix_only(tmp_path: Path) -> None:
    for name in ("emu_j1_a", "emu_j1_b", "emu_j12_a", "emu_j2_a", "other"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in job_segments("j1", tmp_path)] == ["emu_j1_a", "emu_j1_b"]


def test_job_json_names_the_run() -> None:
    plan = LaunchPlan(
        np=2,
        program=Program(("/py", "app.py"), "app.py"),
        job_id="j1",
        python="/py",
        faults=FaultConfig(loss=0.1, seed=3),
    )
    doc = job_json(plan, 3, "rank 1 exited with code 3", "nice", USAGES[:1], 2.5)
    assert doc["exit_code"] == 3
    assert doc["outcome"] == "rank 1 exited with code 3"
    assert doc["faults"] == {
        "loss": 0.1, "dup": 0.0, "reorder": 0.0, "corrupt": 0.0, "delay_ms": 0.0, "seed": 3
    }  # fmt: skip
    assert (doc["np"], doc["program"], doc["nic_priority"]) == (2, ["/py", "app.py"], "nice")
    assert doc["usage"] == usage_json(USAGES[:1], 2.5)
