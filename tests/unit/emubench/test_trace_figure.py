"""The broadcast picture of docs/results.md: the measured broadcast is the job's last Bcast,
timed from the root's call to the last return; its view keeps nothing of the calls around it."""

from __future__ import annotations

from typing import Any

from emubench.trace_figure import broadcast_view, one_broadcast, rank_skew_us


def _x(name: str, pid: int, tid: int, ts: float, dur: float) -> dict[str, Any]:
    return {"name": name, "ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def _trace() -> dict[str, Any]:
    return {"traceEvents": [
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "node 0"}},
        _x("Bcast", 0, 1, 10.0, 5.0),  # a warm-up broadcast
        _x("Bcast", 1, 1, 11.0, 6.0),
        _x("pkt send", 0, 2, 12.0, 1.0),  # the warm-up's packet: before the window
        _x("Bcast", 0, 1, 100.0, 20.0),  # the measured one: root calls at 100
        _x("Bcast", 1, 1, 95.0, 60.0),  # node 1 called first, returned at 155
        _x("wait sleep", 1, 1, 120.0, 10.0),
        _x("pkt send", 0, 2, 101.0, 1.0),
        _x("Barrier", 0, 1, 121.0, 50.0),  # after the broadcast: not drawn
        _x("pkt send", 0, 2, 160.0, 1.0),  # the barrier's packet: after its end
    ]}  # fmt: skip


def test_the_measured_broadcast_is_the_last_one_from_the_root_call_to_the_last_return() -> None:
    n = one_broadcast(_trace())
    assert n["t0_us"] == 100.0
    assert n["calls_us"] == {0: 0.0, 1: -5.0}
    assert n["returns_us"] == {0: 20.0, 1: 55.0}
    assert (n["duration_us"], n["last_call_us"], n["root_us"]) == (55.0, 0.0, 20.0)
    assert n["packets_sent"] == 1


def test_the_view_holds_that_broadcast_only() -> None:
    view = broadcast_view(_trace(), one_broadcast(_trace()))
    kept = [(e["name"], e["pid"], e["ts"]) for e in view["traceEvents"] if "ts" in e]
    assert kept == [("Bcast", 0, 0.0), ("Bcast", 1, -5.0), ("wait sleep", 1, 20.0),
                    ("pkt send", 0, 1.0)]  # fmt: skip
    assert view["traceEvents"][0]["ph"] == "M"


def test_the_skews_are_seeded_per_rank_and_the_root_does_not_wait() -> None:
    skews = [rank_skew_us(1, r, 100.0) for r in range(16)]
    assert skews[0] == 0.0
    assert all(0.0 <= s <= 200.0 for s in skews)
    assert skews == [rank_skew_us(1, r, 100.0) for r in range(16)]
    assert skews != [rank_skew_us(2, r, 100.0) for r in range(16)]
