"""NICVM through real emurun: Fig 4.3's module broadcasting on 2-8 nodes with faults on, a bad
module refused with its position, a looping module stopped in bounded time, unmodified
programs switched to the NICVM broadcast by ``emurun --bcast nicvm``."""

from __future__ import annotations

import pytest

from tests.integration.mpirun import EXAMPLES, PROGRAMS, mpirun

pytestmark = pytest.mark.slow

FAULTS = ("--loss", "0.05", "--dup", "0.02", "--reorder", "0.02", "--fault-seed", "7")


@pytest.mark.parametrize("nodes", [2, 5, 8])
def test_nicvm_suite_with_faults(nodes: int) -> None:
    result = mpirun(nodes, PROGRAMS / "nicvm_suite.py", emurun_args=FAULTS, timeout=240)
    assert result.code == 0, result.err
    assert result.lines("nicvm ok") == sorted(f"nicvm ok {r}" for r in range(nodes))


def test_pipelined_module_sends() -> None:
    args = ("--nicd-args=--nicvm-pipelined", *FAULTS)
    result = mpirun(4, PROGRAMS / "nicvm_suite.py", emurun_args=args, timeout=240)
    assert result.code == 0, result.err
    assert len(result.lines("nicvm ok")) == 4


def test_unmodified_program_uses_nicvm_bcast() -> None:
    result = mpirun(4, EXAMPLES / "pi.py", emurun_args=("--bcast", "nicvm"))
    assert result.code == 0, result.err
    result = mpirun(3, PROGRAMS / "coll_suite.py", emurun_args=("--bcast", "nicvm"))
    assert result.code == 0, result.err
    assert len(result.lines("coll ok")) == 3


@pytest.mark.parametrize("faults", [False, True])
def test_nicvm_bcast_after_context_reuse(faults: bool) -> None:
    """Issue 17's check for NICVM: communicators reusing a freed context id with other
    memberships each get their own root's value (a rank whose last map for the id matched
    the new communicator skipped the first call's barrier and the job hung)."""
    args = FAULTS if faults else ()
    result = mpirun(4, PROGRAMS / "nicvm_reuse.py", emurun_args=args, timeout=120)
    assert result.code == 0, result.err
    assert result.lines("nicvm reuse ok") == sorted(f"nicvm reuse ok {r}" for r in range(4))


def test_port_level_api_persistence_nic_echo_and_remote_upload_refused() -> None:
    result = mpirun(2, PROGRAMS / "nicvm_port.py", emurun_args=FAULTS)
    assert result.code == 0, result.err
    assert result.lines("port ok") == ["port ok 0", "port ok 1"]
