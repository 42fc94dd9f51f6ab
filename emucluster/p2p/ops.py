"""The operations and actions of the point-to-point core (`emucluster.p2p.protocol`).

What the core hands out and returns: the states and legal moves of a send and of a receive
(`SEND_MOVES`, `RECV_MOVES`), how an operation ended (`Outcome`), the op objects the shell
polls (`SendOp`, `RecvOp`), what a probe saw (`ProbeInfo`), and the actions every input
returns (`Transmit`, `SendData`, `Grant`, `Release`). Plain data with no behaviour beyond
small accessors; compiled with the core (mypyc) from this same source.
"""

from __future__ import annotations

from builtins import memoryview  # mypyc: a field annotated memoryview needs the name at run time
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final

from emucluster.p2p.envelope import ANY_SOURCE

__all__ = [
    "RECV_MOVES",
    "SEND_MOVES",
    "TERMINAL",
    "Action",
    "Args",
    "Event",
    "Grant",
    "Outcome",
    "ProbeInfo",
    "RecvOp",
    "RecvState",
    "Release",
    "SendData",
    "SendOp",
    "SendState",
    "Transmit",
]

Args = tuple[int, int, int, int]


class SendState(Enum):
    """Where a send is. Eager sends start DONE (the payload was handed to the NIC)."""

    __hash__ = object.__hash__  # members are singletons: C hashing for the move tables

    LOCAL_WAIT = "local_wait"  # synchronous self-send, not matched yet
    RTS_SENT = "rts_sent"  # waiting for the receiver's CTS
    DATA = "data"  # granted: chunks handed to the NIC, not all of them SENT yet
    DONE = "done"
    FAILED = "failed"


class RecvState(Enum):
    """Where a receive is."""

    __hash__ = object.__hash__

    POSTED = "posted"  # in the posted queue (or about to be matched)
    AWAIT_DATA = "await_data"  # matched an RTS, CTS sent, chunks arriving
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Event(Enum):
    """Inputs that move an operation."""

    __hash__ = object.__hash__

    EAGER = "eager"  # matched an eager message
    LOCAL = "local"  # matched a message from this rank itself
    RTS = "rts"  # matched an RTS: grant and wait for the data
    RTS_INLINE = "rts_inline"  # matched a synchronous RTS carrying its data
    DATA = "data"  # a chunk landed, more to come
    LAST_DATA = "last_data"  # the final chunk landed
    CTS = "cts"  # the receiver granted a send: its chunks go out
    CTS_ACK = "cts_ack"  # the receiver acknowledged a synchronous send carrying its data
    SENT = "sent"  # the NIC reported the last outstanding chunk SENT
    MATCHED = "matched"  # a synchronous self-send was matched
    PEER_FAILED = "peer_failed"  # the NIC gave up on the peer
    CANCEL = "cancel"  # the program cancelled a posted receive


SEND_MOVES: dict[tuple[SendState, Event], SendState] = {
    (SendState.RTS_SENT, Event.CTS): SendState.DATA,
    (SendState.RTS_SENT, Event.CTS_ACK): SendState.DONE,
    (SendState.RTS_SENT, Event.PEER_FAILED): SendState.FAILED,
    (SendState.DATA, Event.SENT): SendState.DONE,
    (SendState.DATA, Event.PEER_FAILED): SendState.FAILED,
    (SendState.LOCAL_WAIT, Event.MATCHED): SendState.DONE,
}
"""Legal moves of a send: (state, event) -> next state."""

RECV_MOVES: dict[tuple[RecvState, Event], RecvState] = {
    (RecvState.POSTED, Event.EAGER): RecvState.DONE,
    (RecvState.POSTED, Event.LOCAL): RecvState.DONE,
    (RecvState.POSTED, Event.RTS_INLINE): RecvState.DONE,
    (RecvState.POSTED, Event.RTS): RecvState.AWAIT_DATA,
    (RecvState.POSTED, Event.PEER_FAILED): RecvState.FAILED,
    (RecvState.POSTED, Event.CANCEL): RecvState.CANCELLED,
    (RecvState.AWAIT_DATA, Event.DATA): RecvState.AWAIT_DATA,
    (RecvState.AWAIT_DATA, Event.LAST_DATA): RecvState.DONE,
    (RecvState.AWAIT_DATA, Event.PEER_FAILED): RecvState.FAILED,
}
"""Legal moves of a receive: (state, event) -> next state."""

TERMINAL: Final = frozenset({SendState.DONE, SendState.FAILED, RecvState.DONE, RecvState.FAILED,
                      RecvState.CANCELLED})  # fmt: skip


class Outcome(IntEnum):
    """How a finished operation ended (the MPI layer maps these to error classes)."""

    OK = 0
    TRUNCATED = 1  # the message was longer than the receive buffer
    PEER_FAILED = 2  # the NIC declared the peer dead or could not deliver (``reason``)
    CANCELLED = 3
    REVOKED = 4  # the communicator was revoked (``MPI.Comm.Revoke``, here or at a member)


