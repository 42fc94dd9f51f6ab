"""The conformance job's counting (outcomes from rank logs, subtests, hung tests), the
environment of its runs and the stacks a hung run leaves."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import unittest
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emubench.conformance import (
    FILES,
    STACK_FRAMES,
    Outcome,
    count_log,
    job_env,
    markdown,
    merged,
    stack_summary,
    table,
)
from emubench.conformance_rank import StreamingResult

if TYPE_CHECKING:
    import pytest


def test_count_log_counts_outcomes_and_the_hung_test() -> None:
    text = "start a\npass a\nstart b\nfail b\nstart c\nskip c\nstart d\nerror d\nstart e\n"
    out = count_log(text)
    assert (out.passed, out.failed, out.skipped) == (1, 1, 1)
    assert out.errors == 2  # e was running: an error
    assert out.hung == "e"
    assert not out.finished


def test_count_log_of_a_finished_run() -> None:
    out = count_log("start a\npass a\ndone\n")
    assert out.finished
    assert out.hung is None
    assert out.total == 1


def test_streaming_result_counts_a_test_once_whatever_its_subtests_did() -> None:
    class Sample(unittest.TestCase):
        def test_ok(self) -> None:
            pass

        def test_subtests(self) -> None:
            for i in range(3):
                with self.subTest(i=i):
                    self.assertNotEqual(i, 1)  # noqa: PT009

        def test_skipped_subtest(self) -> None:
            with self.subTest(i=0):
                self.skipTest("no")

        def test_error(self) -> None:
            raise RuntimeError("boom")

    log = io.StringIO()
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(Sample)
    unittest.TextTestRunner(
        stream=io.StringIO(), resultclass=lambda s, d, v: StreamingResult(log, s, d, v)
    ).run(suite)
    out = count_log(log.getvalue())
    assert (out.passed, out.failed, out.errors, out.skipped) == (2, 1, 1, 0), log.getvalue()


def test_table_has_a_row_per_file_and_a_total() -> None:
    results = {"test_x": {"2": count_log("start a\npass a\ndone\n")}}
    text = table(results, [2], {"test_x": {"2": 1}})
    assert "test_x" in text
    assert "total" in text
    assert "1/0/0/0" in text


def test_job_env_puts_the_test_directory_first_on_pythonpath(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/opt/a")
    env = job_env(Path("/srv/mpi4py/test"))
    assert env["PYTHONPATH"].split(os.pathsep) == ["/srv/mpi4py/test", "/opt/a"]
    monkeypatch.delenv("PYTHONPATH")
    assert job_env(Path("/srv/mpi4py/test"))["PYTHONPATH"] == "/srv/mpi4py/test"


def test_update_merges_rows_and_the_floor_counts_only_the_ci_files() -> None:
    old: dict[str, Any] = {"total_passed": 5, "nodes": [2, 3], "files": {
        FILES[0]: {"2": {"passed": 3}, "3": {"passed": 2}},
        FILES[1]: {"2": {"passed": 7}, "3": {"passed": 7}},
    }}  # fmt: skip
    run = {FILES[1]: {"2": Outcome(passed=9), "3": Outcome(passed=8)},
           "test_outside": {"2": Outcome(passed=100)}}  # fmt: skip
    new = merged(old, run, [2, 3])
    assert new["files"][FILES[0]] == old["files"][FILES[0]]
    assert new["files"][FILES[1]]["3"]["passed"] == 8
    assert new["files"]["test_outside"]["2"]["passed"] == 100
    assert new["total_passed"] == 3 + 2 + 9 + 8
    assert "stacks" not in new["files"][FILES[1]]["2"]


def test_stack_summary_keeps_the_innermost_frames_of_each_thread() -> None:
    frames = [f'  File "/deep/path/pkg/mod{i}.py", line {i} in f{i}' for i in range(20)]
    dump = "\n".join(["Thread 0x1 (most recent call first):", *frames, "",
                      "Current thread 0x2 (most recent call first):", frames[0]])  # fmt: skip
    lines = stack_summary(dump).splitlines()
    assert lines[0].strip() == "Thread 0x1 (most recent call first):"
    assert lines[1].strip() == 'File "pkg/mod0.py", line 0 in f0'
    assert (
        lines[STACK_FRAMES].strip()
        == f'File "pkg/mod{STACK_FRAMES - 1}.py", line {STACK_FRAMES - 1} in f{STACK_FRAMES - 1}'
    )
    assert lines[STACK_FRAMES + 1].strip().startswith("Current thread 0x2")
    assert len(lines) == STACK_FRAMES + 3


def test_a_rank_still_running_after_stacks_after_writes_its_stacks(tmp_path: Path) -> None:
    """The rank's watchdog writes the stack of a test that is still running (here one that
    waits for that very file), and the test file then finishes normally."""
    out = tmp_path / "logs"
    out.mkdir()
    (tmp_path / "test_waits.py").write_text(
        "import pathlib, time, unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_waits_for_its_stacks(self):\n"
        f"        path = pathlib.Path({str(out / 'rank0.stacks')!r})\n"
        "        deadline = time.monotonic() + 60\n"
        "        while 'test_waits_for_its_stacks' not in path.read_text():\n"
        "            self.assertLess(time.monotonic(), deadline)\n"
        "            time.sleep(0.05)\n"
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("EMU_RANK", "PMI_RANK")}
    done = subprocess.run(
        [sys.executable, "-m", "emubench.conformance_rank", str(tmp_path / "test_waits.py"),
         str(out), "0.2"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    log = (out / "rank0.log").read_text()
    assert "pass test_waits.T.test_waits_for_its_stacks" in log
    assert log.endswith("done\n")


def test_markdown_has_every_file_of_either_side_and_the_shares() -> None:
    figure = {
        "emucluster": {"files": {
            "test_a": {"2": {"passed": 9, "failed": 1}, "3": {"passed": 8, "finished": False}},
        }},
        "mpich": {"files": {
            "test_a": {"2": {"passed": 10}, "3": {"passed": 10}},
            "test_b": {"2": {"passed": 10, "skipped": 2}, "3": {"passed": 10}},
        }},
    }  # fmt: skip
    lines = markdown(figure, [2, 3]).splitlines()
    assert lines[2] == "| test_a | 9/1/0/0 | 8/0/0/0* | 10/0/0/0 | 10/0/0/0 |"
    assert lines[3] == "| test_b | - | - | 10/0/0/2 | 10/0/0/0 |"
    assert lines[4] == "| **passed** | **9** | **8** | **20** | **20** |"
    assert (
        lines[-1]
        == "2 files; emucluster passes 45.0 % at 2 nodes, 40.0 % at 3 nodes of MPICH's count."
    )
