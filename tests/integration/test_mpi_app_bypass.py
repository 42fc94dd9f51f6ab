"""Application-bypass Reduce through emurun: equal to the host-based reduce on 2-8 nodes under
random skew, many outstanding instances, user Ops, objects, several communicators, faults, exit
with reductions outstanding; a late child combined by the signal path (mpi_programs/ab_reduce)."""

from __future__ import annotations

import json

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

pytestmark = pytest.mark.slow
PROGRAM = PROGRAMS / "ab_reduce.py"
AB_ENV = {"EMU_REDUCE": "app-bypass"}


def counters(lines: list[str]) -> list[dict[str, object]]:
    return [json.loads(line.split(" ", 3)[3]) for line in lines]


@pytest.mark.parametrize("nodes", [2, 4, 5, 8])
def test_app_bypass_matches_host_reduce(nodes: int) -> None:
    result = mpirun(nodes, PROGRAM, "correct", str(nodes), env=AB_ENV)
    assert result.code == 0, result.err
    lines = result.lines("ab ok")
    assert len(lines) == nodes, result.out
    if nodes >= 4:  # internal nodes exist: the asynchronous part did work somewhere
        stats = counters(lines)
        assert sum(int(s["async_completed"]) for s in stats) > 0  # type: ignore[call-overload]
        assert all(s["dropped"] == {} for s in stats)


def test_app_bypass_with_faults_and_wait_policies() -> None:
    faults = ("--loss", "0.05", "--dup", "0.02", "--reorder", "0.02", "--fault-seed", "11")
    for wait in ("block", "spin"):
        env = {**AB_ENV, "EMU_WAIT": wait}
        result = mpirun(6, PROGRAM, "correct", "11", emurun_args=faults, env=env)
        assert result.code == 0, (wait, result.err)
        assert len(result.lines("ab ok")) == 6, (wait, result.out)


def test_app_bypass_delay_before_leaving_reduce() -> None:
    result = mpirun(5, PROGRAM, "correct", "2", env={**AB_ENV, "EMU_AB_DELAY_US": "200"})
    assert result.code == 0, result.err
    assert all(s["delay_us"] == 200.0 for s in counters(result.lines("ab ok")))


def test_late_child_is_combined_by_the_signal_path_while_the_parent_computes() -> None:
    result = mpirun(4, PROGRAM, "late", env=AB_ENV)
    assert result.code == 0, result.err
    lines = result.lines("late ok")
    stats = {int(line.split()[2]): s for line, s in zip(lines, counters(lines), strict=True)}
    assert sorted(stats) == [0, 1, 2, 3]
    parent = stats[2]
    assert parent["late"] == 1
    assert parent["async_completed"] == 1
    assert int(parent["signal_runs"]) >= 1  # type: ignore[call-overload]
    assert parent["copies"] == 0  # the late packet was combined from its buffer
    assert not parent["signals_enabled"]
