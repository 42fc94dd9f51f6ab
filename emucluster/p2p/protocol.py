"""Eager and rendezvous point-to-point protocol of one rank (sans-IO), on top of matching.

MPICH-GM's two send modes (seed 000 §2.2): a message of up to ``eager_limit`` bytes
(16,287, MPICH-GM's) travels at once as one MPI_EAGER port message and, if no receive is
posted, waits in the unexpected queue; a larger one sends an MPI_RTS (envelope, size), the
receiver matches it like any message, answers MPI_CTS naming a registered-memory region, and
the sender then writes the payload straight into that region (RM_WRITE_P, placed by the NIC)
in chunks; each landed chunk is copied into the receive buffer. A synchronous send (ssend)
always sends an RTS; a small one carries its data inline and the CTS is only the
acknowledgement that a receive matched it. Sends to this rank itself never touch the NIC.

Wire use of the four 32-bit user arguments (see `eager_args`, `cts_args`)::

    MPI_EAGER, MPI_RTS   (context id, source rank, tag, sequence per destination node)
    MPI_RTS payload      RTS_HEAD (size, send id, flags) [+ inline data]
    MPI_CTS              (send id, receive id, region, 0)   region 0: send DATA as messages
    GM_DATA              (receive id, offset, 0, 0) + a chunk   (no registered memory)
    RM_WRITE_P notify    (receive id, 0); the chunk's offset is the write offset

Longer than 500 lines on purpose: the send and receive state machines share one handler table
and the envelope/argument packing; split, each half would import the other's private helpers.
The op classes, states and actions they hand out live in `emucluster.p2p.ops`.

Outputs: every input returns ``list[Action]``; completion is the state of the `SendOp` /
`RecvOp` objects this core hands out (the shell polls ``op.done``), so the eager fast path
allocates no completion record.

Invariants:

* All state changes of an operation go through `SEND_MOVES` / `RECV_MOVES`; a missing
  (state, event) key is a protocol error: a peer's message causing it is a counted drop,
  local misuse raises `ProtocolError`.
* Terminal states (`TERMINAL`) are final; ``done`` is True exactly in them.
* Messages from one node are matched in the order the NIC delivered them; the sequence
  number only checks that order (``out_of_order`` counts violations, expected 0).
"""

from __future__ import annotations

import struct
from builtins import memoryview  # mypyc: a field annotated memoryview needs the name at run time
from typing import TYPE_CHECKING, Final

from emucluster.p2p.control import ControlLedger
from emucluster.p2p.envelope import MAX_RANK, MAX_TAG, Envelope, arrival_fields_ok
from emucluster.p2p.errors import ProtocolError
from emucluster.p2p.matching import Matcher
from emucluster.p2p.ops import (
    RECV_MOVES,
    SEND_MOVES,
    TERMINAL,
    Action,
    Args,
    Event,
    Grant,
    Outcome,
    ProbeInfo,
    RecvOp,
    RecvState,
    Release,
    SendData,
    SendOp,
    SendState,
    Transmit,
)
from nicd.contract import MsgType

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "DATA_CHUNK_BYTES",
    "EAGER_LIMIT_BYTES",
    "P2P",
    "RECV_MOVES",
    "RTS_HEAD",
    "SEND_MOVES",
    "TERMINAL",
    "Action",
    "Event",
    "Grant",
    "Outcome",
    "ProbeInfo",
    "ProtocolError",
    "RecvOp",
    "RecvState",
    "Release",
    "SendData",
    "SendOp",
    "SendState",
    "Transmit",
    "cts_args",
]

EAGER_LIMIT_BYTES: Final = 16_287  # MPICH-GM's eager limit (seed 000 §2.2)
DATA_CHUNK_BYTES: Final = 1 << 20  # rendezvous payload per remote-memory write
# RTS payload head: message size (64) | send id (32) | flags (8)
RTS_HEAD: Final = struct.Struct(">QIB")
MAX_RNDV_BYTES: Final = (1 << 31) - 1
"""Largest message a peer may announce (MPI's int count of bytes): an RTS beyond is a
counted drop, never an allocation that raises MemoryError."""
_INLINE: Final = 0x01  # RTS flag: the data follows the head (synchronous send of an eager size)
_U32: Final = 0xFFFFFFFF


