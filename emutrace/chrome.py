"""Per-process recordings -> one trace in the Chrome trace event format (Perfetto, chrome://tracing).

One process track per node (``pid`` = node id) with the host (``tid`` 1) and the NIC (``tid``
2) as threads. Packets are 1-us complete slices on the NIC thread; MPI calls are complete
slices on the host thread. Each received packet is joined to its send by a flow arrow
(``ph`` "s" on the sender, "f" bound to the enclosing slice on the receiver), keyed by
(message type, sequence, source node and LC, destination node and LC): the latest send of
that key at or before the receipt, so a retransmitted packet's arrow starts at the resend (or
the earliest send of that key, when the receiver stamped its receipt before the sender stamped
the send: nicd stamps a send after ``sendto`` returns).

NIC events the cores noted (faults, multicast sends per child, NICVM module runs, RM operations)
are instants on the NIC thread; ACK/NACK/SACK packets carry their reason. Retransmissions are
found here, not in nicd (no per-packet cost there): a data packet a NIC puts on the link (or
loses to an injected drop) again with the same (type, seq, source, destination) is a
``retransmit`` instant, its ``cause`` the input the NIC handled just before (the timer, or the
NACK/SACK/ACK it read, with that packet's seq and reason); a duplicate the fault plan made is no
retransmission, nor is the release of a delayed or reordered copy. Multicast packets are left
out: ``mcast forward`` events say ``resent``. A flow arrow (category ``cause``) goes from the
cause to each retransmission. Exact under drop, dup, delay and reorder (the
count equals the transport's ``retransmissions``); a bit the plan flips in a header can make a
copy look like another packet, so under ``--corrupt`` the count may be off by a few.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from emutrace.kinds import (
    F_DELAY,
    F_DROP,
    F_DUP,
    F_REORDER,
    FAULTS,
    FIELDS,
    K_FAULT,
    K_HOST_IN,
    K_MCAST_FWD,
    K_MPI_ENTER,
    K_MPI_EXIT,
    K_PKT_RECV,
    K_PKT_SEND,
    K_RETRANSMIT,
    K_RM_OP,
    K_TIMER,
    K_WAIT_SLEEP,
    MPI_CALLS,
    MSG_TYPES,
    NACK_REASONS,
    NAMES,
)

__all__ = ["HOST_TID", "NIC_TID", "PACKET_US", "to_chrome"]

HOST_TID = 1
NIC_TID = 2
PACKET_US = 1.0  # drawn width of a packet slice
_TIDS = {"host": HOST_TID, "nic": NIC_TID}
_ACK, _NACK, _MCAST_DATA, _MCAST_ACK, _SACK = 10, 11, 12, 13, 22  # wire.MsgType
_CONTROL = frozenset({_ACK, _NACK, _MCAST_ACK, _SACK})
_PROBES = frozenset({20, 21})  # wire.MsgType PING, PONG: liveness probes, never data resent
_ACKED = 0x04  # wire.ACKED: a data packet's flag for the piggy-backed ACK word it carries
_SKIP = 0x08  # wire.SKIP: the same fragment, its message aborted by the receiver
_ESTABLISHED = 0x10  # wire.ESTABLISHED: set once the stream's epoch was acknowledged
_NOT_IDENTITY = _ACKED | _SKIP | _ESTABLISHED
"""Flag bits a resend may have and its first copy not (or the reverse)."""
_MCAST_ACK_KINDS = {0: "ACK", 1: "GAP", 2: "BUSY"}  # wire.McastAckKind

Event = dict[str, Any]
_PACKET_FIELDS = {K_PKT_SEND: 8, K_PKT_RECV: 8, K_FAULT: 9}  # fields a packet event carries
_PACKET_KINDS = frozenset(_PACKET_FIELDS)


class _Resends:
    """One NIC's data packets seen on the link, to tell a retransmission and its cause."""

    def __init__(self, node: int) -> None:
        self.node = node
        self.seen: set[tuple[int, ...]] = set()
        self.copies: dict[tuple[int, ...], int] = defaultdict(int)  # dup/held by the faults
        self.cause: dict[str, Any] = {"cause": "none"}
        self.cause_ts: float | None = None
        """When the cause was recorded (the timer's instant, the control packet's slice)."""
        self.arrows: list[tuple[float, float, int]] = []
        """(cause, retransmission, node) times: drawn as flow arrows."""

    def on_input(self, ts: float, kind: int, fields: list[Any]) -> None:
        """The NIC handled an input: what it sends next is its consequence."""
        if kind in (K_TIMER, K_PKT_RECV):
            self.cause_ts = ts
        elif kind == K_HOST_IN:
            self.cause_ts = None
        if kind == K_TIMER:
            self.cause = {"cause": "timer"}
        elif kind == K_HOST_IN:
            self.cause = {"cause": "host"}
        elif kind == K_PKT_RECV and fields[0] in _CONTROL:
            cause = {
                "cause": _type_name(fields[0]),
                "cause_seq": fields[2],
                "cause_from": fields[3],
            }
            reason = _reason(fields[0], fields[1])
            if reason:
                cause["cause_reason"] = reason
            self.cause = cause
        elif kind == K_PKT_RECV:
            self.cause = {"cause": "data", "cause_seq": fields[2], "cause_from": fields[3]}

    def on_send(self, ts: float, fields: list[Any], fault: int = -1) -> Event | None:
        """A data packet went out (or a fault took it): the retransmit event, if it is one."""
        if fields[0] in _CONTROL or fields[0] in _PROBES or fields[0] == _MCAST_DATA:
            return None
        # A resend may carry a piggy-backed ACK its first copy did not, or the reverse, go as a
        # SKIP of an aborted message, or be marked ESTABLISHED because an ACK of its epoch came
        # in between: those flags bits are no part of its identity.
        key = (fields[0], fields[1] & ~_NOT_IDENTITY, *fields[2:7])
        if fault == F_DUP:
            self.copies[key] += 1  # the plan's second copy follows: no resend
            return None
        if fault < 0 and self.copies.get(key):
            self.copies[key] -= 1  # a copy made by dup, or one released from delay/reorder
            return None
        if fault in (F_DELAY, F_REORDER):
            self.copies[key] += 1  # the held copy's send comes later
        elif fault >= 0 and fault != F_DROP:
            return None  # a corrupted copy: its send follows
        resend = key in self.seen
        self.seen.add(key)
        if not resend:
            return None
        args = {"type": _type_name(fields[0]), "seq": fields[2], "dst": fields[5],
                "dst_port": fields[6], **self.cause, "lost": int(fault == F_DROP)}  # fmt: skip
        if self.cause_ts is not None:
            self.arrows.append((self.cause_ts, ts, self.node))
        return {"name": NAMES[K_RETRANSMIT], "ph": "i", "s": "t", "ts": ts, "pid": self.node,
                "tid": NIC_TID, "args": args}  # fmt: skip


