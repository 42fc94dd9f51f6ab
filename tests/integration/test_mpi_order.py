"""Ordering stress (mpi_programs/order_stress): many tags and sources, wildcards, probes,
messages across the eager limit; under injected loss, duplication and reordering the
results are the same as without faults."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.integration.mpirun import PROGRAMS, mpirun

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow
FAULTS = ("--loss", "0.1", "--dup", "0.05", "--reorder", "0.05", "--fault-seed", "7")


def digests(out: str) -> list[str]:
    return sorted(" ".join(line.split()[:4]) for line in out.splitlines()
                  if line.startswith("order ok"))  # fmt: skip


def test_order_stress_same_with_and_without_faults(tmp_path: Path) -> None:
    clean = mpirun(4, PROGRAMS / "order_stress.py", "40", "3")
    assert clean.code == 0, clean.err
    faulty = mpirun(4, PROGRAMS / "order_stress.py", "40", "3",
                    emurun_args=(*FAULTS, "--stats", str(tmp_path)))  # fmt: skip
    assert faulty.code == 0, faulty.err
    assert len(digests(clean.out)) == 4
    assert digests(faulty.out) == digests(clean.out)
    nic = json.loads((tmp_path / "nic0.json").read_text())
    assert nic["faults"]["dropped"] > 0  # the faults really happened
    rank = json.loads((tmp_path / "rank0.json").read_text())
    assert rank["protocol"]["rts_sent"] > 0
    assert rank["protocol"]["out_of_order"] == 0
    assert rank["matching"]["arrivals"] > 0


def test_order_stress_on_eight_nodes_with_faults() -> None:
    result = mpirun(8, PROGRAMS / "order_stress.py", "12", "5", emurun_args=FAULTS)
    assert result.code == 0, result.err
    assert len(digests(result.out)) == 8