class _Unexpected:
    """A message waiting in the unexpected queue: eager data, an RTS, or a local message."""

    __slots__ = ("inline", "local_send", "payload", "send_id", "size", "src_node")

    def __init__(self, src_node: int, size: int, payload: bytes | bytearray | memoryview | None,
                 send_id: int = 0, *, inline: bool = False,
                 local_send: SendOp | None = None) -> None:  # fmt: skip
        self.src_node = src_node
        self.size = size
        self.payload = payload  # None: an RTS whose data is still at the sender
        self.send_id = send_id
        self.inline = inline
        self.local_send = local_send


# -- the core -----------------------------------------------------------------------------------


class P2P:
    """Point-to-point state of the rank on node ``node`` (one per process)."""

    def __init__(self, node: int, num_nodes: int, *, eager_limit: int = EAGER_LIMIT_BYTES,
                 chunk_bytes: int = DATA_CHUNK_BYTES, store: str = "lhs") -> None:  # fmt: skip
        self.node = node
        self.num_nodes = num_nodes
        self.eager_limit = eager_limit
        self.chunk_bytes = chunk_bytes
        self.matcher: Matcher[RecvOp, _Unexpected] = Matcher(store=store)
        self._send_seq = [0] * num_nodes
        self._recv_seq = [0] * num_nodes
        self._next_send_id = 1
        self._next_recv_id = 1
        self._awaiting_cts: dict[int, SendOp] = {}
        self._sending: dict[int, SendOp] = {}  # send id -> op in DATA (chunks in flight)
        self._awaiting_data: dict[int, RecvOp] = {}
        self._posted: dict[int, RecvOp] = {}  # id(op) -> op, for failing them
        self.dead: dict[int, str] = {}  # node -> reason
        self.revoked: set[int] = set()  # contexts of revoked communicators (ULFM)
        self.control = ControlLedger()  # MPI_CTRL messages: revocations, agreements
        self.counters: dict[str, int] = dict.fromkeys(
            ("eager_sent", "rts_sent", "cts_sent", "data_chunks_sent", "local_sent",
             "bytes_sent", "bytes_received", "out_of_order", "truncated", "failed"), 0
        )  # fmt: skip
        self.dropped: dict[str, int] = {}
        self._handlers: dict[int, Callable[[int, Args, bytes], list[Action]]] = {
            MsgType.MPI_EAGER: self._on_eager,
            MsgType.MPI_RTS: self._on_rts,
            MsgType.MPI_CTS: self._on_cts,
            MsgType.GM_DATA: self._on_plain_data,
            MsgType.MPI_CTRL: self._on_control,
        }

    # -- local requests ---------------------------------------------------------------------

    def send(self, context: int, source: int, tag: int, dst_node: int,
             payload: bytes | bytearray | memoryview, *,
             sync: bool = False) -> tuple[SendOp, list[Action]]:  # fmt: skip
        """Send ``payload`` (owned by the core from now on) with envelope (context, source,
        tag) to ``dst_node``. ``sync``: complete only once a receive matched it."""
        size = len(payload)
        self.counters["bytes_sent"] += size
        if dst_node == self.node:
            return self._send_local(Envelope(context, source, tag), payload, sync)
        if dst_node in self.dead:
            return self._failed_send(dst_node), []
        if dst_node >= self.num_nodes:
            self.add_nodes(dst_node + 1)
        seq = self._send_seq[dst_node]
        self._send_seq[dst_node] = (seq + 1) & _U32
        args = (context, source, tag, seq)
        if size <= self.eager_limit and not sync:
            self.counters["eager_sent"] += 1
            return SendOp(SendState.DONE, dst_node), [
                Transmit(dst_node, MsgType.MPI_EAGER, args, payload)
            ]
        op = SendOp(SendState.RTS_SENT, dst_node)
        op.send_id = send_id = self._next_send_id
        self._next_send_id = (send_id + 1) & _U32 or 1
        self._awaiting_cts[send_id] = op
        self.counters["rts_sent"] += 1
        head = RTS_HEAD.pack(size, send_id, _INLINE if size <= self.eager_limit else 0)
        if size <= self.eager_limit:
            rts = head + bytes(payload)
        else:
            rts = head
            op.payload = payload
        return op, [Transmit(dst_node, MsgType.MPI_RTS, args, rts)]

    def recv(self, context: int, source: int, tag: int, src_node: int | None,
             buf: memoryview | None) -> tuple[RecvOp, list[Action]]:  # fmt: skip
        """Post a receive for (context, source or ANY_SOURCE, tag or ANY_TAG); ``src_node`` is
        the node of ``source`` (None for ANY_SOURCE); ``buf`` a writable byte view or None."""
        op = RecvOp(src_node, buf, context)
        if self.revoked and context in self.revoked:
            self._move_recv(op, Event.PEER_FAILED)
            op.outcome, op.reason = Outcome.REVOKED, "the communicator was revoked"
            return op, []
        if src_node is not None and src_node in self.dead:
            self._move_recv(op, Event.PEER_FAILED)
            op.outcome, op.reason = Outcome.PEER_FAILED, self.dead[src_node]
            return op, []
        hit = self.matcher.post_receive(context, source, tag, op)
        if hit is None:
            if src_node is None and self.dead:
                self.matcher.cancel_receive(op)
                self._fail_recv(op, "a peer failed: ANY_SOURCE cannot complete safely")
            else:
                self._posted[id(op)] = op
            return op, []
        envelope, message = hit
        return op, self._match(op, envelope, message)

    def probe(self, context: int, source: int, tag: int) -> ProbeInfo | None:
        """The message a receive with this pattern would take now, if any (left queued)."""
        hit = self.matcher.probe(context, source, tag)
        if hit is None:
            return None
        envelope, message = hit
        return ProbeInfo(envelope.source, envelope.tag, message.size)

    def cancel(self, op: RecvOp) -> bool:
        """Cancel a posted receive; False if it already matched."""
        if op.state is not RecvState.POSTED or not self.matcher.cancel_receive(op):
            return False
        self._posted.pop(id(op), None)
        self._move_recv(op, Event.CANCEL)
        op.outcome = Outcome.CANCELLED
        return True

    # -- network input ----------------------------------------------------------------------

    def on_unknown_region(self) -> None:
        """Rendezvous data landed in a region no receive was lent: counted, dropped."""
        self._drop("rm_unknown_region")

    def on_message(self, src_node: int, msg_type: int, args: Args,
                   payload: bytes) -> list[Action]:  # fmt: skip
        """A port message arrived from ``src_node``."""
        handler = self._handlers.get(msg_type)
        if handler is None:
            self._drop("unknown_msg_type")
            return []
        if src_node >= self.num_nodes:  # a node started at run time (its NIC routed it)
            self.add_nodes(src_node + 1)
        return handler(src_node, args, payload)

    def add_nodes(self, num_nodes: int) -> None:
        """Nodes up to ``num_nodes`` joined the fabric (``MPI.Comm.Spawn``): sequence numbers
        start at 0 for each."""
        if num_nodes > self.num_nodes:
            grow = num_nodes - self.num_nodes
            self._send_seq.extend([0] * grow)
            self._recv_seq.extend([0] * grow)
            self.num_nodes = num_nodes

    def on_data(self, src_node: int, recv_id: int, offset: int,
                chunk: bytes | memoryview) -> list[Action]:  # fmt: skip
        """A rendezvous chunk for receive ``recv_id`` landed (RM write or GM_DATA message)."""
        op = self._awaiting_data.get(recv_id)
        if op is None or op.src_node != src_node:
            self._drop("data_unknown_receive")
            return []
        length = len(chunk)
        if offset + length > op.count:
            self._drop("data_out_of_bounds")
            return []
        sink = op.buf if op.buf is not None else op.data
        assert sink is not None
        end = min(offset + length, len(sink))
        if end > offset:
            sink[offset:end] = chunk[: end - offset]  # type: ignore[index]
        op.received += length
        self.counters["bytes_received"] += length
        if op.received < op.count:
            self._move_recv(op, Event.DATA)
            return []
        del self._awaiting_data[recv_id]
        self._move_recv(op, Event.LAST_DATA)
        return [Release(recv_id)]

    def on_send_failed(self, dst_node: int, reason: str) -> list[Action]:
        """The NIC could not deliver to ``dst_node`` (it died, or aborted a message): fail
        everything that depends on it, the sends whose chunks are in flight included."""
        self.dead.setdefault(dst_node, reason)
        actions: list[Action] = []
        for table in (self._awaiting_cts, self._sending):
            for send_id, sop in list(table.items()):
                if sop.dst_node == dst_node:
                    del table[send_id]
                    self._move_send(sop, Event.PEER_FAILED)
                    sop.outcome, sop.reason = Outcome.PEER_FAILED, reason
                    self.counters["failed"] += 1
        for recv_id, rop in list(self._awaiting_data.items()):
            if rop.src_node == dst_node:
                del self._awaiting_data[recv_id]
                self._fail_recv(rop, reason)
                actions.append(Release(recv_id))
        for key, rop in list(self._posted.items()):
            if rop.src_node is None or rop.src_node == dst_node:
                del self._posted[key]
                self.matcher.cancel_receive(rop)
                self._fail_recv(rop, f"node {dst_node}: {reason}")
        return actions

    def revoke(self, context: int) -> None:
        """The communicator on p2p ``context`` is revoked: every receive posted on it or its
        collective context (``context + 1``) and not matched yet fails REVOKED, and so does
        every later one (`forget` when the context is given back)."""
        contexts = (context, context + 1)
        self.revoked.update(contexts)
        for key, rop in list(self._posted.items()):
            if rop.context in contexts:
                del self._posted[key]
                self.matcher.cancel_receive(rop)
                self._move_recv(rop, Event.PEER_FAILED)
                rop.outcome, rop.reason = Outcome.REVOKED, "the communicator was revoked"

    def forget(self, context: int) -> None:
        """The communicator on ``context`` was freed: its revocation and agreements go."""
        self.revoked.difference_update((context, context + 1))
        self.control.forget(context)

    def _on_control(self, src_node: int, args: Args, payload: bytes) -> list[Action]:
        answers = self.control.on_message(src_node, args, payload)
        revoked = self.control.revoked
        while revoked:
            self.revoke(revoked.pop())
        return [Transmit(a.dst_node, MsgType.MPI_CTRL, a.args, a.payload) for a in answers]

    def on_chunk_sent(self, op: SendOp) -> None:
        """The NIC reported a chunk of ``op`` SENT; the last one completes it (not a failed op)."""
        if op.state is not SendState.DATA:
            return
        op.pending -= 1
        if op.pending <= 0:
            del self._sending[op.send_id]
            self._move_send(op, Event.SENT)

    # -- queries ----------------------------------------------------------------------------

    def posted_receives(self, contexts: tuple[int, ...]) -> list[RecvOp]:
        """Receives posted on one of ``contexts`` that no message has matched yet."""
        return [op for op in self._posted.values() if op.context in contexts]

    def awaited_nodes(self) -> set[int]:
        """Nodes a posted operation waits on: the sources of posted and half-received
        receives, the destinations of rendezvous sends not yet granted or finished."""
        nodes = {op.src_node for op in self._posted.values() if op.src_node is not None}
        nodes.update(op.src_node for op in self._awaiting_data.values() if op.src_node is not None)
        nodes.update(op.dst_node for op in self._awaiting_cts.values())
        nodes.update(op.dst_node for op in self._sending.values())
        nodes.discard(self.node)
        return nodes - self.dead.keys()

    def outstanding_sends(self) -> int:
        """Rendezvous sends still waiting for their CTS or their chunks' SENT."""
        return len(self._awaiting_cts) + len(self._sending)

    def stats(self) -> dict[str, object]:
        """Matching statistics and protocol counters, JSON-able."""
        return {
            "matching": self.matcher.stats().as_dict(),
            "queued": self.matcher.queued(),
            "protocol": dict(self.counters),
            "dropped": dict(self.dropped),
            "dead_peers": {str(k): v for k, v in self.dead.items()},
            "eager_limit": self.eager_limit,
        }

    # -- message handlers -------------------------------------------------------------------

    def _check_seq(self, src_node: int, seq: int) -> None:
        expected = self._recv_seq[src_node]
        if seq != expected:
            self.counters["out_of_order"] += 1
        self._recv_seq[src_node] = (seq + 1) & _U32

    def _on_eager(self, src_node: int, args: Args, payload: bytes) -> list[Action]:
        # The hot path of every small message: `_arrive` and `_match` inlined for an eager
        # message from a peer; the envelope and the queue entry are built only if it waits.
        context, source, tag, seq = args
        if seq != self._recv_seq[src_node]:
            self.counters["out_of_order"] += 1
        self._recv_seq[src_node] = (seq + 1) & _U32
        size = len(payload)
        self.counters["bytes_received"] += size
        if not (0 <= source <= MAX_RANK and 0 <= tag <= MAX_TAG and type(context) is int):
            self._drop("bad_envelope")
            return []
        matcher = self.matcher
        op = matcher.take_posted(context, source, tag)
        if op is None:
            message = _Unexpected(src_node, size, payload)
            matcher.add_unexpected(Envelope(context, source, tag), message)
            return []
        self._posted.pop(id(op), None)
        op.msg_source = source
        op.msg_tag = tag
        op.count = size
        self._deliver(op, payload)
        self._move_recv(op, Event.EAGER)
        return []

    def _on_rts(self, src_node: int, args: Args, payload: bytes) -> list[Action]:
        if len(payload) < RTS_HEAD.size:
            self._drop("rts_short")
            return []
        self._check_seq(src_node, args[3])
        size, send_id, flags = RTS_HEAD.unpack_from(payload)
        inline = bool(flags & _INLINE)
        if inline and len(payload) - RTS_HEAD.size != size:
            self._drop("rts_inline_size")
            return []
        if size > MAX_RNDV_BYTES:  # no receive buffer could be granted for it
            self._drop("rts_too_large")
            return []
        data = memoryview(payload)[RTS_HEAD.size :] if inline else None
        message = _Unexpected(src_node, size, data, send_id, inline=inline)
        return self._arrive(Envelope(args[0], args[1], args[2]), message)

    def _on_cts(self, src_node: int, args: Args, payload: bytes) -> list[Action]:
        send_id, recv_id, region = args[0], args[1], args[2]
        op = self._awaiting_cts.pop(send_id, None)
        if op is None or op.dst_node != src_node:
            self._drop("cts_unknown_send")
            return []
        data = op.payload
        op.payload = None
        if data is None:  # inline: the CTS only acknowledges the match
            self._move_send(op, Event.CTS_ACK)
            return []
        self._move_send(op, Event.CTS)
        view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
        chunk = self.chunk_bytes
        op.pending = count = (len(view) + chunk - 1) // chunk
        self.counters["data_chunks_sent"] += count
        self._sending[send_id] = op
        return [
            SendData(src_node, recv_id, region, offset, view[offset : offset + chunk], op)
            for offset in range(0, len(view), chunk)
        ]

    def _on_plain_data(self, src_node: int, args: Args, payload: bytes) -> list[Action]:
        return self.on_data(src_node, args[0], args[1], payload)

    # -- matching ---------------------------------------------------------------------------

    def _arrive(self, envelope: Envelope, message: _Unexpected) -> list[Action]:
        if not arrival_fields_ok(envelope):  # a peer's source or tag out of range
            self._drop("bad_envelope")
            return []
        op = self.matcher.on_arrival(envelope, message)
        if op is None:
            return []
        self._posted.pop(id(op), None)
        return self._match(op, envelope, message)

    def _match(self, op: RecvOp, envelope: Envelope, message: _Unexpected) -> list[Action]:
        op.msg_source = envelope.source
        op.msg_tag = envelope.tag
        op.count = message.size
        if message.local_send is not None:  # synchronous self-send: it may complete now
            self._move_send(message.local_send, Event.MATCHED)
        payload = message.payload
        if message.src_node == self.node and payload is not None:
            self._deliver(op, payload)
            self._move_recv(op, Event.LOCAL)
            return []
        if payload is not None and not message.inline:
            self._deliver(op, payload)
            self._move_recv(op, Event.EAGER)
            return []
        if message.inline:
            assert payload is not None
            self._deliver(op, payload)
            self._move_recv(op, Event.RTS_INLINE)
            self.counters["cts_sent"] += 1
            args = cts_args(message.send_id, 0, 0)
            return [Transmit(message.src_node, MsgType.MPI_CTS, args, b"")]
        # Rendezvous: take the data straight into the buffer (or a fresh one), then grant.
        op.src_node = message.src_node
        if op.buf is None:
            op.data = bytearray(message.size)
        elif message.size > len(op.buf):
            op.outcome = Outcome.TRUNCATED
            self.counters["truncated"] += 1
        op.recv_id = recv_id = self._next_recv_id
        self._next_recv_id = (recv_id + 1) & _U32 or 1
        self._awaiting_data[recv_id] = op
        self._move_recv(op, Event.RTS)
        self.counters["cts_sent"] += 1
        return [Grant(message.src_node, message.send_id, recv_id, message.size)]

    def _deliver(self, op: RecvOp, payload: bytes | bytearray | memoryview) -> None:
        buf = op.buf
        if buf is None:
            op.data = payload
            return
        size = len(payload)
        if size > len(buf):
            op.outcome = Outcome.TRUNCATED
            self.counters["truncated"] += 1
            size = len(buf)
            payload = memoryview(payload)[:size]
        buf[:size] = payload

    def _send_local(self, envelope: Envelope, payload: bytes | bytearray | memoryview,
                    sync: bool) -> tuple[SendOp, list[Action]]:  # fmt: skip
        self.counters["local_sent"] += 1
        data = bytes(payload)  # the caller may reuse its buffer at once
        op = SendOp(SendState.LOCAL_WAIT if sync else SendState.DONE, self.node)
        message = _Unexpected(self.node, len(data), data, local_send=op if sync else None)
        return op, self._arrive(envelope, message)

    # -- moves ------------------------------------------------------------------------------

    def _move_send(self, op: SendOp, event: Event) -> None:
        target = SEND_MOVES.get((op.state, event))
        if target is None:
            raise ProtocolError(f"send in state {op.state.value} cannot take {event.value}")
        op.state = target

    def _move_recv(self, op: RecvOp, event: Event) -> None:
        target = RECV_MOVES.get((op.state, event))
        if target is None:
            raise ProtocolError(f"receive in state {op.state.value} cannot take {event.value}")
        op.state = target

    def _fail_recv(self, op: RecvOp, reason: str) -> None:
        self._move_recv(op, Event.PEER_FAILED)
        op.outcome, op.reason = Outcome.PEER_FAILED, reason
        self.counters["failed"] += 1

    def _failed_send(self, dst_node: int) -> SendOp:
        op = SendOp(SendState.FAILED, dst_node)
        op.outcome, op.reason = Outcome.PEER_FAILED, f"node {dst_node}: {self.dead[dst_node]}"
        self.counters["failed"] += 1
        return op

    def _drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def on_unsequenced(self, src_node: int, args: Args, payload: bytes) -> list[Action]:
        """An eager message that did not travel on ``src_node``'s point-to-point stream (a
        NIC multicast, seed 001 §6): matched like any eager message, without the per-node
        sequence check; its envelope (context, source, tag) keeps it apart from p2p."""
        self.counters["bytes_received"] += len(payload)
        message = _Unexpected(src_node, len(payload), payload)
        return self._arrive(Envelope(args[0], args[1], args[2]), message)


def cts_args(send_id: int, recv_id: int, region: int) -> Args:
    """User arguments of a CTS: receive ``recv_id`` grants send ``send_id`` the memory region
    ``region`` (0: send the data as GM_DATA messages; recv_id 0: only an acknowledgement)."""
    return (send_id, recv_id, region, 0)