def to_chrome(recordings: list[dict[str, Any]]) -> dict[str, Any]:
    """The merged trace object (``{"traceEvents": [...], ...}``) of ``recordings``."""
    starts = [e[0] for r in recordings for e in r["events"]]
    t0 = min(starts) if starts else 0
    out: list[Event] = []
    sends: dict[tuple[int, ...], list[tuple[float, int]]] = defaultdict(list)
    receipts: list[tuple[tuple[int, ...], float, int]] = []
    arrows: list[tuple[float, float, int]] = []
    for node in sorted({int(r["node"]) for r in recordings}):
        out.append(_meta("process_name", node, 0, f"node {node}"))
        out.append(_meta("thread_name", node, HOST_TID, "host"))
        out.append(_meta("thread_name", node, NIC_TID, "nic"))
    for rec in recordings:
        node, tid = int(rec["node"]), _TIDS.get(str(rec["role"]), NIC_TID)
        open_calls: list[tuple[float, list[Any]]] = []
        resends = _Resends(node)
        for raw in rec["events"]:
            ts = (raw[0] - t0) / 1000.0
            kind, fields = raw[1], list(raw[2:])
            if kind in _PACKET_KINDS and len(fields) < _PACKET_FIELDS[kind]:
                continue  # a recording from another version, or damaged: skip the event
            resends.on_input(ts, kind, fields)
            if kind in (K_PKT_SEND, K_PKT_RECV):
                packet = _slice(NAMES[kind], ts, PACKET_US, node, tid, kind, fields)
                packet["args"]["type"] = _type_name(fields[0])
                reason = _reason(fields[0], fields[1])
                if reason:
                    packet["args"]["reason"] = reason
                out.append(packet)
                key = tuple(fields[:7])
                if kind == K_PKT_SEND:
                    sends[key].append((ts, node))
                    resent = resends.on_send(ts, fields)
                    if resent is not None:
                        out.append(resent)
                else:
                    receipts.append((key, ts, node))
            elif kind == K_FAULT:
                fault = FAULTS[fields[0]] if 0 <= fields[0] < len(FAULTS) else "fault"
                event = _instant(f"fault {fault}", ts, node, tid, kind, fields)
                event["args"].update(fault=fault, type=_type_name(fields[1]))
                out.append(event)
                resent = resends.on_send(ts, fields[1:], fields[0])
                if resent is not None:
                    out.append(resent)
            elif kind == K_MCAST_FWD and len(fields) == 5:
                name = "mcast send" if fields[4] else NAMES[kind]
                out.append(_instant(name, ts, node, tid, kind, fields))
            elif kind == K_RM_OP and fields:
                event = _instant(NAMES[kind], ts, node, tid, kind, fields)
                event["args"]["op"] = _type_name(fields[0])
                out.append(event)
            elif kind == K_MPI_ENTER:
                open_calls.append((ts, fields))
            elif kind == K_MPI_EXIT and open_calls:
                start, args = open_calls.pop()
                code = args[0] if args and isinstance(args[0], int) else -1
                name = MPI_CALLS[code] if 0 <= code < len(MPI_CALLS) else "mpi"
                out.append(_slice(name, start, ts - start, node, tid, K_MPI_ENTER, args))
            elif kind == K_WAIT_SLEEP and fields:
                slept = fields[0] / 1000.0
                out.append(_slice(NAMES[kind], ts - slept, slept, node, tid, kind, fields))
            else:
                out.append(_instant(NAMES.get(kind, f"kind{kind}"), ts, node, tid, kind, fields))
        arrows += resends.arrows
    out.extend(_flows(sends, receipts))
    out.extend(_cause_flows(arrows, first_id=len(receipts) + 1))
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
        if not sent:
            continue
        # A send is stamped after sendto returns, so on a busy machine the receiver may stamp
        # it first: then the arrow comes from the earliest send.
        i = max(0, bisect.bisect_right(sent, (ts, 1 << 30)) - 1)
        sent_ts, src = sent[i]
        common = {"name": "packet", "cat": "flow", "id": flow_id}
        out.append({**common, "ph": "s", "ts": sent_ts, "pid": src, "tid": NIC_TID})
        out.append({**common, "ph": "f", "bp": "e", "ts": ts, "pid": node, "tid": NIC_TID})
    return out


