"""The trace recorder's ring, the merge into Chrome trace JSON and its format check."""

from __future__ import annotations

import json
import os

import msgpack
import pytest

from emutrace import chrome, merge, recorder, schema
from emutrace.kinds import K_MPI_ENTER, K_MPI_EXIT, K_PKT_RECV, K_PKT_SEND, K_WAIT_SLEEP, MSG_TYPES
from nicd.link import wire


def _data(seq: int, src: int = 0, dst: int = 1, route: bytes = b"", *,
          established: bool = False) -> bytes:  # fmt: skip
    return wire.encode_data(
        wire.DataPacket(
            wire.MsgType.MPI_EAGER,
            wire.FragFlags.FIRST | wire.FragFlags.LAST,
            7,
            seq,
            src,
            2,
            dst,
            3,
            5,
            0,
            b"hello",
            route=route,
        ),
        established=established,
    )


def test_ring_is_bounded_and_counts_what_it_drops() -> None:
    rec = recorder.Recorder("nic", 0, capacity=4)
    for i in range(10):
        rec.emit(K_MPI_EXIT, i)
    assert len(rec.ring) == 4
    assert rec.dropped == 6
    assert [e[2] for e in rec.ring] == [6, 7, 8, 9]


def test_packet_fields_reads_data_and_control_headers() -> None:
    assert recorder.packet_fields(_data(41, route=b"\x01\x02")) == (3, 3, 41, 0, 2, 1, 3)
    ack = wire.encode_control(wire.ControlPacket(wire.MsgType.ACK, 42, 1, 2, 0, 3))
    assert recorder.packet_fields(ack) == (10, 0, 42, 1, 0, 2, 3)
    assert recorder.packet_fields(b"\x05ab") == (0, 0, 0, 0, 0, 0, 0)  # malformed: zeros


@pytest.mark.parametrize("mtype", sorted(wire.CONTROL_TYPES))
def test_every_control_packet_is_read_with_the_control_header(mtype: wire.MsgType) -> None:
    """PING and PONG too (they were read as data headers: a wrong seq and nodes)."""
    packet = wire.encode_control(wire.ControlPacket(mtype, 42, 1, 2, 0, 3))
    assert recorder.packet_fields(packet) == (int(mtype), 0, 42, 1, 0, 2, 3)


def test_flush_writes_one_msgpack_file(tmp_path: str) -> None:
    rec = recorder.Recorder("host", 3)
    rec.emit(K_MPI_ENTER, 1, 2, 3, 4)
    path = rec.flush(str(tmp_path))
    with open(path, "rb") as f:
        got = msgpack.unpackb(f.read())
    assert (got["role"], got["node"], got["dropped"]) == ("host", 3, 0)
    assert got["events"][0][1:] == [K_MPI_ENTER, 1, 2, 3, 4]


def test_start_from_env_is_off_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder, "tracer", None)
    assert recorder.start_from_env("nic", 0, {}) is None
    assert recorder.tracer is None


def _recordings() -> list[dict[str, object]]:
    sender, receiver = recorder.Recorder("nic", 0), recorder.Recorder("nic", 1)
    host = recorder.Recorder("host", 0)
    host.emit(K_MPI_ENTER, 0, 1, 0, 5)
    sender.emit_packet(K_PKT_SEND, _data(0))
    sender.emit_packet(K_PKT_SEND, _data(1))  # lost
    sender.emit_packet(K_PKT_SEND, _data(1))  # the resend
    receiver.emit_packet(K_PKT_RECV, _data(0))
    receiver.emit_packet(K_PKT_RECV, _data(1))
    host.emit(K_MPI_EXIT, 0)
    return [r.snapshot() for r in (sender, receiver, host)]


