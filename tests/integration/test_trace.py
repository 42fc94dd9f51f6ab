"""emurun --trace on real jobs: valid Chrome trace JSON that agrees with the stats counters,
flows for every delivered packet, unchanged results, and each resend after its cause."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING

from emutrace.chrome import HOST_TID, NIC_TID
from emutrace.schema import check_trace
from tests.integration.mpirun import PROGRAMS, mpirun

if TYPE_CHECKING:
    from pathlib import Path

NACK, ACK, SACK, MCAST_ACK = 11, 10, 22, 13
CONTROL = {ACK, NACK, SACK, MCAST_ACK}


def _traced(tmp_path: Path, nodes: int, program: str, *extra: str) -> tuple[dict, Path]:
    trace_dir = tmp_path / "trace"
    stats_dir = tmp_path / "stats"
    options = ("--trace", str(trace_dir), "--stats", str(stats_dir), *extra)
    result = mpirun(nodes, PROGRAMS / program, emurun_args=options)
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
    flows = [e for e in trace["traceEvents"] if e["ph"] in "sf"]
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
