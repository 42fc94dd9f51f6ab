"""NicCluster's per-node fault seeds match emurun's (audit test 19), without starting nicds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from emubench.localcluster import NicCluster
from launcher.plan import fault_seed_for
from nicd.__main__ import build_parser, config_from_args
from nicd.config import FaultConfig

if TYPE_CHECKING:
    from pathlib import Path


def test_each_nicd_gets_its_own_fault_seed_as_emurun_derives_it(tmp_path: Path) -> None:
    faults = FaultConfig(loss=0.2, dup=0.05, seed=7)
    cluster = NicCluster(4, tmp_path, ["--mtu", "1024"], faults=faults)
    seeds = []
    for node in range(4):
        argv = ["--node-id", str(node), "--run-dir", "/r", *cluster.node_fault_flags(node)]
        parsed = config_from_args(build_parser().parse_args(argv)).faults
        assert (parsed.loss, parsed.dup) == (0.2, 0.05)
        seeds.append(parsed.seed)
    assert seeds == [fault_seed_for(7, node) for node in range(4)]
    assert len(set(seeds)) == 4


def test_no_faults_no_flags_and_a_shared_seed_flag_is_refused(tmp_path: Path) -> None:
    assert NicCluster(2, tmp_path).node_fault_flags(1) == []
    with pytest.raises(ValueError, match="per-node seeds"):
        NicCluster(2, tmp_path, ["--loss", "0.1", "--fault-seed", "7"])
