"""The NIC side of GRIM's programming interfaces (seed 002 §4.4-4.5): remote-memory writes
(RM-V, RM-P), reads (RM-RV) and atomics (RM_ATOMIC, :mod:`nicd.grim.atomics`, for MPI
one-sided communication) executed by the NIC, window lock queues (RM_ATOMIC's lock ops,
:mod:`nicd.grim.locks`: a lock request's status is sent at its grant), address translation
through the translation cache with host upcalls on misses, notification words, and the
active-message handler registry (served by node ``REGISTRY_NODE``'s NIC).

A :class:`~nicd.core.service.NicService`. Inputs: the transport's admission question for a
message's first packet (:meth:`admit`), a whole message delivered to a local endpoint
(:meth:`on_deliver`), a GRIM host record (:meth:`on_host`), a port closing. Outputs are
:data:`GrimOut`: :class:`~nicd.core.actions.NicSend` (a message the NIC itself sends from
``NIC_PORT``), :class:`~nicd.core.actions.ToPort` (a record for a port's host) and
:class:`~nicd.core.actions.ResumePort`.

A translation miss refuses the message like a port without receive buffers (NO_BUFFER: the
sender backs off, GRIM 4.3.3) and asks the host for the translation (the "kernel" upcall of
Fig 4.13), returned with the verdict; the host's answer fills the dynamic region and resumes
the port, which NACK-RESUMEs the stream. Field layouts are in :mod:`nicd.hostlink.grim`.

Invariants: the NIC writes only inside a registered segment, and for RM-V/RM-RV only inside
the block a translation names; every remote-memory operation that reaches an endpoint ends in
exactly one status back to its initiator (OK or why it was refused); a malformed registry
request is a counted drop; a port's translations die with the port.
"""

from __future__ import annotations

import struct
from collections import Counter
from typing import TYPE_CHECKING, ClassVar, get_args

from emutrace.kinds import K_RM_OP
from nicd.core.actions import NicSend, ResumePort, ToPort
from nicd.core.service import NicService
from nicd.errors import BadPacket
from nicd.grim.amregistry import Registry
from nicd.grim.atomics import (
    LOCK_OPS,
    AtomicError,
    AtomicOp,
    apply_atomic,
    target_length,
    unpack_meta,
)
from nicd.grim.locks import Granted, LockTable, Outcome, Waiter
from nicd.grim.xlate import Translation, TranslationCache
from nicd.hostlink.grim import (
    NIC_PORT,
    NOTIFY_P,
    READ_META,
    REGISTRY_NODE,
    GrimRecord,
    ReplyKind,
    RmFlags,
    RmLanded,
    RmMapReq,
    RmStatus,
    RmStatusEvent,
    RmUnmapReq,
    RmUpcallSignals,
    RmWatch,
    RmXlateReply,
    RmXlateReq,
)
from nicd.link.reliable import Admission
from nicd.link.wire import MsgType

if TYPE_CHECKING:
    from collections.abc import Callable

    from emutrace.recorder import Facts
    from nicd import hostlink as hl
    from nicd.core.actions import CoreAction, Deliver, TransportAction
    from nicd.gm.ports import PortState, PortTable
    from nicd.link.reliable import Verdict
    from nicd.link.wire import DataPacket

__all__ = [
    "DYNAMIC_ENTRIES",
    "STATIC_ENTRIES",
    "GrimNic",
    "GrimOut",
    "reply_kind_status",
]

STATIC_ENTRIES = 32  # static translation-cache entries per port
DYNAMIC_ENTRIES = 16  # dynamic (filled on miss) entries per port
_WORD = struct.Struct("<I")  # notification words: 32-bit, little-endian (the hosts' order)
_RM_TYPES = frozenset(
    {MsgType.RM_WRITE_V, MsgType.RM_READ, MsgType.RM_READ_REPLY, MsgType.RM_ATOMIC}
)
MAX_UPCALLS_PER_PORT = 64
"""Translation upcalls a port's host may owe at once; a miss beyond waits for a later retry."""
MAX_NEGATIVE = 4096
"""Remembered "nothing there" answers; the oldest is forgotten first (and asked again)."""
_Pin = list[Translation | None]
_StreamId = tuple[int, int, int]  # (src node, src port, dst port)


GrimOut = NicSend | ToPort


def reply_kind_status(am_handler: int) -> tuple[ReplyKind, int]:
    """Split an RM_READ_REPLY handler field into (kind, status)."""
    return ReplyKind(am_handler >> 8 & 1), am_handler & 0xFF


