"""A failing rank ends the job with its code: uncaught exception (1, with a readable
traceback), Abort(7), sys.exit(3); the other ranks, blocked in a receive, are stopped."""

from __future__ import annotations

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

pytestmark = pytest.mark.slow


def test_uncaught_exception_exits_one_with_traceback() -> None:
    result = mpirun(3, PROGRAMS / "failing.py", "raise")
    assert result.code == 1
    assert "Traceback (most recent call last)" in result.err
    assert "RuntimeError: boom from rank 1" in result.err


@pytest.mark.parametrize(("mode", "code"), [("abort", 7), ("exit", 3)])
def test_abort_and_exit_codes(mode: str, code: int) -> None:
    result = mpirun(3, PROGRAMS / "failing.py", mode)
    assert result.code == code, result.err
    if mode == "abort":
        assert "MPI_Abort(errorcode=7)" in result.err
