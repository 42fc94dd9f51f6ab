"""Pure bookkeeping of one open GM port on the host: send handles and tokens, receive
tokens, the event queues, and the routing of each NIC record type to its sink.

The socket shell (`emucluster.port.client`) feeds every record the NIC sent to `PortState.on_record`
and writes back what it returns; nothing here does I/O or reads a clock.

Invariants:

* A send handle is outstanding from `start_send` until its SENT or ERROR record; each such
  record gives one send token back (a SENT_BATCH one per handle). ``free_send_tokens`` never
  goes below zero: `start_send` refuses (None) instead.
* Every record type has exactly one sink. The built-in sinks queue the port's events
  (RECV, RM write, SENT, ERROR, multicast error) and note confirmations (registered region,
  multicast group); a service of the port (GRIM, NICVM) replaces or adds the sinks of its own
  record types with `register_sink`. A record type without a sink is a `ProtocolError`; a
  NICVM record with no NICVM client is a counted drop.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import TYPE_CHECKING, Final, TypeVar, cast

from emucluster.port.errors import RecordRefused, UnexpectedRecord
from nicd import contract as hl
from nicd.contract import ErrorEvent, McastErrorEvent, RecvEvent, RmWriteEvent, SentEvent

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Done", "Event", "PortState", "RecordRefused", "UnexpectedRecord"]

Event = RecvEvent | SentEvent | ErrorEvent | RmWriteEvent | McastErrorEvent
Done = SentEvent | ErrorEvent | McastErrorEvent
R = TypeVar("R")
_U32: Final = 0xFFFFFFFF


class PortState:
    """What one port has asked of its NIC and what the NIC has answered."""

    def __init__(self, send_tokens: int, *, auto_replenish: bool) -> None:
        self.free_send_tokens = send_tokens
        """Sends this port may still start before one completes."""
        self.auto_replenish = auto_replenish
        """Give the NIC a new receive buffer for every message received (in batches)."""
        self.nic_buffers = 0
        """Receive tokens the NIC holds, as far as this side knows."""
        self.owed_buffers = 0
        """Consumed and not given back yet (auto_replenish)."""
        self.provide_batch = 1
        """Receive tokens given back per PROVIDE record."""
        self.outstanding: set[int] = set()
        """Send handles started and not completed."""
        self.registered: set[int] = set()
        """Regions the NIC confirmed."""
        self.groups_ok: set[int] = set()
        """Multicast groups the NIC confirmed (and nobody collected yet)."""
        self.dropped: Counter[str] = Counter()
        """Records taken in and thrown away, by reason."""
        self.records = 0
        """Records taken in."""
        self._next_handle = 1
        self._recvq: deque[RecvEvent] = deque()
        self._rmq: deque[RmWriteEvent] = deque()
        self._doneq: deque[Done] = deque()
        self._writes: list[hl.HostRecord] = []
        self._sinks: dict[type, Callable[[hl.HostRecord], None]] = {}
        self.register_sink(RecvEvent, self._on_recv)
        self.register_sink(RmWriteEvent, self._rmq.append)
        self.register_sink(SentEvent, self._on_done)
        self.register_sink(ErrorEvent, self._on_done)
        self.register_sink(hl.SentBatch, self._on_sent_batch)
        self.register_sink(McastErrorEvent, self._doneq.append)
        self.register_sink(hl.Registered, lambda r: self.registered.add(r.region))
        self.register_sink(hl.McastGroupOk, lambda r: self.groups_ok.add(r.group))
        self.register_sink(hl.Refused, _refused)
        self.register_sink(hl.NicvmReply, self._no_client)
        self.register_sink(hl.NicvmDone, self._no_client)
        self.register_sink(hl.NicvmReport, self._no_client)

    # -- routing ------------------------------------------------------------------------------

    def register_sink(self, record_type: type[R], sink: Callable[[R], None]) -> None:
        """Hand every record of ``record_type`` to ``sink`` from now on (replacing the
        sink it had). A sink runs while the port drains; it may write to the port."""
        self._sinks[record_type] = cast("Callable[[hl.HostRecord], None]", sink)

    def on_record(self, record: hl.HostRecord) -> list[hl.HostRecord]:
        """Take in one record from the NIC; return the records to write back (receive
        tokens given back). Raises `RecordRefused` or `UnexpectedRecord`."""
        sink = self._sinks.get(type(record))
        if sink is None:
            raise UnexpectedRecord(f"unexpected record from the NIC: {record!r}")
        self.records += 1
        sink(record)
        writes, self._writes = self._writes, []
        return writes

    # -- sends --------------------------------------------------------------------------------

    def start_send(self) -> int | None:
        """Take a send token and a fresh handle for a send; None when no token is free."""
        if self.free_send_tokens <= 0:
            return None
        handle = self._next_handle
        self._next_handle = (handle + 1) & _U32 or 1
        self.free_send_tokens -= 1
        self.outstanding.add(handle)
        return handle

    # -- receive tokens -----------------------------------------------------------------------

    def provide(self, count: int) -> hl.ProvideReq | None:
        """The record giving the NIC ``count`` more receive tokens (None for none)."""
        if count <= 0:
            return None
        self.nic_buffers += count
        return hl.ProvideReq(count)

    def give_back(self, *, low_only: bool) -> hl.ProvideReq | None:
        """The record returning the owed receive tokens: always, or with ``low_only`` only
        when the NIC holds fewer than one batch (so no wait starts with the NIC short)."""
        owed = self.owed_buffers
        if owed and (not low_only or self.nic_buffers < self.provide_batch):
            self.owed_buffers = 0
            return self.provide(owed)
        return None

    # -- events -------------------------------------------------------------------------------

    def next_event(self) -> Event | None:
        """The next queued event: messages first, then RM writes, then completions."""
        if self._recvq:
            return self._recvq.popleft()
        if self._rmq:
            return self._rmq.popleft()
        if self._doneq:
            return self._doneq.popleft()
        return None

    def has_events(self) -> bool:
        """Whether events are queued (read by a drain, not yet taken)."""
        return bool(self._recvq or self._rmq or self._doneq)

    def has_messages(self) -> bool:
        """Whether RECV or RM-write events are queued (what a wait for data waits for)."""
        return bool(self._recvq or self._rmq)

    def take_events(self) -> list[Event]:
        """Every queued event, in `next_event` order."""
        events: list[Event] = [*self._recvq, *self._rmq, *self._doneq]
        self._recvq.clear()
        self._rmq.clear()
        self._doneq.clear()
        return events

    def next_message(self) -> RecvEvent | None:
        """The next queued RECV event (other events stay queued)."""
        return self._recvq.popleft() if self._recvq else None

    def take_failure(self) -> ErrorEvent | McastErrorEvent | None:
        """The first queued send failure (removed); with none, the SENT events queued so
        far are absorbed."""
        for i, event in enumerate(self._doneq):
            if not isinstance(event, SentEvent):
                del self._doneq[i]
                return event
        self._doneq.clear()
        return None

    # -- built-in sinks -----------------------------------------------------------------------

    def _on_recv(self, event: RecvEvent) -> None:
        self._recvq.append(event)
        self.nic_buffers -= 1
        if self.auto_replenish:
            self.owed_buffers += 1
            if self.owed_buffers >= self.provide_batch:
                provide = self.give_back(low_only=False)
                if provide is not None:
                    self._writes.append(provide)

    def _on_done(self, event: SentEvent | ErrorEvent) -> None:
        self.outstanding.discard(event.handle)
        self.free_send_tokens += 1
        self._doneq.append(event)

    def _on_sent_batch(self, event: hl.SentBatch) -> None:
        for handle in event.handles:
            self.outstanding.discard(handle)
            self._doneq.append(SentEvent(handle))
        self.free_send_tokens += len(event.handles)

    def _no_client(self, record: hl.NicvmReply | hl.NicvmDone | hl.NicvmReport) -> None:
        self.dropped[f"no_nicvm_client_{type(record).__name__}"] += 1


def _refused(record: hl.Refused) -> None:
    raise RecordRefused(record.reason)
