"""Every 8-byte Bcast, Reduce and Barrier algorithm through emurun on 1, 2, 3, 5 and 16 nodes
(mpi_programs/small_coll.py): the algorithms issue 17 compares, with correct results."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow

FAULTS = ("--loss", "0.05", "--dup", "0.02", "--reorder", "0.02", "--fault-seed", "17")


@pytest.mark.parametrize("nodes", [1, 2, 3, 5, 16])
def test_every_small_message_algorithm(nodes: int) -> None:
    result = mpirun(nodes, PROGRAMS / "small_coll.py", timeout=600)
    assert result.code == 0, result.err
    assert result.lines("small ok") == sorted(f"small ok {r}" for r in range(nodes))


@pytest.mark.parametrize("faults", [False, True])
def test_nic_mcast_bcast_after_context_reuse(faults: bool) -> None:
    """Issue 17: on 4 nodes, after a Free, rank 3 got the bcast of the other pair's root and
    rank 2's NIC refused its multicast (the shell kept the freed communicator's groups and
    plan under the context id Split reused). With loss, old resends meet the new groups."""
    args = FAULTS if faults else ()
    result = mpirun(4, PROGRAMS / "mcast_reuse.py", emurun_args=args, timeout=120)
    assert result.code == 0, result.err
    assert result.lines("reuse ok") == sorted(f"reuse ok {r}" for r in range(4))


@pytest.mark.parametrize(
    ("part", "faults"),
    [("nic-mcast", False), ("nic-mcast", True), ("nicvm", False), ("p2p", False)],
)
def test_free_with_an_operation_pending(part: str, faults: bool, tmp_path: Path) -> None:
    """Issue 17: Free with an operation still pending on the communicator (its first
    nic-mcast or nicvm Ibcast, or an Irecv) released the context id at once, so the next
    Split reused it while the operation went on: the Ibcast posted its groups and epoch under
    the free id, or its receives took the new communicator's messages. MPI-4.0 §7.4.3: the
    operation completes normally and the id is given back only then. No multicast group may
    outlive the communicators at any NIC (with loss too: resends meet freed groups)."""
    stats = tmp_path / "stats"
    args = ("--stats", str(stats), "-x", "EMU_MCAST_TREE=binomial", *(FAULTS if faults else ()))
    result = mpirun(4, PROGRAMS / "free_pending.py", part, emurun_args=args, timeout=100)
    assert result.code == 0, result.err
    assert result.lines("free ok") == sorted(f"free ok {r}" for r in range(4))
    if part == "nic-mcast":
        counts = [line.split()[3:] for line in result.lines("free groups")]
        assert len(counts) == 4
        assert all(int(posted) > 0 and posted == freed for posted, freed in counts), counts
        nics = [json.loads((stats / f"nic{n}.json").read_text())["mcast"] for n in range(4)]
        assert [n["groups"] for n in nics] == [0] * 4, nics
        assert all(n["groups_created"] == n["groups_freed"] > 0 for n in nics), nics
