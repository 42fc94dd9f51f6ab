"""Fault tolerance with real processes: under ``emurun --with-ft ulfm`` a rank that dies does
not stop the job; the survivors see ERR_PROC_FAILED or ERR_REVOKED, Shrink and finish a
collective on the survivors' communicator, and emurun exits with the dead rank's status. Without
the option the same death stops the job (`mpi_programs/ulfm_recover.py`)."""

from __future__ import annotations

import re

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

pytestmark = pytest.mark.slow

PROGRAM = PROGRAMS / "ulfm_recover.py"


@pytest.mark.parametrize(("np_", "victim"), [(4, 2), (3, 0)])
def test_survivors_shrink_and_finish_under_with_ft(np_: int, victim: int) -> None:
    result = mpirun(np_, PROGRAM, str(victim), emurun_args=("--with-ft", "ulfm"))
    assert result.code == 7, result.err  # the dead rank's status, once the others ended
    survivors = [r for r in range(np_) if r != victim]
    saw = dict(re.findall(r"rank (\d+) saw (\w+)", result.out))
    assert sorted(int(r) for r in saw) == survivors, result.out + result.err
    assert set(saw.values()) <= {"PROC_FAILED", "REVOKED"}
    assert "PROC_FAILED" in saw.values()  # some survivor's NIC reported the death
    done = re.findall(r"rank (\d+) shrunk (\d+) (\d+) total (\d+) revoked (\w+) agreed (\d+)",
                      result.out)  # fmt: skip
    assert sorted(int(d[0]) for d in done) == survivors, result.out + result.err
    for rank, size, new_rank, total, revoked, agreed in done:
        assert int(size) == np_ - 1
        assert int(new_rank) == survivors.index(int(rank))  # old order kept
        assert int(total) == sum(survivors)
        assert revoked == "True"
        assert int(agreed) == 0b110
    assert f"rank {victim} (pid" in result.err
    assert "the job goes on (--with-ft ulfm)" in result.err


def test_without_with_ft_a_dead_rank_still_stops_the_job() -> None:
    result = mpirun(3, PROGRAM, "1")
    assert result.code == 7, result.err
    assert "stopping the job" in result.err
    assert "shrunk" not in result.out
