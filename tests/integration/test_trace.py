"""emurun --trace on real jobs: valid Chrome trace JSON that agrees with the stats counters,
flows for every delivered packet, unchanged results, and each resend after its cause."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections import Counter
from typing import TYPE_CHECKING

import pytest

from emutrace.chrome import HOST_TID, NIC_TID
from emutrace.schema import check_trace
from tests.integration.grim_test_helpers import GRIM
from tests.integration.mpirun import PROGRAMS, ROOT, mpirun

if TYPE_CHECKING:
    from pathlib import Path

NACK, ACK, SACK, MCAST_ACK = 11, 10, 22, 13
CONTROL = {ACK, NACK, SACK, MCAST_ACK}


def _traced(
    tmp_path: Path, nodes: int, program: str | Path, *extra: str, args: tuple[str, ...] = ()
) -> tuple[dict, Path]:
    trace_dir = tmp_path / "trace"
    stats_dir = tmp_path / "stats"
    options = ("--trace", str(trace_dir), "--stats", str(stats_dir), *extra)
    result = mpirun(nodes, PROGRAMS / program, *args, emurun_args=options, timeout=240)
    assert result.code == 0, result.err
    with open(trace_dir / "trace.json", encoding="utf-8") as f:
        return json.load(f), stats_dir


def _packets(trace: dict, name: str) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] == name]


def test_trace_is_valid_and_reconciles_with_the_stats(tmp_path: Path) -> None:
    trace, stats_dir = _traced(tmp_path, 3, "p2p_suite.py")
    assert check_trace(trace) == []
    sends, recvs = _packets(trace, "pkt send"), _packets(trace, "pkt recv")
    assert sends
    for node in range(3):
        stats = json.loads((stats_dir / f"nic{node}.json").read_text())
        assert sum(e["pid"] == node for e in sends) == stats["link"]["datagrams_out"]
        assert sum(e["pid"] == node for e in recvs) == stats["link"]["datagrams_in"]
    # per link: every datagram a NIC sent to another was read there (loopback, no faults)
    sent = Counter((e["pid"], e["args"]["dst"]) for e in sends)
    read = Counter((e["args"]["src"], e["pid"]) for e in recvs)
    assert sent == read
    # every delivered packet has one flow arrow from its send
    flows = [e for e in trace["traceEvents"] if e["ph"] in "sf" and e["cat"] == "flow"]
    assert sum(e["ph"] == "f" for e in flows) == len(recvs)
    assert trace["otherData"]["dropped"]
    assert not any(trace["otherData"]["dropped"].values())


def test_host_side_events_are_recorded(tmp_path: Path) -> None:
    """Blocking waits sleep in select; host records cross the PCI socket both ways."""
    trace_dir = tmp_path / "trace"
    options = ("--trace", str(trace_dir), "-x", "EMU_WAIT=block")
    result = mpirun(2, PROGRAMS / "p2p_suite.py", emurun_args=options)
    assert result.code == 0, result.err
    events = json.loads((trace_dir / "trace.json").read_text())["traceEvents"]
    names = Counter((e["name"], e["tid"]) for e in events if e["ph"] in ("X", "i"))
    assert names["wait sleep", HOST_TID] > 0
    assert names["host record in", NIC_TID] > 0
    assert names["host record out", NIC_TID] > 0
    assert names["Send", HOST_TID] > 0


def test_traced_and_untraced_runs_give_the_same_results(tmp_path: Path) -> None:
    for program, prefix in (("p2p_suite.py", "p2p ok"), ("coll_suite.py", "coll ok")):
        plain = mpirun(3, PROGRAMS / program)
        traced = mpirun(3, PROGRAMS / program, emurun_args=("--trace", str(tmp_path / program)))
        assert plain.code == traced.code == 0, traced.err
        assert traced.lines(prefix) == plain.lines(prefix) != []
        assert (tmp_path / program / "trace.json").exists()


def test_each_resend_follows_its_cause_under_loss(tmp_path: Path) -> None:
    trace, stats_dir = _traced(tmp_path, 2, "p2p_suite.py", "--loss", "0.1", "--fault-seed", "7")
    assert check_trace(trace) == []
    dropped = sum(json.loads((stats_dir / f"nic{n}.json").read_text())["faults"]["dropped"]
                  for n in range(2))  # fmt: skip
    assert dropped > 0
    events = sorted((e for e in trace["traceEvents"] if e["ph"] in ("X", "i")),
                    key=lambda e: e["ts"])  # fmt: skip
    first_send: dict[tuple, float] = {}
    resends = 0
    for e in events:
        if e["name"] != "pkt send" or e["args"]["mtype"] in CONTROL:
            continue
        a = e["args"]
        key = (a["mtype"], a["seq"], a["src"], a["src_port"], a["dst"], a["dst_port"])
        if key not in first_send:
            first_send[key] = e["ts"]
            continue
        resends += 1
        since = first_send[key]
        causes = [c for c in events if since <= c["ts"] <= e["ts"] and c["pid"] == e["pid"] and (
            c["name"] == "timer" or (c["name"] == "pkt recv" and c["args"]["mtype"] in (NACK, SACK)
                                     and c["args"]["src"] == a["dst"]))]  # fmt: skip
        assert causes, f"resend of {key} at {e['ts']} us has no timeout or NACK before it"
    assert resends > 0


def _stats(stats_dir: Path, node: int) -> dict:
    return json.loads((stats_dir / f"nic{node}.json").read_text())


def _named(trace: dict, name: str) -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("name") == name]


FAULT_COUNTERS = {"drop": "dropped", "dup": "duplicated", "reorder": "reordered"}


@pytest.mark.parametrize(
    "faults", [("--loss", "0.1"), ("--loss", "0.05", "--dup", "0.05", "--reorder", "0.05")]
)
def test_retransmit_events_name_their_cause_and_match_the_counters(
    tmp_path: Path, faults: tuple[str, ...]
) -> None:
    """(A corrupted header can make a copy look like another packet: --corrupt is left out.)"""
    trace, stats_dir = _traced(tmp_path, 2, "p2p_suite.py", *faults, "--fault-seed", "3")
    assert check_trace(trace) == []
    resends = _named(trace, "retransmit")
    for node in range(2):
        stats = _stats(stats_dir, node)
        assert sum(e["pid"] == node for e in resends) == stats["transport"]["retransmissions"]
        for fault, counter in FAULT_COUNTERS.items():
            noted = sum(e["pid"] == node for e in _named(trace, f"fault {fault}"))
            assert noted == stats["faults"][counter]
        assert stats["faults"]["dropped"] > 0
    causes = Counter(e["args"]["cause"] for e in resends)
    assert causes["timer"] > 0
    assert causes["NACK"] > 0
    events = sorted((e for e in trace["traceEvents"] if e["ph"] in ("X", "i")),
                    key=lambda e: (e["ts"], e["ph"] == "i"))  # fmt: skip
    for i, e in enumerate(events):
        if e["name"] != "retransmit" or e["args"]["cause"] != "NACK":
            continue
        a = e["args"]
        before = [c for c in events[:i] if c["pid"] == e["pid"] and c["name"] == "pkt recv"]
        assert before, e
        nack = before[-1]["args"]  # the last packet the NIC read before this resend
        assert (nack["type"], nack["seq"], nack["src"]) == ("NACK", a["cause_seq"], a["cause_from"])
        assert nack["reason"] == a["cause_reason"]


def test_nic_multicast_notes_a_send_for_every_child_packet(tmp_path: Path) -> None:
    options = ("--bcast", "nic-mcast", "-x", "EMU_MCAST_TREE=binomial")  # 2 forwards to 3
    trace, stats_dir = _traced(tmp_path, 5, "mcast_bcast.py", *options, args=("5", "3"))
    assert check_trace(trace) == []
    noted = Counter()
    for name in ("mcast send", "mcast forward"):
        noted.update((e["pid"], e["args"]["child"], e["args"]["seq"]) for e in _named(trace, name))
    data = [e["args"] | {"pid": e["pid"]} for e in _packets(trace, "pkt send")]
    sent = Counter((a["pid"], a["dst"], a["seq"]) for a in data if a["type"] == "MCAST_DATA")
    assert noted == sent != Counter()  # no faults: each noted send is one datagram
    forwarders = {e["pid"] for e in _named(trace, "mcast forward")}
    assert forwarders  # 5 nodes: some non-root NIC forwarded
    for node in forwarders:
        assert _stats(stats_dir, node)["mcast"]["forwarded"] > 0
    bcasts = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] == "Bcast"]
    assert bcasts
    assert {e["args"]["algorithm"] for e in bcasts} == {"nic-mcast"}


def test_nicvm_module_runs_are_events(tmp_path: Path) -> None:
    trace, stats_dir = _traced(tmp_path, 3, "nicvm_suite.py")
    assert check_trace(trace) == []
    runs = _named(trace, "nicvm run")
    for node in range(3):
        mine = [e["args"] for e in runs if e["pid"] == node]
        assert any(a["outcome"] == "ok" and a["sends"] > 0 and a["fuel_used"] > 0 for a in mine)
        stopped = sum(a["outcome"] == "out_of_fuel" for a in mine)
        assert stopped == _stats(stats_dir, node)["nicvm"]["counters"]["out_of_fuel"] > 0
    bcasts = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] in ("Bcast", "bcast")]
    assert {e["args"]["algorithm"] for e in bcasts} == {"nicvm"}


def test_rm_operations_are_events(tmp_path: Path) -> None:
    trace, stats_dir = _traced(tmp_path, 2, GRIM / "rmcheck.py", args=("11", "60"))
    assert check_trace(trace) == []
    ops = Counter((e["pid"], e["args"]["op"]) for e in _named(trace, "rm op"))
    counts = _stats(stats_dir, 1)["grim"]["counts"]
    assert ops[1, "RM_WRITE_V"] == counts["rm_v_writes"] > 0
    assert ops[1, "RM_WRITE_P"] == counts["rm_p_writes"] > 0
    assert ops[1, "RM_READ"] == counts["rm_reads_served"] > 0
    placed = _stats(stats_dir, 0)["grim"]["counts"]["rm_read_replies_placed"]
    assert ops[0, "RM_READ_REPLY"] >= placed > 0  # write statuses come back as replies too
    # translation misses refuse with NACK NO_BUFFER; the NIC's RESUME brings the resends
    reasons = Counter(e["args"].get("reason") for e in _packets(trace, "pkt recv"))
    assert reasons["NO_BUFFER"] > 0
    assert reasons["RESUME"] > 0
    causes = Counter((e["args"]["cause"], e["args"].get("cause_reason"))
                     for e in _named(trace, "retransmit"))  # fmt: skip
    assert causes["NACK", "RESUME"] > 0


def test_the_broadcast_picture_measures_one_broadcast_per_algorithm(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    argv = [sys.executable, "-m", "emubench", "trace", "picture", "--nodes", "4",
            "--skew-us", "50", "--out-dir", str(out), "--work-dir", str(work)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "trace_bcast.json").read_text())
    assert sorted(doc["broadcasts"]) == ["binomial", "nic-mcast"]
    for algorithm, n in doc["broadcasts"].items():
        assert n["algorithm"] == [algorithm]
        assert sorted(n["calls_us"]) == ["0", "1", "2", "3"]
        assert n["calls_us"]["0"] == 0.0
        assert n["duration_us"] == max(n["returns_us"].values()) > 0
    assert doc["broadcasts"]["nic-mcast"]["mcast_sends"] >= 3  # one per child at least
    assert doc["skews_us"]["0"] == 0.0
    if importlib.util.find_spec("matplotlib") is not None:  # the bench extra
        assert (out / "trace_bcast.png").stat().st_size > 0
