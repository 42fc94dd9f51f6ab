"""NIC events in traces: facts the cores note only while tracing, retransmissions and their
causes found at merge, reasons of control packets, MPI calls with communicator and algorithm."""

from __future__ import annotations

from typing import Any

from emutrace import chrome, mpihooks, recorder
from emutrace.kinds import (
    F_DROP,
    F_DUP,
    K_FAULT,
    K_MCAST_FWD,
    K_MPI_ENTER,
    K_PKT_RECV,
    K_PKT_SEND,
    K_TIMER,
    MPI_CALLS,
    NACK_REASONS,
)
from nicd.config import FaultConfig, NicConfig
from nicd.core.nic import NicCore
from nicd.link import wire
from nicd.link.faults import FaultPlan
from nicd.mcast.engine import GroupSpec, McastEngine


def _data(seq: int, src: int = 0, dst: int = 1) -> bytes:
    flags = wire.FragFlags.FIRST | wire.FragFlags.LAST
    packet = wire.DataPacket(wire.MsgType.MPI_EAGER, flags, 7, seq, src, 2, dst, 3, 5, 0, b"hello")
    return wire.encode_data(packet)


def _nack(seq: int, reason: wire.NackReason) -> bytes:
    return wire.encode_control(wire.ControlPacket(wire.MsgType.NACK, seq, 1, 0, 2, 3, reason))


def test_the_nack_reason_names_match_the_wire() -> None:
    assert {r.value: r.name for r in wire.NackReason} == NACK_REASONS
    assert {k.value: k.name for k in wire.McastAckKind} == chrome._MCAST_ACK_KINDS


def test_the_fault_plan_notes_each_fault_only_while_tracing() -> None:
    datagram = _data(5)
    plan: FaultPlan[str] = FaultPlan(FaultConfig(loss=1.0))
    assert plan.on_send("a", datagram, now=0.0) == []  # tracing off: nothing noted anywhere
    plan.trace = []
    assert plan.on_send("a", datagram, now=0.0) == []
    assert plan.trace == [(K_FAULT, F_DROP, datagram)]
    dup: FaultPlan[str] = FaultPlan(FaultConfig(dup=1.0))
    dup.trace = []
    assert len(dup.on_send("a", datagram, now=0.0)) == 2
    assert dup.trace == [(K_FAULT, F_DUP, datagram)]


def test_the_recorder_decodes_the_datagram_a_fact_ends_in() -> None:
    rec = recorder.Recorder("nic", 0)
    facts: recorder.Facts = [(K_FAULT, F_DROP, _data(9)), (K_MCAST_FWD, 4, 2, 7, 0, 1)]
    rec.emit_facts(facts)
    assert facts == []
    assert [e[1:] for e in rec.ring] == [
        (K_FAULT, F_DROP, 3, 3, 9, 0, 2, 1, 3, len(_data(9))),
        (K_MCAST_FWD, 4, 2, 7, 0, 1),
    ]
    assert rec.emitted == 2


def test_trace_on_gives_every_core_the_same_list() -> None:
    core = NicCore(NicConfig(node_id=0, run_dir="/nonexistent"))
    assert core.faults.trace is None
    assert core.mcast.engine.trace is None
    facts = core.trace_on()
    assert core.faults.trace is facts
    assert core.mcast.engine.trace is facts
    assert core.grim.trace is facts
    assert core.nicvm is None or core.nicvm.trace is facts


def test_a_multicast_notes_one_send_per_child_while_tracing() -> None:
    engine = McastEngine(node_id=0)
    engine.trace = []
    engine.create_group(GroupSpec(9, 0, None, (1, 2, 3), 2))
    engine.multicast(9, b"x" * 10, handle=1, now=0.0)
    assert engine.trace == [(K_MCAST_FWD, 9, child, 0, 0, 1) for child in (1, 2, 3)]
    quiet = McastEngine(node_id=0)
    quiet.create_group(GroupSpec(9, 0, None, (1,), 2))
    assert quiet.multicast(9, b"x", handle=1, now=0.0)  # sends, notes nothing: trace is None


def _resend_recording() -> dict[str, Any]:
    nic = recorder.Recorder("nic", 0)
    nic.emit_packet(K_PKT_SEND, _data(0))
    nic.emit_facts([(K_FAULT, F_DROP, _data(1))])  # lost on the wire
    nic.emit_packet(K_PKT_SEND, _data(2))
    nic.emit_packet(K_PKT_RECV, _nack(1, wire.NackReason.GAP))
    nic.emit_packet(K_PKT_SEND, _data(1))  # go back N: 1 and 2 again
    nic.emit_packet(K_PKT_SEND, _data(2))
    nic.emit(K_TIMER)
    nic.emit_packet(K_PKT_SEND, _data(2))  # timeout
    nic.emit_facts([(K_FAULT, F_DUP, _data(3))])
    nic.emit_packet(K_PKT_SEND, _data(3))  # a first send and the plan's copy: no resend
    nic.emit_packet(K_PKT_SEND, _data(3))
    return nic.snapshot()


