"""`emubench soak`, short: 4 real nicds with loss, duplication, reordering and corruption,
hosts stopped and resumed, one nicd killed; every message is delivered exactly once in order
or its sender got an error, and nothing is left (the long run is `emubench soak`)."""

from __future__ import annotations

import pytest

from emubench.soak import run_soak
from nicd.config import FaultConfig

pytestmark = pytest.mark.slow


def test_a_short_soak_loses_nothing_silently() -> None:
    faults = FaultConfig(loss=0.05, dup=0.02, reorder=0.02, corrupt=0.01, seed=5)
    report = run_soak(4, 25.0, faults, kill=True, seed=5, nicd_args=[])
    print(report)
    assert report["violations"] == [], report
    assert report["silent_losses"] == []
    assert report["messages_sent"] > 100
    assert report["killed"]["node"] == 3
    assert set(report["failures_by_reason"]) == {"peer_dead"}, report
    assert report["host_stops"] > 0
    for fault in ("dropped", "duplicated", "reordered", "corrupted"):
        assert report["injected"][fault] > 0, report
