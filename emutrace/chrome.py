"""Per-process recordings -> one trace in the Chrome trace event format (Perfetto, chrome://tracing).

One process track per node (``pid`` = node id) with the host (``tid`` 1) and the NIC (``tid``
2) as threads. Packets are 1-us complete slices on the NIC thread; MPI calls are complete
slices on the host thread. Each received packet is joined to its send by a flow arrow
(``ph`` "s" on the sender, "f" bound to the enclosing slice on the receiver), keyed by
(message type, sequence, source node and LC, destination node and LC): the latest send of
that key at or before the receipt, so a retransmitted packet's arrow starts at the resend.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from emutrace.kinds import (
    FIELDS,
    K_MPI_ENTER,
    K_MPI_EXIT,
    K_PKT_RECV,
    K_PKT_SEND,
    K_WAIT_SLEEP,
    MPI_CALLS,
    MSG_TYPES,
    NAMES,
)

__all__ = ["HOST_TID", "NIC_TID", "PACKET_US", "to_chrome"]

HOST_TID = 1
NIC_TID = 2
PACKET_US = 1.0  # drawn width of a packet slice
_TIDS = {"host": HOST_TID, "nic": NIC_TID}

Event = dict[str, Any]


def to_chrome(recordings: list[dict[str, Any]]) -> dict[str, Any]:
    """The merged trace object (``{"traceEvents": [...], ...}``) of ``recordings``."""
    starts = [e[0] for r in recordings for e in r["events"]]
    t0 = min(starts) if starts else 0
    out: list[Event] = []
    sends: dict[tuple[int, ...], list[tuple[float, int]]] = defaultdict(list)
    receipts: list[tuple[tuple[int, ...], float, int]] = []
    for node in sorted({int(r["node"]) for r in recordings}):
        out.append(_meta("process_name", node, 0, f"node {node}"))
        out.append(_meta("thread_name", node, HOST_TID, "host"))
        out.append(_meta("thread_name", node, NIC_TID, "nic"))
    for rec in recordings:
        node, tid = int(rec["node"]), _TIDS.get(str(rec["role"]), NIC_TID)
        open_calls: list[tuple[float, list[int]]] = []
        for raw in rec["events"]:
            ts = (raw[0] - t0) / 1000.0
            kind, fields = raw[1], list(raw[2:])
            if kind in (K_PKT_SEND, K_PKT_RECV):
                packet = _slice(NAMES[kind], ts, PACKET_US, node, tid, kind, fields)
                packet["args"]["type"] = _type_name(fields[0])
                out.append(packet)
                key = tuple(fields[:7])
                if kind == K_PKT_SEND:
                    sends[key].append((ts, node))
                else:
                    receipts.append((key, ts, node))
            elif kind == K_MPI_ENTER:
                open_calls.append((ts, fields))
            elif kind == K_MPI_EXIT and open_calls:
                start, args = open_calls.pop()
                name = MPI_CALLS[args[0]] if 0 <= args[0] < len(MPI_CALLS) else "mpi"
                out.append(_slice(name, start, ts - start, node, tid, K_MPI_ENTER, args))
            elif kind == K_WAIT_SLEEP and fields:
                slept = fields[0] / 1000.0
                out.append(_slice(NAMES[kind], ts - slept, slept, node, tid, kind, fields))
            else:
                out.append(_instant(NAMES.get(kind, f"kind{kind}"), ts, node, tid, kind, fields))
    out.extend(_flows(sends, receipts))
    return {
        "traceEvents": out,
        "displayTimeUnit": "ns",
        "otherData": {
            "clock": "CLOCK_MONOTONIC",
            "t0_ns": t0,
            "dropped": {f"{r['role']}{r['node']}": r["dropped"] for r in recordings},
        },
    }


def _flows(
    sends: dict[tuple[int, ...], list[tuple[float, int]]],
    receipts: list[tuple[tuple[int, ...], float, int]],
) -> list[Event]:
    out: list[Event] = []
    for times in sends.values():
        times.sort()
    for flow_id, (key, ts, node) in enumerate(receipts, start=1):
        sent = sends.get(key, [])
        i = bisect.bisect_right(sent, (ts, 1 << 30)) - 1
        if i < 0:
            continue
        sent_ts, src = sent[i]
        common = {"name": "packet", "cat": "flow", "id": flow_id}
        out.append({**common, "ph": "s", "ts": sent_ts, "pid": src, "tid": NIC_TID})
        out.append({**common, "ph": "f", "bp": "e", "ts": ts, "pid": node, "tid": NIC_TID})
    return out


def _type_name(mtype: int) -> str:
    return MSG_TYPES.get(mtype, f"type{mtype}")


def _meta(name: str, pid: int, tid: int, value: str) -> Event:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": {"name": value}}


def _args(kind: int, fields: list[int]) -> dict[str, int]:
    return dict(zip(FIELDS.get(kind, ()), fields, strict=False))


def _slice(name: str, ts: float, dur: float, pid: int, tid: int, kind: int, f: list[int]) -> Event:
    return {
        "name": name,
        "ph": "X",
        "ts": ts,
        "dur": dur,
        "pid": pid,
        "tid": tid,
        "args": _args(kind, f),
    }


def _instant(name: str, ts: float, pid: int, tid: int, kind: int, f: list[int]) -> Event:
    return {
        "name": name,
        "ph": "i",
        "s": "t",
        "ts": ts,
        "pid": pid,
        "tid": tid,
        "args": _args(kind, f),
    }
