"""One rank of the mpi4py conformance job: run one of mpi4py's test files, streaming outcomes.

``emurun --mpi4py -m emubench.conformance_rank TEST_FILE OUT_DIR`` runs the file's unittest
cases unmodified (the file imports ``mpi4py.MPI``, which the shim makes emucluster.MPI) and
appends one line per event to ``OUT_DIR/rank<N>.log``, flushed at once, so a job stopped by
its time limit still shows every test that finished and the one that was running:

    start <test id>
    <pass|fail|error|skip|xfail|xpass> <test id>
    done

With a third argument STACKS_AFTER (seconds), a rank still running after that long writes
every thread's Python stack to ``OUT_DIR/rank<N>.stacks`` (`faulthandler`, from its watchdog
thread, so a rank blocked anywhere still writes it), and, under emucluster, its MPI
statistics (matching queues and the envelopes in them, protocol counters, dropped messages,
dead peers) to ``OUT_DIR/rank<N>.mpistats`` and its nicd's counters to
``OUT_DIR/rank<N>.nicstats`` from a timer thread: the driver sets it a little before the time
limit and shows a hung run's stacks and statistics, so a hang seen once in CI can be diagnosed.

The exit status is 0 whatever the tests did: a failing rank must not stop the others before
they report (the conformance driver counts outcomes from the logs, not from exit codes).
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import threading
import unittest
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import TracebackType

    ExcInfo = tuple[type[BaseException], BaseException, TracebackType] | tuple[None, None, None]

__all__ = ["StreamingResult", "main"]


class StreamingResult(unittest.TextTestResult):
    """A TextTestResult that also writes each start and outcome to ``log`` as it happens."""

    def __init__(self, log: IO[str], stream: Any, descriptions: bool, verbosity: int) -> None:
        super().__init__(stream, descriptions, verbosity)
        self._log = log
        self._reported = False  # whether the running test's outcome was written
        self._subtest_word: str | None = None  # "fail" / "error" once a subtest failed

    def _event(self, word: str, test: unittest.TestCase | object) -> None:
        test_id = test.id() if isinstance(test, unittest.TestCase) else str(test)
        self._log.write(f"{word} {test_id}\n")
        self._log.flush()
        self._reported = self._reported or word != "start"

    def startTest(self, test: unittest.TestCase) -> None:
        self._reported, self._subtest_word = False, None
        self._event("start", test)
        super().startTest(test)

    def addSubTest(self, test: unittest.TestCase, subtest: unittest.TestCase,
                   err: ExcInfo | None) -> None:  # fmt: skip
        """A failing subtest fails its test (once, at stopTest), as unittest counts it."""
        if err is not None and self._subtest_word != "error":
            failure = err[0] is not None and issubclass(err[0], test.failureException)
            self._subtest_word = "fail" if failure else "error"
        super().addSubTest(test, subtest, err)

    def stopTest(self, test: unittest.TestCase) -> None:
        if not self._reported:
            self._event(self._subtest_word or "pass", test)
        super().stopTest(test)

    def addSuccess(self, test: unittest.TestCase) -> None:
        self._event("pass", test)
        super().addSuccess(test)

    def addFailure(self, test: unittest.TestCase, err: ExcInfo) -> None:
        self._event("fail", test)
        super().addFailure(test, err)

    def addError(self, test: unittest.TestCase, err: ExcInfo) -> None:
        self._event("error", test)
        super().addError(test, err)

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        if getattr(test, "test_case", None) is None:  # a skipped subtest skips no test
            self._event("skip", test)
        super().addSkip(test, reason)

    def addExpectedFailure(self, test: unittest.TestCase, err: ExcInfo) -> None:
        self._event("xfail", test)
        super().addExpectedFailure(test, err)

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        self._event("xpass", test)
        super().addUnexpectedSuccess(test)


def write_mpi_stats(path: Path) -> None:
    """This rank's emucluster MPI statistics as JSON at ``path`` (nothing under another MPI or
    before Init; read from a second thread while the main one waits, for diagnosis only)."""
    try:
        from emucluster.mpi import lifecycle  # late: only under emucluster, not MPICH

        runtime = lifecycle.current()
        stats = runtime.stats()
    except Exception:  # not emucluster, not initialized, or finalized meanwhile
        return
    path.write_text(json.dumps(stats, default=str, sort_keys=True), encoding="utf-8")
    socket_path = runtime.config.nic_socket
    if socket_path:
        try:
            from nicd.shell.manage import read_stats  # late: only under emucluster

            nic = read_stats(socket_path, timeout=5.0)
        except Exception as exc:  # the nicd is gone or does not answer: say so
            nic = {"unreadable": repr(exc)}
        path.with_suffix(".nicstats").write_text(json.dumps(nic, default=str, sort_keys=True),
                                                 encoding="utf-8")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run TEST_FILE's tests on this rank, logging to OUT_DIR/rank<N>.log."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3):
        print("usage: python -m emubench.conformance_rank TEST_FILE OUT_DIR [STACKS_AFTER]",
              file=sys.stderr)  # fmt: skip
        return 2
    test_file, out_dir = Path(args[0]).resolve(), Path(args[1])
    rank = os.environ.get("EMU_RANK") or os.environ.get("PMI_RANK") or "0"
    sys.path.insert(0, str(test_file.parent))
    with (
        open(out_dir / f"rank{rank}.log", "a", encoding="utf-8") as log,
        open(out_dir / f"rank{rank}.stacks", "w", encoding="utf-8") as stacks,
    ):
        timer: threading.Timer | None = None
        if len(args) == 3:
            faulthandler.dump_traceback_later(float(args[2]), file=stacks)
            timer = threading.Timer(float(args[2]), write_mpi_stats,
                                    (out_dir / f"rank{rank}.mpistats",))  # fmt: skip
            timer.daemon = True
            timer.start()
        try:
            suite = unittest.defaultTestLoader.discover(
                str(test_file.parent), pattern=test_file.name, top_level_dir=str(test_file.parent)
            )
        except Exception as exc:  # an import failure is an outcome too
            log.write(f"error {test_file.stem}.<import>: {exc!r}\n")
            log.flush()
            raise
        verbosity = 2 if rank == "0" else 0
        stream = sys.stderr if rank == "0" else open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
        runner = unittest.TextTestRunner(
            stream=stream,
            verbosity=verbosity,
            resultclass=lambda s, d, v: StreamingResult(log, s, d, v),
        )
        runner.run(suite)
        faulthandler.cancel_dump_traceback_later()
        if timer is not None:
            timer.cancel()
        log.write("done\n")
        log.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