def test_flows_pair_each_receipt_with_its_latest_send() -> None:
    trace = chrome.to_chrome(_recordings())
    assert schema.check_trace(trace) == []
    ev = trace["traceEvents"]
    sends = [e for e in ev if e["ph"] == "X" and e["name"] == "pkt send"]
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    finishes = [e for e in ev if e["ph"] == "f"]
    assert len(finishes) == 2
    assert set(starts) == {e["id"] for e in finishes}
    assert starts[finishes[1]["id"]]["ts"] == sends[2]["ts"]  # from the resend
    assert all(f["pid"] == 1 and starts[f["id"]]["pid"] == 0 for f in finishes)
    assert {s["args"]["type"] for s in sends} == {"MPI_EAGER"}
    calls = [e for e in ev if e["ph"] == "X" and e["tid"] == chrome.HOST_TID]
    assert [c["name"] for c in calls] == ["Send"]
    assert calls[0]["args"]["nbytes"] == 5


def test_a_resend_marked_established_is_still_a_retransmission() -> None:
    """An ACK of the stream's epoch between the first copy and the resend sets ESTABLISHED on
    the resend: the same packet, counted once as a retransmission (as the transport counts)."""
    sender, receiver = recorder.Recorder("nic", 0), recorder.Recorder("nic", 1)
    sender.emit_packet(K_PKT_SEND, _data(0))
    sender.emit_packet(K_PKT_SEND, _data(1))  # lost
    receiver.emit_packet(K_PKT_RECV, _data(0))
    sender.emit_packet(K_PKT_SEND, _data(1, established=True))  # the resend, after the ACK
    trace = chrome.to_chrome([r.snapshot() for r in (sender, receiver)])
    resends = [e for e in trace["traceEvents"] if e["name"] == "retransmit"]
    assert [(e["pid"], e["args"]["seq"]) for e in resends] == [(0, 1)]


def test_check_trace_names_each_missing_field() -> None:
    bad = {"traceEvents": [{"ph": "X", "pid": 0, "tid": 1, "ts": 0}, {"ph": "s", "id": 1}]}
    problems = schema.check_trace(bad)
    assert "event 0 (X): no dur" in problems
    assert "event 0 (X): no name" in problems
    assert any(p.startswith("flow 1:") for p in problems)
    assert schema.check_trace([]) == ["not an object with a traceEvents list"]


def test_merge_dir_writes_valid_json_and_skips_garbage(tmp_path: str) -> None:
    for rec in _recordings():
        name = f"{rec['role']}{rec['node']}-1{recorder.FILE_SUFFIX}"
        with open(os.path.join(tmp_path, name), "wb") as f:
            f.write(msgpack.packb(rec))
    with open(os.path.join(tmp_path, "junk" + recorder.FILE_SUFFIX), "wb") as f:
        f.write(b"\xc1 not msgpack")
    assert merge.main([str(tmp_path), "--no-png"]) == 0
    with open(os.path.join(tmp_path, "trace.json"), encoding="utf-8") as f:
        trace = json.load(f)
    assert schema.check_trace(trace) == []
    assert sum(e["ph"] == "f" for e in trace["traceEvents"]) == 2


def test_parse_window() -> None:
    assert merge.parse_window("1:2.5") == (1.0, 2.5)
    for bad in ("3", "2:1", "x:1"):
        with pytest.raises(ValueError, match="window"):
            merge.parse_window(bad)


def test_a_wait_sleep_becomes_a_slice_ending_at_the_wake_up() -> None:
    host = recorder.Recorder("host", 2)
    host.emit(K_WAIT_SLEEP, 3000)  # slept 3 us
    (sleep,) = [e for e in chrome.to_chrome([host.snapshot()])["traceEvents"] if e["ph"] == "X"]
    assert (sleep["name"], sleep["ts"], sleep["dur"], sleep["pid"]) == ("wait sleep", -3.0, 3.0, 2)


def test_the_message_type_names_match_the_wire() -> None:
    assert {m.value: m.name for m in wire.MsgType} == MSG_TYPES