def test_each_resend_is_found_with_its_cause() -> None:
    events = chrome.to_chrome([_resend_recording()])["traceEvents"]
    resends = [e["args"] for e in events if e["name"] == "retransmit"]
    assert [(a["seq"], a["cause"]) for a in resends] == [(1, "NACK"), (2, "NACK"), (2, "timer")]
    assert (resends[0]["cause_seq"], resends[0]["cause_reason"]) == (1, "GAP")
    assert resends[0]["cause_from"] == 1
    assert {a["type"] for a in resends} == {"MPI_EAGER"}
    (nack,) = [e for e in events if e["name"] == "pkt recv"]
    assert (nack["args"]["type"], nack["args"]["reason"]) == ("NACK", "GAP")
    (drop,) = [e for e in events if e["name"] == "fault drop"]
    assert (drop["args"]["seq"], drop["args"]["type"]) == (1, "MPI_EAGER")
    assert [e["name"] for e in events].count("fault dup") == 1
    causes = {e["id"]: e for e in events if e.get("cat") == "cause" and e["ph"] == "s"}
    ends = [e for e in events if e.get("cat") == "cause" and e["ph"] == "f"]
    resend_ts = [e["ts"] for e in events if e["name"] == "retransmit"]
    timer_ts = next(e["ts"] for e in events if e["name"] == "timer")
    assert [e["ts"] for e in ends] == resend_ts  # an arrow to each resend, from its cause
    assert [causes[e["id"]]["ts"] for e in ends] == [nack["ts"], nack["ts"], timer_ts]


def test_a_lost_resend_is_a_resend() -> None:
    nic = recorder.Recorder("nic", 0)
    nic.emit_packet(K_PKT_SEND, _data(0))
    nic.emit(K_TIMER)
    nic.emit_facts([(K_FAULT, F_DROP, _data(0))])
    (resend,) = [e for e in chrome.to_chrome([nic.snapshot()])["traceEvents"]
                 if e["name"] == "retransmit"]  # fmt: skip
    assert (resend["args"]["cause"], resend["args"]["lost"]) == ("timer", 1)


class _Comm:
    def Bcast(self, buf: Any, root: int = 0, *, algorithm: str | None = None) -> None:
        pass


def test_an_mpi_call_names_its_communicator_and_algorithm() -> None:
    rec = recorder.Recorder("host", 0)
    code = MPI_CALLS.index("Bcast")
    asked = []

    def describe(comm: Any, call: str, algorithm: Any) -> tuple[int, str]:
        asked.append((type(comm), call, algorithm))
        return 6, algorithm or "binomial"

    traced = mpihooks._wrap(rec, code, _Comm.Bcast, describe)
    traced(_Comm(), bytearray(8), 0, algorithm="nic-mcast")
    traced(_Comm(), bytearray(4))
    assert asked == [(_Comm, "Bcast", "nic-mcast"), (_Comm, "Bcast", None)]
    enters = [e[1:] for e in rec.ring if e[1] == K_MPI_ENTER]
    assert enters == [(K_MPI_ENTER, code, 0, -1, 8, 6, "nic-mcast"),
                      (K_MPI_ENTER, code, 0, -1, 4, 6, "binomial")]  # fmt: skip
    calls = [e for e in chrome.to_chrome([rec.snapshot()])["traceEvents"] if e["ph"] == "X"]
    assert [(c["name"], c["args"]["algorithm"], c["args"]["comm"]) for c in calls] == [
        ("Bcast", "nic-mcast", 6),
        ("Bcast", "binomial", 6),
    ]


def test_a_describe_that_raises_leaves_the_call_alone() -> None:
    rec = recorder.Recorder("host", 0)

    def broken(comm: Any, call: str, algorithm: Any) -> tuple[int, str]:
        raise ValueError("no such algorithm")

    mpihooks._wrap(rec, MPI_CALLS.index("Bcast"), _Comm.Bcast, broken)(_Comm(), bytearray(1))
    assert [e[-2:] for e in rec.ring if e[1] == K_MPI_ENTER] == [(-1, "?")]


def test_a_receipt_stamped_before_its_send_still_gets_its_arrow() -> None:
    """nicd stamps a send after sendto returns; a busy machine can run the receiver first."""
    receiver, sender = recorder.Recorder("nic", 1), recorder.Recorder("nic", 0)
    receiver.emit_packet(K_PKT_RECV, _data(0))
    sender.emit_packet(K_PKT_SEND, _data(0))
    events = chrome.to_chrome([receiver.snapshot(), sender.snapshot()])["traceEvents"]
    flows = sorted((e["ph"], e["pid"]) for e in events if e["ph"] in "sf")
    assert flows == [("f", 1), ("s", 0)]


def test_a_packet_event_too_short_is_skipped_not_a_crash() -> None:
    rec = recorder.Recorder("nic", 0).snapshot()
    rec["events"] = [[1, K_PKT_RECV, 11], [2, K_FAULT, F_DROP], [3, K_PKT_SEND]]
    events = chrome.to_chrome([rec])["traceEvents"]
    assert [e for e in events if e["ph"] != "M"] == []