class GrimNic(NicService):
    """GRIM interfaces of the NIC of node ``node_id`` (sans-IO). Messages to ``NIC_PORT``
    (the AM registry) are this service's whatever their type."""

    msg_types: ClassVar[frozenset[MsgType]] = _RM_TYPES | {MsgType.RM_WRITE_P}
    record_types: ClassVar[tuple[type, ...]] = get_args(GrimRecord)

    def __init__(
        self,
        node_id: int,
        ports: PortTable,
        *,
        static_entries: int = STATIC_ENTRIES,
        dynamic_entries: int = DYNAMIC_ENTRIES,
        max_message: int = 1 << 30,
    ) -> None:
        self.node_id = node_id
        self.max_message = max_message
        """The longest message the transport carries: a longer read is refused."""
        self._ports = ports
        self._static = static_entries
        self._dynamic = dynamic_entries
        self._caches: dict[int, TranslationCache] = {}
        self._pinned: dict[_StreamId, _Pin] = {}
        self._asking: set[tuple[int, int]] = set()  # (port, vaddr) upcalls outstanding
        self._asking_per_port: Counter[int] = Counter()
        # host said: nothing there (insertion-ordered: the oldest answer is forgotten first)
        self._negative: dict[tuple[int, int], None] = {}
        self._watched: set[int] = set()  # ports whose host waits on its memory (RmWatch)
        self.registry = Registry(max_message) if node_id == REGISTRY_NODE else None
        self.locks = LockTable()
        """Window lock queues (MPI passive target), granted here without the host."""
        self.counts: Counter[str] = Counter()
        self.trace: Facts | None = None
        """Set while tracing: every RM operation executed here is noted (bytes asked for,
        for a read)."""

    # -- admission (transport hook) ---------------------------------------------------------

    def admit(self, first: DataPacket) -> Verdict | None:
        """The verdict for a GRIM message with the translation upcalls it raised, or None to
        leave it to the GM port table: always None for a message to another port than
        ``NIC_PORT`` whose type is not one of :attr:`msg_types` (NicCore asks only for those)."""
        if first.dst_port == NIC_PORT:
            ok = self.registry is not None and first.msg_type is MsgType.AM_DATA
            return (Admission.OK if ok else Admission.NO_PORT), []
        t = first.msg_type
        if t not in _RM_TYPES and not (
            t is MsgType.RM_WRITE_P and first.am_handler & RmFlags.RM_API
        ):
            return None
        if self._ports.get(first.dst_port) is None:
            return None  # the port table says NO_PORT
        a = first.args
        ranges: list[tuple[int, int]] = []
        if t is MsgType.RM_WRITE_V:
            ranges.append((a[0], first.msg_len))
            if first.am_handler & RmFlags.NOTIFY:
                ranges.append((a[1], 4))
        elif t is MsgType.RM_READ:
            ranges.append((a[0], a[1]))
        elif t is MsgType.RM_ATOMIC:
            ranges.append((a[0], target_length(a[3], first.msg_len)))
        elif t is MsgType.RM_READ_REPLY:
            kind, status = reply_kind_status(first.am_handler)
            if kind is ReplyKind.READ and status == 0:
                ranges.append((a[0], first.msg_len))
                if a[1]:
                    ranges.append((a[1], 4))
        return self._resolve(first, ranges)

    def _resolve(self, first: DataPacket, ranges: list[tuple[int, int]]) -> Verdict:
        port = first.dst_port
        cache = self._cache(port)
        found: _Pin = []
        missing: list[tuple[int, int]] = []
        for vaddr, length in ranges:
            t = cache.lookup(vaddr, 1)
            if t is None and (port, vaddr) not in self._negative:
                missing.append((vaddr, length))
            found.append(t)
        if missing:
            upcalls: list[TransportAction] = []
            for vaddr, length in missing:
                if (port, vaddr) in self._asking:
                    continue
                if self._asking_per_port[port] >= MAX_UPCALLS_PER_PORT:
                    self.counts["upcalls_deferred"] += 1  # asked again on a later retry
                else:
                    self._asking.add((port, vaddr))
                    self._asking_per_port[port] += 1
                    self.counts["upcalls"] += 1
                    upcalls.append(ToPort(port, RmXlateReq(vaddr, length), interrupt=True))
            self.counts["refused_for_translation"] += 1
            return Admission.NO_BUFFER, upcalls
        for vaddr, _ in ranges:
            self._negative.pop((port, vaddr), None)
        self._pinned[(first.src_node, first.src_port, port)] = found
        return Admission.OK, []

    # -- delivery ---------------------------------------------------------------------------

    def on_deliver(
        self, d: Deliver, state: PortState | None, *, now: float
    ) -> list[CoreAction] | None:
        """Execute a whole GRIM message; None if ``d`` is not one (plain delivery)."""
        t = d.msg_type
        if d.port == NIC_PORT:
            return self._registry(d)
        if self.trace is not None and (t in _RM_TYPES or d.am_handler & RmFlags.RM_API):
            size = d.args[1] if t is MsgType.RM_READ else len(d.payload)
            self.trace.append((K_RM_OP, int(t), d.src_node, d.port, size))
        if t is MsgType.RM_WRITE_V:
            return self._write_v(d)
        if t is MsgType.RM_WRITE_P:
            return self._write_p(d) if d.am_handler & RmFlags.RM_API else None
        if t is MsgType.RM_READ:
            return self._read(d)
        if t is MsgType.RM_ATOMIC:
            return self._atomic(d, now)
        if t is MsgType.RM_READ_REPLY:
            return self._read_reply(d)
        return None

    def _registry(self, d: Deliver) -> list[CoreAction]:
        if self.registry is None:
            self.counts["registry_not_here"] += 1
            return []
        try:
            reply = self.registry.on_request(d.payload)
        except BadPacket as exc:
            self.counts[f"registry_drop_{exc.reason}"] += 1
            return []
        return [NicSend(d.src_node, d.src_port, MsgType.AM_DATA, reply)]

    def _write_v(self, d: Deliver) -> list[CoreAction]:
        vaddr, notify_vaddr, value, req = d.args
        pin = self._pinned.pop((d.src_node, d.src_port, d.port), [])
        data_t = pin[0] if pin else None
        status, where = self._locate(d.port, data_t, vaddr, len(d.payload))
        notify = None
        if status is RmStatus.OK and d.am_handler & RmFlags.NOTIFY:
            notify_t = pin[1] if len(pin) > 1 else None
            nstatus, notify = self._locate(d.port, notify_t, notify_vaddr, 4)
            status = RmStatus.BAD_NOTIFY if nstatus is not RmStatus.OK else status
        if status is RmStatus.OK and where is not None:
            where[:] = d.payload
            if notify is not None:
                _WORD.pack_into(notify, 0, value)
            self.counts["rm_v_writes"] += 1
            return [self._status(d, req, status, ReplyKind.WRITE), *self._landed(d.port)]
        return [self._status(d, req, status, ReplyKind.WRITE)]

    def _write_p(self, d: Deliver) -> list[CoreAction]:
        region, offset, req, value = d.args
        data = memoryview(d.payload)
        notify = None
        status = RmStatus.OK
        if d.am_handler & RmFlags.NOTIFY:
            if len(data) < NOTIFY_P.size:
                status = RmStatus.BAD_NOTIFY
            else:
                nregion, noffset = NOTIFY_P.unpack_from(data)
                data = data[NOTIFY_P.size :]
                nstatus, notify = self._physical(d.port, nregion, noffset, 4)
                status = RmStatus.BAD_NOTIFY if nstatus is not RmStatus.OK else status
        dstatus, where = self._physical(d.port, region, offset, len(data))
        if dstatus is not RmStatus.OK:
            status = dstatus
        if status is RmStatus.OK and where is not None:
            where[:] = data
            if notify is not None:
                _WORD.pack_into(notify, 0, value)
            self.counts["rm_p_writes"] += 1
            return [self._status(d, req, status, ReplyKind.WRITE), *self._landed(d.port)]
        return [self._status(d, req, status, ReplyKind.WRITE)]

    def _landed(self, port: int) -> list[CoreAction]:
        """Tell a host that waits on its memory that a write landed there."""
        if port not in self._watched:
            return []
        self.counts["landed_reported"] += 1
        return [ToPort(port, RmLanded())]

    def _read(self, d: Deliver) -> list[CoreAction]:
        vaddr, length, reply_vaddr, req = d.args
        pin = self._pinned.pop((d.src_node, d.src_port, d.port), [])
        status, where = self._locate(d.port, pin[0] if pin else None, vaddr, length)
        if len(d.payload) != READ_META.size:
            status, where = RmStatus.BAD_NOTIFY, None
        elif length > self.max_message:
            status, where = RmStatus.OUT_OF_RANGE, None
        if status is not RmStatus.OK or where is None:
            return [self._status(d, req, status, ReplyKind.READ)]
        notify_vaddr, value = READ_META.unpack(d.payload)
        self.counts["rm_reads_served"] += 1
        args = (reply_vaddr, notify_vaddr, req, value)
        return [NicSend(d.src_node, d.src_port, MsgType.RM_READ_REPLY, bytes(where), 0, args)]

    def _atomic(self, d: Deliver, now: float) -> list[CoreAction]:
        """Apply a remote atomic whole (the NIC runs one message at a time, so it is atomic
        with respect to every other remote operation); a fetch sends the old contents back
        as a read's reply. A lock operation goes to the lock queues instead."""
        vaddr, reply_vaddr, req, meta = d.args
        op, code, fetch = unpack_meta(meta)
        kind = ReplyKind.READ if fetch else ReplyKind.WRITE
        pin = self._pinned.pop((d.src_node, d.src_port, d.port), [])
        n = target_length(meta, len(d.payload))
        status, where = self._locate(d.port, pin[0] if pin else None, vaddr, n)
        if status is not RmStatus.OK or where is None:
            return [self._status(d, req, status, kind)]
        if op in LOCK_OPS and not fetch:
            return self._lock(d, AtomicOp(op), vaddr, req, now)
        try:
            old = apply_atomic(op, code, where, d.payload)
        except AtomicError:
            return [self._status(d, req, RmStatus.BAD_OP, kind)]
        self.counts["rm_atomics"] += 1
        landed = self._landed(d.port)
        if fetch:
            args = (reply_vaddr, 0, req, 0)
            return [NicSend(d.src_node, d.src_port, MsgType.RM_READ_REPLY, old, 0, args), *landed]
        return [self._status(d, req, RmStatus.OK, kind), *landed]

    def _lock(self, d: Deliver, op: AtomicOp, vaddr: int, req: int, now: float) -> list[CoreAction]:
        """A lock request (answered at its grant) or a release (answered now, then the
        grants it unblocks)."""
        key = (d.port, vaddr)
        if op is AtomicOp.UNLOCK:
            held, outcomes = self.locks.release(key, d.src_node, d.src_port)
            status = RmStatus.OK if held else RmStatus.NOT_LOCKED
            return [self._status(d, req, status, ReplyKind.WRITE), *self._answers(outcomes)]
        who = Waiter(d.src_node, d.src_port, req)
        exclusive = op is AtomicOp.LOCK_EXCLUSIVE
        return self._answers(self.locks.acquire(key, who, exclusive=exclusive, now=now))

    def _answers(self, outcomes: list[Outcome]) -> list[CoreAction]:
        """The status replies that complete granted or refused lock requests."""
        out: list[CoreAction] = []
        for o in outcomes:
            status = RmStatus.OK if isinstance(o, Granted) else RmStatus.LOCK_FAILED
            if status is not RmStatus.OK:
                self.counts["refused_lock_failed"] += 1
            handler = int(ReplyKind.WRITE) << 8 | int(status)
            args = (0, 0, o.who.req, 0)
            out.append(NicSend(o.who.node, o.who.port, MsgType.RM_READ_REPLY, b"", handler, args))
        return out

    def _read_reply(self, d: Deliver) -> list[CoreAction]:
        reply_vaddr, notify_vaddr, req, value = d.args
        kind, status_code = reply_kind_status(d.am_handler)
        if kind is ReplyKind.WRITE or status_code:
            return [ToPort(d.port, RmStatusEvent(req, status_code))]
        pin = self._pinned.pop((d.src_node, d.src_port, d.port), [])
        status, where = self._locate(d.port, pin[0] if pin else None, reply_vaddr, len(d.payload))
        notify = None
        if status is RmStatus.OK and notify_vaddr:
            nstatus, notify = self._locate(
                d.port, pin[1] if len(pin) > 1 else None, notify_vaddr, 4
            )
            status = RmStatus.BAD_NOTIFY if nstatus is not RmStatus.OK else status
        elif status is not RmStatus.OK:
            status = RmStatus.BAD_REPLY
        if status is RmStatus.OK and where is not None:
            where[:] = d.payload
            if notify is not None:
                _WORD.pack_into(notify, 0, value)
            self.counts["rm_read_replies_placed"] += 1
        return [ToPort(d.port, RmStatusEvent(req, status))]

    def _status(self, d: Deliver, req: int, status: RmStatus, kind: ReplyKind) -> NicSend:
        if status is not RmStatus.OK:
            self.counts[f"refused_{status.name.lower()}"] += 1
        handler = int(kind) << 8 | int(status)
        return NicSend(d.src_node, d.src_port, MsgType.RM_READ_REPLY, b"", handler, (0, 0, req, 0))

    def _locate(
        self, port: int, t: Translation | None, vaddr: int, length: int
    ) -> tuple[RmStatus, memoryview | None]:
        """Where ``[vaddr, vaddr + length)`` lives, through translation ``t``."""
        if t is None:
            return RmStatus.NO_TRANSLATION, None
        if not t.covers(vaddr, length):
            return RmStatus.OUT_OF_RANGE, None
        return self._physical(port, t.region, t.offset + vaddr - t.vaddr, length)

    def _physical(
        self, port: int, region: int, offset: int, length: int
    ) -> tuple[RmStatus, memoryview | None]:
        state = self._ports.get(port)
        memory = None if state is None else state.regions.get(region)
        if memory is None:
            return RmStatus.NO_REGION, None
        if offset < 0 or length < 0 or offset + length > len(memory):
            return RmStatus.OUT_OF_RANGE, None
        return RmStatus.OK, memory[offset : offset + length]

    # -- host records -----------------------------------------------------------------------

    def on_host(
        self, state: PortState, record: hl.HostRecord, *, now: float
    ) -> list[CoreAction] | str:
        """A GRIM record from the host of ``state``; a translation's arrival resumes the
        streams the port refused. Records a host must not send are counted and ignored."""
        port = state.port
        cache = self._cache(port)
        if isinstance(record, RmMapReq):
            cache.program(Translation(record.vaddr, record.size, record.region, record.offset))
            return []
        if isinstance(record, RmUnmapReq):
            cache.invalidate(record.vaddr)
            return []
        if isinstance(record, RmXlateReply):
            if (port, record.asked) in self._asking:
                self._asking.discard((port, record.asked))
                self._asking_per_port[port] -= 1
            if record.size:
                t = Translation(record.vaddr, record.size, record.region, record.offset)
                cache.fill(t)
            else:
                self._negative[(port, record.asked)] = None
                if len(self._negative) > MAX_NEGATIVE:
                    del self._negative[next(iter(self._negative))]
                    self.counts["negative_evicted"] += 1
            return [ResumePort(port)]
        if isinstance(record, RmUpcallSignals):
            state.upcall_signals = record.enable
            if record.enable:
                state.host_pid = record.pid
            return []
        if isinstance(record, RmWatch):
            if not record.enable:
                self._watched.discard(port)
                return []
            self._watched.add(port)
            return [ToPort(port, RmLanded())]  # armed: what landed before is in memory
        self.counts["host_misuse"] += 1
        return []

    def on_timer(self, *, now: float) -> list[CoreAction]:
        """Refuse the lock requests that waited too long."""
        return self._answers(self.locks.on_timer(now=now))

    def next_deadline(self) -> float | None:
        """When the oldest lock request must be refused."""
        return self.locks.next_deadline()

    def deadline_query(self) -> Callable[[], float | None]:
        """The lock table's own (``next_deadline`` only forwards to it)."""
        return self.locks.next_deadline

    def on_peer_dead(self, node: int, *, now: float) -> list[CoreAction]:
        """A dead node's locks are released and its waiting requests dropped."""
        return self._answers(self.locks.peer_dead(node))

    def on_port_closed(self, port: int) -> None:
        """Forget everything about ``port``."""
        self.locks.port_closed(port)
        self._caches.pop(port, None)
        self._watched.discard(port)
        self._asking = {k for k in self._asking if k[0] != port}
        self._asking_per_port.pop(port, None)
        self._negative = {k: None for k in self._negative if k[0] != port}
        self._pinned = {k: v for k, v in self._pinned.items() if k[2] != port}

    # -- queries ----------------------------------------------------------------------------

    def stats(self) -> dict[str, object] | None:
        """Counters and per-port translation-cache statistics, JSON-able."""
        return {
            "counts": dict(self.counts),
            "xlate": {str(p): c.stats() for p, c in self._caches.items()},
            "registry": None if self.registry is None else self.registry.stats(),
            "locks": self.locks.stats(),
        }

    def _cache(self, port: int) -> TranslationCache:
        cache = self._caches.get(port)
        if cache is None:
            cache = TranslationCache(static_entries=self._static, dynamic_entries=self._dynamic)
            self._caches[port] = cache
        return cache
