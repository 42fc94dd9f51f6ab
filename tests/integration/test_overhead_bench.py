"""``emubench overhead --quick`` runs real emurun jobs and reports every process's share."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import pytest

from emubench import crelay
from emubench.common import read_json
from emubench.overhead import ROLES, main
from launcher.plan import place

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow


def test_quick_run_splits_the_cost_of_a_message_by_process(tmp_path: Path) -> None:
    record_path = tmp_path / "overhead.json"
    assert main(["--quick", "--sizes", "8", "--json", str(record_path)]) == 0
    row = read_json(record_path)["sizes"]["8"]
    assert set(row["cpu_us_per_message"]) == {name for _, _, name in ROLES}
    # each share is the difference of two short runs' CPU seconds over the difference of their
    # message counts: at --quick's few hundred messages start-up noise can outweigh it (a share
    # of -5.4 us in CI of 8c11f71), so the test checks the accounting, never the figures
    small, large = row["jobs"]["small"], row["jobs"]["large"]
    for role, node, name in ROLES:
        spent = large["cpu_s"][f"{role}{node}"] - small["cpu_s"][f"{role}{node}"]
        share = spent / (large["count"] - small["count"]) * 1e6
        assert math.isclose(row["cpu_us_per_message"][name], share), name
    assert row["messages_per_s"] > 0
    assert row["one_way_us"] > 0
    assert row["relay_one_way_us"] > 0
    assert row["one_way_median_us"] > 0
    assert row["one_way_over_relay"] == row["one_way_median_us"] / row["relay_one_way_us"]
    assert row["one_way_mean_over_relay_mean"] == row["one_way_us"] / row["relay_one_way_mean_us"]
    if "skipped" not in read_json(record_path)["c_relay"]:  # a C compiler: the physical floor
        assert 0 < row["c_relay_one_way_us"] <= row["c_relay_one_way_mean_us"] * 10
        assert row["one_way_over_c_relay"] == row["one_way_median_us"] / row["c_relay_one_way_us"]
    for node in read_json(record_path)["relay_placement"]:  # bind-to core, as emurun's jobs
        assert node["relay_cpus"] == node["host_cpus"]
        assert node["relay_cpus"] is not None
    large = row["jobs"]["large"]
    assert large["count"] > row["jobs"]["small"]["count"]
    assert set(large["cpu_s"]) == {"host0", "host1", "nicd0", "nicd1"}


def test_the_c_relay_carries_every_size_over_its_three_hops(tmp_path: Path) -> None:
    """The physical floor runs where a compiler is (CI's machine has one): a message of
    several fragments makes every round trip, else the pinger would block and time out."""
    if crelay.build(str(tmp_path))[0] is None:
        pytest.skip("no C compiler: the C floor is reported as skipped")
    placement = place("none", 2, sorted(os.sched_getaffinity(0)))
    result = crelay.measure([8, 10_000, 65536], 30, placement, str(tmp_path))
    assert result["compiler"]
    for size, rounds in (("8", 30), ("10000", 50), ("65536", 50)):  # at least 50 above 4 KiB
        assert len(result["samples_us"][size]) == rounds
        assert result["latency_us"][size] > 0


def test_without_a_compiler_the_c_relay_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CC", "no-such-compiler-here")
    assert crelay.measure([8], 10, [], str(tmp_path)) == {
        "skipped": "no C compiler (no-such-compiler-here not found)"
    }
