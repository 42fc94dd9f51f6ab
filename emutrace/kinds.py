"""Event kinds of a trace: one small int per kind, with the names of its integer fields.

Every event is ``(t_ns, kind, *ints)``: ``t_ns`` from ``time.monotonic_ns()`` (CLOCK_MONOTONIC,
one clock for every process of a single-machine job), then the fields named here.
"""

from __future__ import annotations

__all__ = [
    "FAULTS",
    "FIELDS",
    "F_CORRUPT",
    "F_DELAY",
    "F_DROP",
    "F_DUP",
    "F_REORDER",
    "K_FAULT",
    "K_MCAST_FWD",
    "K_MPI_ENTER",
    "K_MPI_EXIT",
    "K_NICVM_RUN",
    "K_PKT_RECV",
    "K_PKT_SEND",
    "K_RETRANSMIT",
    "K_RM_OP",
    "MPI_CALLS",
    "NACK_REASONS",
    "NAMES",
]

K_PKT_SEND = 1  # nicd: a datagram handed to the link socket
K_PKT_RECV = 2  # nicd: a datagram read from the link socket
K_MPI_ENTER = 3  # host: an MPI call begins
K_MPI_EXIT = 4  # host: the same call returns
K_TIMER = 5  # nicd: the shell's timer fired (RTO, delayed ACK, ...)
K_HOST_IN = 6  # nicd: a whole record read from a host connection
K_HOST_OUT = 7  # nicd: a record written to a host connection
K_SIGNAL_RAISE = 8  # nicd: SIGUSR1 sent to a host
K_SIGNAL_HANDLED = 9  # host: the SIGUSR1 handler ran
K_WAIT_SLEEP = 10  # host: the wait policy slept in select (emitted at wake-up)
K_FAULT = 11  # nicd: the fault plan dropped/duplicated/corrupted/reordered/delayed a datagram
K_MCAST_FWD = 12  # nicd: a multicast packet sent to one child (forwarded, or from the root)
K_NICVM_RUN = 13  # nicd: a NICVM module ran on a packet
K_RM_OP = 14  # nicd: a GRIM remote-memory operation executed on this NIC
K_RETRANSMIT = 15  # merge only: a data packet put on the link again, with its cause

_PACKET = ("mtype", "flags", "seq", "src", "src_port", "dst", "dst_port", "size")

NAMES: dict[int, str] = {
    K_PKT_SEND: "pkt send",
    K_PKT_RECV: "pkt recv",
    K_MPI_ENTER: "mpi_enter",
    K_MPI_EXIT: "mpi_exit",
    K_TIMER: "timer",
    K_HOST_IN: "host record in",
    K_HOST_OUT: "host record out",
    K_SIGNAL_RAISE: "signal raised",
    K_SIGNAL_HANDLED: "signal handled",
    K_WAIT_SLEEP: "wait sleep",
    K_FAULT: "fault",
    K_MCAST_FWD: "mcast forward",
    K_NICVM_RUN: "nicvm run",
    K_RM_OP: "rm op",
    K_RETRANSMIT: "retransmit",
}
"""Kind code -> event name in the merged trace."""

FIELDS: dict[int, tuple[str, ...]] = {
    K_PKT_SEND: _PACKET,
    K_PKT_RECV: _PACKET,
    K_MPI_ENTER: ("call", "peer", "tag", "nbytes", "comm", "algorithm"),
    K_MPI_EXIT: ("call",),
    K_TIMER: (),
    K_HOST_IN: ("conn", "size"),
    K_HOST_OUT: ("conn",),
    K_SIGNAL_RAISE: ("pid",),
    K_SIGNAL_HANDLED: (),
    K_WAIT_SLEEP: ("slept_ns",),
    K_FAULT: ("fault", *_PACKET),
    K_MCAST_FWD: ("group", "child", "seq", "resent", "origin"),
    K_NICVM_RUN: ("module", "fuel_used", "sends", "outcome", "result"),
    K_RM_OP: ("op", "src", "port", "nbytes"),
}
"""Kind code -> the names of its fields (ints; a NICVM module's name and outcome and an MPI
call's algorithm are strings), in order. A fact from a core ends in the datagram it is about
where the kind has the packet fields (``K_FAULT``): the recorder decodes its header."""

FAULTS: tuple[str, ...] = ("drop", "dup", "corrupt", "reorder", "delay")
"""A ``K_FAULT`` event's ``fault`` field is an index here."""
F_DROP, F_DUP, F_CORRUPT, F_REORDER, F_DELAY = range(5)

NACK_REASONS: dict[int, str] = {
    1: "GAP",
    2: "NO_BUFFER",
    3: "RESUME",
    4: "NO_PORT",
    5: "ABORTED",
    6: "RESET",
}
"""nicd.link.wire.NackReason values -> names (a NACK's flags byte; copied like MSG_TYPES)."""

MPI_CALLS: tuple[str, ...] = (
    "Send", "Ssend", "Recv", "Sendrecv", "send", "ssend", "recv", "sendrecv",
    "Barrier", "barrier", "Bcast", "bcast", "Reduce", "reduce", "Allreduce", "allreduce",
    "Gather", "gather", "Scatter", "scatter", "Allgather", "allgather", "Alltoall", "alltoall",
)  # fmt: skip
"""The traced MPI calls; an event's ``call`` field is an index here."""

MSG_TYPES: dict[int, str] = {
    1: "GM_DATA",
    2: "AM_DATA",
    3: "MPI_EAGER",
    4: "MPI_RTS",
    5: "MPI_CTS",
    6: "RM_WRITE_V",
    7: "RM_WRITE_P",
    8: "RM_READ",
    9: "RM_READ_REPLY",
    10: "ACK",
    11: "NACK",
    12: "MCAST_DATA",
    13: "MCAST_ACK",
    14: "AB_COLL",
    15: "NICVM_SOURCE",
    16: "NICVM_DATA",
    17: "MGMT_HELLO",
    18: "MGMT_ROUTING",
    19: "MGMT_STATS",
    20: "PING",
    21: "PONG",
    22: "SACK",
    23: "RM_ATOMIC",
    40: "MPI_CTRL",
}
"""nicd.link.wire.MsgType values -> names (copied: emutrace imports nothing of ours; a unit
test keeps the copy equal)."""
