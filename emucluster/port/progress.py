"""The progress engine: the host's only loop. Owns the MPI Port and drives the p2p core.

The MPI layer talks to the core only through this engine's facade (`Progress.send`,
`recv`, `probe`, `cancel`, `inject`, `inject_unsequenced`): each feeds the `P2P` core and
carries out the actions it returns (port sends, CTS grants, remote writes); the core itself
is private. Every blocking MPI call ends in `Progress.wait_for`: take in the Port's events,
feed each to the core, advance the nonblocking collectives, and, while the awaited condition
is still false, wait through the Port's one wait door (`Port.wait_until`, by the wait policy
``EMU_WAIT``: spin | block | hybrid). Nothing else in the library reads the Port.

Rendezvous data goes by remote-memory write (RM_WRITE_P) into a registered region the
receiver grants in its CTS; regions are pooled per size class and reused. With
``EMU_RNDV_RM=0`` (or a NIC without registered memory) the chunks travel as ordinary port
messages instead: see `Progress._send_data`, the one place that chooses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from emucluster.p2p.control import PING, ControlLedger
from emucluster.p2p.protocol import (
    P2P,
    Action,
    Grant,
    ProbeInfo,
    RecvOp,
    Release,
    SendData,
    SendOp,
    Transmit,
    cts_args,
)
from emucluster.port.client import (
    ErrorEvent,
    McastErrorEvent,
    Port,
    RecvEvent,
    Region,
    RmWriteEvent,
    SentEvent,
)
from emucluster.port.errors import DeadlockError
from nicd.contract import MsgType

__all__ = ["MPI_PORT", "Advancing", "DeadlockError", "Progress", "RegionPool"]

MPI_PORT: Final = 2  # the GM port every rank's MPI library opens (node id == rank in COMM_WORLD)
REGION_MIN_BYTES: Final = 1 << 16  # smallest registered region handed out for a rendezvous
REGION_KEEP_BYTES: Final = 64 << 20  # free registered memory kept for reuse; beyond it, freed


class Advancing(Protocol):
    """Something the engine advances after every batch of events (a nonblocking collective)."""

    def advance(self) -> bool:
        """Make what progress is possible now; True once finished (then it is dropped)."""
        ...


class RegionPool:
    """Registered-memory regions for incoming rendezvous data, reused by size class."""

    def __init__(self, port: Port) -> None:
        self._port = port
        self._free: list[Region] = []
        self._by_id: dict[int, Region] = {}
        self._lent: dict[int, Region] = {}  # receive id -> region

    def take(self, recv_id: int, size: int) -> Region:
        """A region of at least ``size`` bytes, lent to receive ``recv_id``."""
        best = None
        for region in self._free:
            if region.size >= size and (best is None or region.size < best.size):
                best = region
        if best is None:
            want = max(REGION_MIN_BYTES, 1 << (size - 1).bit_length())
            best = self._port.register_memory(want)
            self._by_id[best.id] = best
        else:
            self._free.remove(best)
        self._lent[recv_id] = best
        return best

    def region(self, region_id: int) -> Region | None:
        """The region named ``region_id`` (lent or free)."""
        return self._by_id.get(region_id)

    def give_back(self, recv_id: int) -> None:
        """Receive ``recv_id`` is done with its region."""
        region = self._lent.pop(recv_id, None)
        if region is None:
            return
        self._free.append(region)
        kept = sum(r.size for r in self._free)
        while kept > REGION_KEEP_BYTES and self._free:
            biggest = max(self._free, key=lambda r: r.size)
            self._free.remove(biggest)
            del self._by_id[biggest.id]
            kept -= biggest.size
            self._port.deregister_memory(biggest)


class Progress:
    """The progress engine of one rank."""

    def __init__(self, port: Port | None, core: P2P, *, use_rm: bool = True) -> None:
        self.port: Port = port if port is not None else _NoPort()  # type: ignore[assignment]
        self.singleton = port is None
        """No NIC: a one-rank job outside emurun."""
        self._core = core
        self.use_rm = use_rm
        """Rendezvous data by remote-memory write (else as ordinary port messages)."""
        self.regions = RegionPool(self.port)
        self.advancing: list[Advancing] = []
        self.hooks: dict[int, Callable[[RecvEvent], None]] = {}
        """Message type -> handler that takes such messages instead of the p2p core (the
        application-bypass packets, Fig 3.4 of the thesis)."""
        self.revoked: set[int] = core.revoked
        """Contexts of revoked communicators (`P2P.revoke`; the core's own set, which it
        only ever updates in place): every communicating call looks here first."""
        self.watch_s: float | None = None
        """Fault-tolerant runs (``emurun --with-ft ulfm``): a wait that got no event for this
        many seconds probes the nodes it awaits (`probe_awaited`), so a peer that died is
        reported by the NIC instead of waited for; None: never."""
        self.events = 0
        self._busy = False
        self._chunks: dict[int, SendOp] = {}
        """Send handle of a rendezvous chunk in flight -> its send (SENT completes it)."""

    # -- what the MPI layer calls ---------------------------------------------------------------

    @property
    def node(self) -> int:
        """This rank's node id."""
        return self._core.node

    @property
    def num_nodes(self) -> int:
        """Nodes in the job."""
        return self._core.num_nodes

    @property
    def eager_limit(self) -> int:
        """Largest payload sent eagerly (larger ones go by rendezvous)."""
        return self._core.eager_limit

    @property
    def dead(self) -> dict[int, str]:
        """Nodes known dead, with the reason."""
        return self._core.dead

    def stats(self) -> dict[str, object]:
        """The core's counters, JSON-able."""
        return self._core.stats()

    def send(self, context: int, source: int, tag: int, dst_node: int,
             payload: bytes | bytearray | memoryview, *, sync: bool = False,
             eager_as: tuple[int, int] | None = None) -> SendOp:  # fmt: skip
        """Start a point-to-point send (see `P2P.send`) and carry out its first actions.
        ``eager_as=(msg_type, am_handler)`` sends an eager message as that packet type
        instead (application bypass: its root packets travel as AB_COLL)."""
        op, actions = self._core.send(context, source, tag, dst_node, payload, sync=sync)
        if eager_as is not None:
            for action in actions:
                if type(action) is Transmit and action.msg_type == MsgType.MPI_EAGER:
                    self.port.send(action.dst_node, MPI_PORT, action.payload,
                                   msg_type=eager_as[0], am_handler=eager_as[1],
                                   args=action.args)  # fmt: skip
                else:
                    self.run([action])
        elif actions:
            self.run(actions)
        return op

    def recv(self, context: int, source: int, tag: int, src_node: int | None,
             buf: memoryview | None) -> RecvOp:  # fmt: skip
        """Post a receive (see `P2P.recv`) and carry out its first actions."""
        op, actions = self._core.recv(context, source, tag, src_node, buf)
        if actions:
            self.run(actions)
        return op

    def posted_receives(self, contexts: tuple[int, ...]) -> list[RecvOp]:
        """Receives posted on one of ``contexts`` and not matched yet (`P2P.posted_receives`)."""
        return self._core.posted_receives(contexts)

    def probe(self, context: int, source: int, tag: int) -> ProbeInfo | None:
        """The first matching unexpected message, without receiving it (`P2P.probe`)."""
        return self._core.probe(context, source, tag)

    def cancel(self, op: RecvOp) -> bool:
        """Cancel a posted receive; False if it already matched (`P2P.cancel`)."""
        return self._core.cancel(op)

    # -- fault tolerance (ULFM, ``emucluster.mpi.ft``) -----------------------------------------

    @property
    def ledger(self) -> ControlLedger:
        """The control messages' ledger: agreements decided and votes received."""
        return self._core.control

    def revoke(self, context: int) -> None:
        """Revoke the communicator on ``context`` here (`P2P.revoke`)."""
        self._core.revoke(context)

    def forget(self, context: int) -> None:
        """The communicator on ``context`` was freed (`P2P.forget`)."""
        self._core.forget(context)

    def control(self, dst_node: int, args: tuple[int, int, int, int], payload: bytes) -> None:
        """Send an ``MPI_CTRL`` message (``emucluster.p2p.control``) to ``dst_node``; a node
        the NIC cannot reach becomes dead (``dead``) as for any send."""
        self.port.send(dst_node, MPI_PORT, payload, msg_type=MsgType.MPI_CTRL, args=args)

    def peer_failed(self, node: int, reason: str) -> None:
        """``node`` is known to have failed (a ULFM agreement said so): fail what involves it,
        as if the NIC had reported it (`P2P.on_send_failed`)."""
        if node not in self._core.dead:
            self.run(self._core.on_send_failed(node, reason))

    def probe_awaited(self) -> None:
        """Send a PING control message to every node a posted operation waits on: the NIC
        reports a node that died (or whose MPI port is gone) as for any send, and the core
        fails what waits on it."""
        for node in self._core.awaited_nodes():
            self.control(node, (PING, 0, 0, 0), b"")

    def inject(self, src_node: int, msg_type: int, args: tuple[int, int, int, int],
               payload: bytes) -> None:  # fmt: skip
        """Feed a message that arrived by another path (an offload's hook) to matching."""
        actions = self._core.on_message(src_node, msg_type, args, payload)
        if actions:
            self.run(actions)

    def inject_unsequenced(self, src_node: int, args: tuple[int, int, int, int],
                           framed: bytes) -> None:  # fmt: skip
        """Feed an eager message outside the sender's sequence (a NIC multicast) to matching
        (`P2P.on_unsequenced`)."""
        actions = self._core.on_unsequenced(src_node, args, framed)
        if actions:
            self.run(actions)

    def run(self, actions: list[Action]) -> None:
        """Carry out the core's actions."""
        port = self.port
        for action in actions:
            if type(action) is Transmit:
                port.send(action.dst_node, MPI_PORT, action.payload, msg_type=action.msg_type,
                          args=action.args)  # fmt: skip
            elif type(action) is SendData:
                self._chunks[self._send_data(action)] = action.op
            elif type(action) is Grant:
                region = self.regions.take(action.recv_id, action.size).id if self.use_rm else 0
                args = cts_args(action.send_id, action.recv_id, region)
                port.send(action.dst_node, MPI_PORT, b"", msg_type=MsgType.MPI_CTS, args=args)
            elif type(action) is Release:
                self.regions.give_back(action.recv_id)

    def poll(self) -> bool:
        """Take in every event available now, without waiting; True if there were any."""
        return self._take(self.port.poll())

    def _take(self, events: Sequence[object]) -> bool:
        if not events:
            return False
        for event in events:
            self._handle(event)
        if self.advancing:
            self._advance()
        return True

    def wait_for(self, ready: Callable[[], bool], timeout: float | None = None) -> bool:
        """Make progress until ``ready()`` is true (waiting by the Port's wait policy);
        False if ``timeout`` seconds passed first."""
        self._busy = True
        try:
            self.poll()
            if self.advancing:
                self._advance()
            if ready():
                return True
            if self.singleton:
                raise DeadlockError("waiting for a message that no rank can send (no NIC)")
            deadline = None if timeout is None else time.monotonic() + timeout
            # `Port.wait_until`'s loop, without its two extra reads of a socket just found
            # empty: right after the poll above, and again after the pump that woke it.
            port, state = self.port, self.port.state
            watch_s = self.watch_s
            while True:
                # read what is there, else wait by the policy; but never sleep on the socket
                # while a wait nested in a step (`_advance`: e.g. nic-mcast posting its groups
                # waits for the NIC's reply) has read events into the port's queue
                wake = deadline if watch_s is None else _watch_deadline(deadline, watch_s)
                pumped = True if state.has_events() else port.pump(wake)
                self._take(state.take_events())  # pump read it all: nothing left to read
                if self.advancing:
                    self._advance()
                if ready():
                    return True
                if not pumped and watch_s is not None:
                    self.probe_awaited()
                if not pumped and deadline is not None and time.monotonic() >= deadline:
                    return False
        finally:
            self._busy = False

    def progress(self) -> None:
        """Make what progress is possible now (for a signal handler); no-op if re-entered."""
        if self._busy:
            return
        self._busy = True
        try:
            self.poll()
            if self.advancing:
                self._advance()
        finally:
            self._busy = False

    def add(self, task: Advancing) -> None:
        """Advance ``task`` whenever progress is made, until it reports finished."""
        if not task.advance():
            self.advancing.append(task)

    def finish(self, timeout: float) -> None:
        """Finalize: complete outstanding rendezvous sends, then wait until the NIC has
        delivered every send; TimeoutError after ``timeout`` seconds."""
        if self.singleton:
            return
        deadline = time.monotonic() + timeout
        core = self._core
        if not self.wait_for(lambda: not core.outstanding_sends(), timeout):
            raise TimeoutError(f"{core.outstanding_sends()} rendezvous sends never got a CTS")
        self.port.flush(timeout=max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        """Close the Port (and free its registered memory)."""
        if not self.singleton:
            self.port.close()

    # -- internals ------------------------------------------------------------------------------

    def _handle(self, event: object) -> None:
        self.events += 1
        core = self._core
        if type(event) is RecvEvent:
            if self.hooks:
                hook = self.hooks.get(event.msg_type)
                if hook is not None:
                    hook(event)
                    return
            actions = core.on_message(event.src_node, event.msg_type, event.args, event.payload)
            if actions:
                self.run(actions)
        elif type(event) is RmWriteEvent:
            region = self.regions.region(event.region)
            if region is None:
                core.on_unknown_region()
                return
            chunk = region.buf[event.offset : event.offset + event.length]
            actions = core.on_data(event.src_node, event.args[2], event.offset, chunk)
            chunk.release()
            if actions:
                self.run(actions)
        elif type(event) is SentEvent:
            if self._chunks:
                op = self._chunks.pop(event.handle, None)
                if op is not None:
                    core.on_chunk_sent(op)
        elif type(event) is ErrorEvent:
            self._chunks.pop(event.handle, None)
            self.run(core.on_send_failed(event.dst_node, event.reason))
        elif type(event) is McastErrorEvent:  # a dead multicast child (seed 001)
            self.run(core.on_send_failed(event.child, f"multicast child: {event.reason}"))

    def _advance(self) -> None:
        self.advancing = [task for task in self.advancing if not task.advance()]

    def _send_data(self, action: SendData) -> int:
        """One rendezvous chunk: an RM write into the granted region, or a GM_DATA message;
        returns its send handle."""
        if action.region:
            return self.port.rm_write(action.dst_node, MPI_PORT, action.region, action.offset,
                                      action.payload, notify=(action.recv_id, 0))  # fmt: skip
        args = (action.recv_id, action.offset, 0, 0)
        return self.port.send(action.dst_node, MPI_PORT, action.payload,
                              msg_type=MsgType.GM_DATA, args=args)  # fmt: skip


def _watch_deadline(deadline: float | None, watch_s: float) -> float:
    wake = time.monotonic() + watch_s
    return wake if deadline is None else min(deadline, wake)


class _NoPort:
    """The Port of a singleton rank: no NIC, no events."""

    def poll(self) -> list[object]:
        return []

    def wait_until(self, ready: Callable[[], bool], deadline: float | None) -> bool:
        return ready()
