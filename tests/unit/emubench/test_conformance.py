"""The conformance job's counting (outcomes from rank logs, subtests, hung tests) and the
environment of its runs."""

from __future__ import annotations

import io
import os
import unittest
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emubench.conformance import FILES, Outcome, count_log, job_env, merged, table
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
