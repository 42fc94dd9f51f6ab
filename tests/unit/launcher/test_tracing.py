"""Multi-host traces: the clock offset from ping samples, the sink of shipped pieces, the
agent's pieces, and the merge putting each host's recordings on emurun's clock."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import pytest

from emutrace import merge, recorder
from emutrace.kinds import K_TIMER
from launcher import cli, tracing
from launcher.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from launcher.plan import LaunchPlan


def plan_from_argv(argv: list[str]) -> LaunchPlan:
    return cli.plan_from_argv(argv, os.environ)


def test_the_offset_comes_from_the_sample_with_the_smallest_round_trip() -> None:
    # (sent, agent clock, received) on our clock; the agent runs 1000 ns ahead
    samples = [(0, 1900, 2000), (5000, 6100, 5200), (9000, 10500, 9600)]
    assert tracing.offset_from_samples(samples) == (1000, 200)
    with pytest.raises(ValueError, match="no clock samples"):
        tracing.offset_from_samples([])


def test_the_sink_writes_pieces_in_place_and_refuses_what_is_not_a_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = tracing.TraceSink(str(tmp_path))
    assert sink.write("h1", "nic3-77.trace.msgpack", 4, b"5678")
    assert sink.write("h1", "nic3-77.trace.msgpack", 0, b"1234")
    assert (tmp_path / "h1" / "nic3-77.trace.msgpack").read_bytes() == b"12345678"
    refused = [("h1", "../x.trace.msgpack"), ("h1", "job.json"), ("..", "nic1-1.trace.msgpack"),
               ("a/b", "nic1-1.trace.msgpack")]  # fmt: skip
    for host, name in refused:
        assert not sink.write(host, name, 0, b"x")
    assert sink.dropped == 4
    monkeypatch.setattr(tracing, "MAX_HOST_BYTES", 10)
    assert not sink.write("h1", "host3-78.trace.msgpack", 0, b"abc")  # 8 + 3 > 10
    assert sink.dropped == 5
    assert sorted(os.listdir(tmp_path)) == ["h1"]


def test_a_host_folder_is_one_safe_path_component() -> None:
    assert tracing.host_folder(0, "h0") == "0-h0"
    assert tracing.host_folder(3, "fe80::1%eth0") == "3-fe80__1_eth0"
    assert tracing.host_folder(1, "[::1]") == "1-___1_"


def test_the_agent_ships_every_recording_in_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tracing, "CHUNK_BYTES", 3)
    (tmp_path / "nic0-5.trace.msgpack").write_bytes(b"abcdefg")
    (tmp_path / "nic0-5.trace.msgpack.tmp").write_bytes(b"half")
    assert list(tracing.trace_chunks(str(tmp_path))) == [
        ("nic0-5.trace.msgpack", 0, b"abc"),
        ("nic0-5.trace.msgpack", 3, b"def"),
        ("nic0-5.trace.msgpack", 6, b"g"),
    ]
    assert list(tracing.trace_chunks(str(tmp_path / "none"))) == []


def test_the_merge_puts_each_host_on_emurun_clock_and_says_so(tmp_path: Path) -> None:
    for host, node in (("h0", 0), ("h1", 1)):
        rec = recorder.Recorder("nic", node)
        rec.emit(K_TIMER)
        rec.ring[0] = (5_000_000 + 1000 * node, K_TIMER)  # h1's clock reads 1 ms + 1 us ahead
        rec.flush(str(tmp_path / host))
    hosts = {"h0": {"offset_ns": 0, "rtt_ns": 10}, "h1": {"offset_ns": 1_000_000, "rtt_ns": 10}}
    tracing.write_clocks(str(tmp_path), hosts)
    trace = merge.merge_dir(str(tmp_path), png=False)
    timers = {e["pid"]: e["ts"] for e in trace["traceEvents"] if e.get("name") == "timer"}
    assert timers == {0: 999.0, 1: 0.0}  # us after the earliest event: h1's came first
    assert trace["otherData"]["host_clocks"] == hosts
    assert json.loads((tmp_path / "trace.json").read_text())["otherData"]["clock"].startswith(
        "CLOCK_MONOTONIC of emurun"
    )


def test_emurun_trace_arms_the_children_and_merges_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(recorder.ENV_TRACE_DIR, "")  # restored (removed) after the test
    seen = []

    def job() -> int:
        seen.append(os.environ.get(recorder.ENV_TRACE_DIR))
        recorder.Recorder("nic", 0).flush(seen[0] or "")
        return 3

    plan = plan_from_argv(["-np", "1", "--trace", str(tmp_path), "--trace-window", "0:1", "true"])
    assert plan.trace_window == (0.0, 1.0)
    assert tracing.traced_job(plan, job) == 3
    assert seen == [str(tmp_path)]
    assert os.path.exists(os.path.join(tmp_path, "trace.json"))
    assert tracing.traced_job(plan_from_argv(["-np", "1", "true"]), lambda: 5) == 5


def test_across_hosts_the_children_are_not_pointed_at_the_trace_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(recorder.ENV_TRACE_DIR, "")
    argv = ["-np", "2", "--host", "a,b", "--trace", str(tmp_path / "t"), "prog"]
    plan = plan_from_argv(argv)
    assert tracing.traced_job(plan, lambda: os.environ[recorder.ENV_TRACE_DIR] == "") is True
    assert os.path.exists(tmp_path / "t" / "trace.json")


def test_a_bad_trace_window_is_a_usage_error_only_with_trace(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--trace-window"):
        plan_from_argv(["-np", "1", "--trace", str(tmp_path), "--trace-window", "2:1", "true"])
    assert plan_from_argv(["-np", "1", "--trace-window", "2:1", "true"]).trace_dir is None