# -- actions ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Transmit:
    """Send one port message to the MPI port of ``dst_node``."""

    dst_node: int
    msg_type: int
    args: Args
    payload: bytes | bytearray | memoryview

    def __init__(
        self, dst_node: int, msg_type: int, args: Args, payload: bytes | bytearray | memoryview
    ) -> None:  # native when compiled (docs/dev/build.md)
        self.dst_node = dst_node
        self.msg_type = msg_type
        self.args = args
        self.payload = payload


@dataclass(slots=True)
class SendData:
    """Send one rendezvous chunk of ``op``: an RM write into ``region`` at ``offset`` (region
    > 0), or a GM_DATA message (region 0); its SENT goes to `P2P.on_chunk_sent`."""

    dst_node: int
    recv_id: int
    region: int
    offset: int
    payload: memoryview
    op: SendOp

    def __init__(
        self, dst_node: int, recv_id: int, region: int, offset: int, payload: memoryview, op: SendOp
    ) -> None:  # native when compiled (docs/dev/build.md)
        self.dst_node = dst_node
        self.recv_id = recv_id
        self.region = region
        self.offset = offset
        self.payload = payload
        self.op = op


@dataclass(slots=True)
class Grant:
    """Find ``size`` bytes of registered memory (or none) for receive ``recv_id`` and send the
    CTS ``cts_args(send_id, recv_id, region)`` to ``dst_node``."""

    dst_node: int
    send_id: int
    recv_id: int
    size: int

    def __init__(
        self, dst_node: int, send_id: int, recv_id: int, size: int
    ) -> None:  # native when compiled (docs/dev/build.md)
        self.dst_node = dst_node
        self.send_id = send_id
        self.recv_id = recv_id
        self.size = size


@dataclass(slots=True)
class Release:
    """Receive ``recv_id`` no longer needs the memory granted for it."""

    recv_id: int

    # native when compiled (docs/dev/build.md)
    def __init__(self, recv_id: int) -> None:
        self.recv_id = recv_id


Action = Transmit | SendData | Grant | Release


# -- operations ---------------------------------------------------------------------------------


class SendOp:
    """One send. ``done`` once the payload is out of the caller's hands or it failed: eager
    when handed to the NIC (a failure reaches later operations with the peer); rendezvous
    once every chunk was SENT or one failed (an aborted chunk fails the request itself)."""

    __slots__ = ("dst_node", "outcome", "payload", "pending", "reason", "send_id", "state")

    def __init__(self, state: SendState, dst_node: int) -> None:
        self.state = state
        self.dst_node = dst_node
        self.send_id = 0
        self.pending = 0  # chunks handed to the NIC, not reported SENT yet (state DATA)
        self.payload: bytes | bytearray | memoryview | None = None
        self.outcome = Outcome.OK
        self.reason = ""

    @property
    def done(self) -> bool:
        """True in a terminal state."""
        return self.state is SendState.DONE or self.state is SendState.FAILED

    @property
    def result(self) -> None:
        """Sends have no result (the collective contract's CollRequest.result)."""
        return None


class RecvOp:
    """One receive: pattern, destination buffer and, when done, what arrived."""

    __slots__ = ("buf", "context", "count", "data", "msg_source", "msg_tag", "outcome", "reason",
                 "received", "recv_id", "src_node", "state")  # fmt: skip

    def __init__(self, src_node: int | None, buf: memoryview | None, context: int = -1) -> None:
        self.state = RecvState.POSTED
        self.src_node = src_node
        """Node of the source named by the pattern; None for ANY_SOURCE."""
        self.context = context
        """Context id of the pattern (-1: not given)."""
        self.buf = buf
        """Writable byte view to fill, or None: keep the bytes in ``data``."""
        self.data: bytes | bytearray | memoryview | None = None
        self.msg_source = ANY_SOURCE
        self.msg_tag = -1
        self.count = 0
        """Bytes of the message (also when truncated)."""
        self.received = 0
        self.recv_id = 0
        self.outcome = Outcome.OK
        self.reason = ""

    @property
    def done(self) -> bool:
        """True in a terminal state."""
        state = self.state
        return state is RecvState.DONE or state is RecvState.FAILED or state is RecvState.CANCELLED

    @property
    def result(self) -> bytes | None:
        """The message's bytes (for a receive without buffer; CollRequest.result)."""
        data = self.data
        if data is None:
            return None
        return data if isinstance(data, bytes) else bytes(data)


@dataclass(frozen=True, slots=True)
class ProbeInfo:
    """What a probe saw: the envelope and size of the message a receive would take."""

    source: int
    tag: int
    count: int
