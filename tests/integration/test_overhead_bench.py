"""``emubench overhead --quick`` runs real emurun jobs and reports every process's share."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from emubench.common import read_json
from emubench.overhead import ROLES, main

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow


def test_quick_run_splits_the_cost_of_a_message_by_process(tmp_path: Path) -> None:
    record_path = tmp_path / "overhead.json"
    assert main(["--quick", "--sizes", "8", "--json", str(record_path)]) == 0
    row = read_json(record_path)["sizes"]["8"]
    assert set(row["cpu_us_per_message"]) == {name for _, _, name in ROLES}
    assert all(us >= 0 for us in row["cpu_us_per_message"].values())
    assert sum(row["cpu_us_per_message"].values()) > 0  # a message costs someone something
    assert row["messages_per_s"] > 0
    assert row["one_way_us"] > 0
    assert row["relay_one_way_us"] > 0
    assert row["one_way_median_us"] > 0
    assert row["one_way_over_relay"] == row["one_way_median_us"] / row["relay_one_way_us"]
    assert row["one_way_mean_over_relay_mean"] == row["one_way_us"] / row["relay_one_way_mean_us"]
    for node in read_json(record_path)["relay_placement"]:  # bind-to core, as emurun's jobs
        assert node["relay_cpus"] == node["host_cpus"]
        assert node["relay_cpus"] is not None
    large = row["jobs"]["large"]
    assert large["count"] > row["jobs"]["small"]["count"]
    assert set(large["cpu_s"]) == {"host0", "host1", "nicd0", "nicd1"}