def _cause_flows(arrows: list[tuple[float, float, int]], first_id: int) -> list[Event]:
    """An arrow from each retransmission's cause (timer, NACK, ...) to the retransmission."""
    out: list[Event] = []
    for flow_id, (cause_ts, ts, node) in enumerate(arrows, start=first_id):
        common = {"name": "resend cause", "cat": "cause", "id": flow_id, "pid": node,
                  "tid": NIC_TID}  # fmt: skip
        out.append({**common, "ph": "s", "ts": cause_ts})
        out.append({**common, "ph": "f", "bp": "e", "ts": ts})
    return out


def _type_name(mtype: int) -> str:
    return MSG_TYPES.get(mtype, f"type{mtype}")


def _reason(mtype: int, flags: int) -> str:
    """A NACK's or a multicast ACK's reason, from its flags byte; "" for other packets."""
    if mtype == _NACK:
        return NACK_REASONS.get(flags, f"reason{flags}")
    if mtype == _MCAST_ACK:
        return _MCAST_ACK_KINDS.get(flags, f"kind{flags}")
    return ""


def _meta(name: str, pid: int, tid: int, value: str) -> Event:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": {"name": value}}


def _args(kind: int, fields: list[Any]) -> dict[str, Any]:
    return dict(zip(FIELDS.get(kind, ()), fields, strict=False))


def _slice(name: str, ts: float, dur: float, pid: int, tid: int, kind: int, f: list[Any]) -> Event:
    return {
        "name": name,
        "ph": "X",
        "ts": ts,
        "dur": dur,
        "pid": pid,
        "tid": tid,
        "args": _args(kind, f),
    }


def _instant(name: str, ts: float, pid: int, tid: int, kind: int, f: list[Any]) -> Event:
    return {
        "name": name,
        "ph": "i",
        "s": "t",
        "ts": ts,
        "pid": pid,
        "tid": tid,
        "args": _args(kind, f),
    }
