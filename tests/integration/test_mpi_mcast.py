"""MPI Bcast by NIC multicast through emurun: equal to the host bcast under faults, and an
intermediate host busy outside MPI does not delay its children (mpi_programs/mcast_*.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow
FAULTS = ("--loss", "0.05", "--dup", "0.02", "--reorder", "0.02")


@pytest.mark.parametrize(("nodes", "rounds"), [(2, 12), (5, 10), (8, 6)])
def test_nic_bcast_equals_host_bcast_under_faults(nodes: int, rounds: int, tmp_path: Path) -> None:
    stats = tmp_path / "stats"
    args = (*FAULTS, "--fault-seed", str(nodes), "--bcast", "nic-mcast", "--stats", str(stats))
    result = mpirun(nodes, PROGRAMS / "mcast_bcast.py", str(nodes), str(rounds),
                    emurun_args=args)  # fmt: skip
    assert result.code == 0, result.err
    assert result.lines("mcast ok") == sorted(f"mcast ok {r}" for r in range(nodes))
    counters = [json.loads(line.split(" ", 3)[3]) for line in result.lines("mcast stats")]
    assert sum(c["multicasts"] for c in counters) >= rounds  # NIC multicast really ran
    assert sum(c["received"] for c in counters) >= rounds * (nodes - 1)
    nics = [json.loads((stats / f"nic{n}.json").read_text())["mcast"] for n in range(nodes)]
    assert sum(n["delivered"] for n in nics) == sum(c["received"] for c in counters)
    assert sum(n["messages_sent"] for n in nics) == sum(
        c["multicasts"] + c["large_fallbacks"] for c in counters
    )
    if nodes > 2:
        assert sum(n["retransmissions"] for n in nics) > 0  # the faults hit multicast too


@pytest.mark.parametrize(("algorithm", "child_first"), [("nic-mcast", True), ("binomial", False)])
def test_busy_intermediate_host_does_not_delay_its_children(
    algorithm: str, child_first: bool, tmp_path: Path
) -> None:
    stats = tmp_path / "stats"
    wait_s = "60" if child_first else "2"  # the binomial run can only time out
    args = ("--bcast", algorithm, "-x", "EMU_MCAST_TREE=binomial", "--stats", str(stats))
    result = mpirun(4, PROGRAMS / "mcast_busy.py", str(tmp_path), wait_s, emurun_args=args)
    assert result.code == 0, result.err
    (line,) = result.lines("busy P=")
    assert f"child_first={child_first}" in line, line
    assert len(result.lines("busy ok")) == 4
    parent = int(line.split()[1].removeprefix("P="))
    forwarded = json.loads((stats / f"nic{parent}.json").read_text())["mcast"]["forwarded"]
    assert (forwarded > 0) is child_first  # the parent's NIC, not its host, forwarded
