"""A GRIM endpoint: the host shell behind ``emucluster.am`` and ``emucluster.rm``.

One :class:`Endpoint` owns one GM port, which is one GRIM logical channel (GRIM 4.3.1):
``Endpoint(channel=k)`` opens port ``k`` on this node and talks to port ``k`` of the others,
so each channel has its own go-back-N streams and one channel's NACKs never roll back
another's (GRIM 4.3.2). The module-level ``am``/``rm`` calls use the default endpoint on
channel ``GRIM_CHANNEL``; MPI uses port 2, so both coexist in one program.

Active messages (GRIM 4.4): handlers run in :meth:`Endpoint.poll`, which every call makes
(a handler's own calls drain the NIC but do not run handlers recursively); a handler never
blocks: when the NIC has no send token (or credit) its sends wait in the host overflow queue,
drained by later polls, so the reply deadlock of Fig 4.12 cannot happen while memory lasts.
Unknown handler ids are counted and reported on stderr, never raised at the receiver.

Remote memory (GRIM 4.5) is the endpoint's other half, :class:`emucluster.grim.rm.RemoteMemory`
(blocks, RM requests); the NIC translates virtual addresses through its cache and asks this
endpoint (the :class:`~emucluster.grim.port.Kernel`, the port's sink for GRIM records,
answering inside every drain of the port) on a miss.

Waiting: every wait of the endpoint goes through the port's one wait door
(:meth:`emucluster.port.client.Port.wait_until`, by the wait policy ``EMU_WAIT``).

Ordering (GRIM 4.5.6): messages of one endpoint to one endpoint are executed in injection
order by the receiving NIC, but active messages then wait in the endpoint until it polls,
while remote-memory operations take effect at once. So an RM operation may pass earlier AMs
(its effect is visible before their handlers run); AM->AM, RM->AM and RM->RM never reorder.

Upcalls while the program computes (GRIM 4.5.2): the NIC asks the host for a translation
while the program may be outside the library, and a program that never calls in must still
answer. A real NIC interrupts its host; here the endpoint asks its NIC for SIGUSR1 after every
upcall (``RmUpcallSignals``) and is a client of the host's one signal dispatcher,
:mod:`emucluster.port.signals`: on a signal it drains its port (the :class:`Kernel` answers the
upcall; arrived active messages wait for the next poll) unless the interrupted stack is inside
this endpoint, which is never re-entered: then the dispatcher retries until it has left (or a
drain of the endpoint's own took the record in). Where signals are not available (not the
main thread, no SIGUSR1) upcalls are answered by the endpoint's calls only.

Thread safety: every public method takes the endpoint's lock, so the optional polling thread
(:meth:`Endpoint.start_polling`, GRIM 4.4.2: it runs active-message handlers while the program
computes; it is not needed for upcalls) and the program can share it. It waits for the port to
become readable (:meth:`Port.wait_readable`) without the lock and polls with it.

About 500 lines, most of them this docstring and the public AM calls; remote memory already
lives in :mod:`emucluster.grim.rm` and the pure bookkeeping in ``amcore`` and ``rmalloc``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import sys
import threading
import time
from collections import Counter, deque
from typing import TYPE_CHECKING

from emucluster.config import HostConfig
from emucluster.grim.amcore import HandlerTable, Outbox, OutMsg
from emucluster.grim.port import WAIT_S, Block, Handle, Kernel, RMError, RmRequest
from emucluster.grim.rm import RemoteMemory
from emucluster.port import signals
from emucluster.port.client import ErrorEvent, Port, PortError, RecvEvent, SentEvent
from nicd import contract as hl
from nicd.contract import (
    AM_MAX_HANDLER_ID,
    NIC_PORT,
    REGISTRY_NODE,
    MsgType,
    RmUpcallSignals,
    RmWatch,
    decode_am_reply,
    encode_am_request,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from emucluster.grim.amcore import Args

__all__ = [
    "GRIM_CHANNEL",
    "Block",
    "Endpoint",
    "Handle",
    "RMError",
    "RmRequest",
    "default_endpoint",
]

GRIM_CHANNEL = 3  # the default endpoint's port / logical channel (MPI uses 2)
_U32 = 0xFFFFFFFF
_ERRORS_KEPT = 100
_REASK_S = 1.0  # an unknown handler id is looked up again after this long


class Endpoint(RemoteMemory):
    """A GRIM endpoint on logical channel ``channel`` of this node."""

    def __init__(
        self,
        channel: int = GRIM_CHANNEL,
        *,
        socket_path: str | None = None,
        receive_buffers: int = 64,
        credits: int | None = None,
    ) -> None:
        super().__init__()
        port = Port.open(socket_path, channel, receive_buffers=receive_buffers)
        self.port = port
        self.kernel = Kernel(port, self._on_status)
        """The translation table and the port's GRIM sinks."""
        self.rank = port.node_id
        self.size = port.num_nodes
        self.channel = port.port_id
        self.handlers = HandlerTable()
        self.outbox = Outbox(credits)
        self.counts: Counter[str] = Counter()
        self.errors: deque[str] = deque(maxlen=_ERRORS_KEPT)
        """Receiver-side errors (unknown handler ids, handler exceptions), newest last."""
        self._lock = threading.RLock()
        self._dispatching = False
        self._amq: deque[RecvEvent] = deque()
        self._registry: dict[int, dict[str, int]] = {}
        self._asked: dict[int, float] = {}  # handler id -> when it was last looked up
        self._by_handle: dict[int, RmRequest] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._closed = False
        self._barrier_epoch = 0
        self._barrier_seen: Counter[int] = Counter()  # epoch -> arrivals (rank 0) or release
        self.handlers.register(_BARRIER, self._on_barrier)
        self._watching = 0  # memory waits in progress (RmWatch armed while > 0)
        self._owed = False  # a signal came and no drain of the port began since
        self.signals = signals.register(self)
        """Whether the NIC interrupts this host for translation upcalls."""
        if self.signals:
            port.send_record(RmUpcallSignals(True, os.getpid()))

    # -- active messages --------------------------------------------------------------------

    def register(self, name: str, handler: Callable[[int, Args, bytes], object]) -> None:
        """Register ``handler(src_rank, args, payload)`` locally under ``name``."""
        with self._lock:
            self.handlers.register(name, handler)

    def sync(self, timeout: float | None = WAIT_S) -> dict[str, int]:
        """Publish the local handlers to the job's registry; learn the whole table."""
        with self._lock:
            names = self.handlers.unsynced()
            table = self._ask_registry("sync", names, timeout)
            self.handlers.merge(table, names)
            missing = [n for n in names if n not in table]
            if missing:
                raise RuntimeError(f"the registry is full; not registered: {missing}")
            return table

    def handler_id(self, name: str, timeout: float | None = WAIT_S) -> int:
        """The cluster-wide id of ``name``, asking the registry if it is not known here;
        KeyError if no endpoint has published it."""
        with self._lock:
            hid = self.handlers.id_of(name)
            if hid is None:
                self.counts["registry_lookups"] += 1
                self.handlers.merge(self._ask_registry("lookup", [], timeout))
                hid = self.handlers.id_of(name)
            if hid is None:
                raise KeyError(f"no endpoint has published an active-message handler {name!r}")
            return hid

    def send(
        self,
        dest_rank: int,
        name_or_id: str | int,
        args: Args = (0, 0, 0, 0),
        payload: bytes | bytearray | memoryview = b"",
    ) -> None:
        """Send an active message to ``dest_rank`` for the handler ``name_or_id``."""
        with self._lock:
            self._check_rank(dest_rank)
            hid = name_or_id if isinstance(name_or_id, int) else self.handler_id(name_or_id)
            if not 1 <= hid <= AM_MAX_HANDLER_ID:
                raise ValueError(f"handler id {hid} is outside 1..{AM_MAX_HANDLER_ID}")
            words = tuple(args)
            if len(words) != 4 or not all(isinstance(a, int) and 0 <= a <= _U32 for a in words):
                raise ValueError(f"args must be four 32-bit unsigned ints, not {args!r}")
            msg = OutMsg(dest_rank, self.channel, MsgType.AM_DATA, bytes(payload), hid, words)
            self.counts["am_sent"] += 1
            self._submit(msg)

    def poll(self) -> int:
        """Take in everything the NIC has, drain the overflow queue, and run the handlers of
        waiting active messages (not from inside a handler). Return how many ran."""
        with self._lock:
            self._progress()
            if self._dispatching:
                return 0
            ran = 0
            self._dispatching = True
            try:
                while self._amq:
                    self._run(self._amq.popleft())
                    ran += 1
                    self._progress()
            finally:
                self._dispatching = False
            return ran

    def start_polling(self, interval_s: float = 0.0002) -> None:
        """Run :meth:`poll` in a background thread (GRIM 4.4.2's polling thread)."""
        if self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self.poll()
                    self.port.wait_readable(interval_s)  # without the lock
                except (PortError, OSError, ValueError):  # the port closed under us
                    return

        self._thread = threading.Thread(target=loop, name="grim-poll", daemon=True)
        self._thread.start()

    def stop_polling(self) -> None:
        """Stop the polling thread."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()

    def barrier(self, timeout: float | None = WAIT_S) -> None:
        """Wait until every rank's endpoint on this channel called ``barrier`` (active
        messages through rank 0); also publishes this endpoint's unsynced handlers first,
        so after a barrier every name registered before it resolves everywhere."""
        with self._lock:
            if self.handlers.unsynced():
                self.sync(timeout)
            epoch = self._barrier_epoch = self._barrier_epoch + 1
            hid = self.handler_id(_BARRIER, timeout)
            if self.rank == 0:
                self.wait_for(lambda: self._barrier_seen[epoch] >= self.size - 1, timeout,
                              "barrier", memory=False)  # fmt: skip
                for rank in range(1, self.size):
                    self.send(rank, hid, (epoch, 1, 0, 0))
            else:
                self.send(0, hid, (epoch, 0, 0, 0))
                self.wait_for(lambda: self._barrier_seen[epoch] > 0, timeout, "barrier",
                              memory=False)  # fmt: skip
            del self._barrier_seen[epoch]

    def _on_barrier(self, src: int, args: Args, payload: bytes) -> None:
        self._barrier_seen[args[0]] += 1

    def on_signal(self, frame: FrameType | None, retry: bool) -> bool:
        """The signal dispatcher's call: drain the port (answering translation upcalls)
        unless this endpoint is on the interrupted stack or busy; True while still owed."""
        if not retry:
            self._owed = True
        if not self._owed or self._closed:
            return False
        if signals.inside(frame, (self, self.port, self.kernel)):
            return True
        if not self._lock.acquire(blocking=False):
            return True
        try:
            self.counts["signal_drains"] += 1
            self._progress()
        except (PortError, OSError):  # the port is closing under us: nothing to answer
            pass
        finally:
            self._lock.release()
        return False

    # -- misc -------------------------------------------------------------------------------

    def wait_for(
        self,
        done: Callable[[], bool],
        timeout: float | None = WAIT_S,
        what: str = "event",
        *,
        memory: bool = True,
    ) -> None:
        """Poll (running handlers) until ``done()``; TimeoutError after ``timeout``.

        ``done`` may watch registered memory (a notification word, data an RM write put
        there). Such writes land without a record to this host by default: the executing NIC
        reports only to the writer (GRIM 4.5.5), and a plain RM write has no notify word at
        all. So for the wait (``memory``, the default) the endpoint asks its NIC to report
        every GRIM write landing in this port's memory (``RmWatch``; the NIC answers at once
        with an ``RmLanded``, so a write that landed before the watch was armed is in memory
        when that record arrives) and the wait sleeps until the next record, plain writes and
        notify words alike. Conditions only records can change (requests, handlers, tokens)
        pass ``memory=False`` and cost no watch."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def ready() -> bool:
            self.poll()
            return done()

        with self._lock:
            if memory:
                self._watch(+1)
            try:
                ok = self.port.wait_until(ready, deadline)
            finally:
                if memory:
                    self._watch(-1)
            if not ok:
                raise TimeoutError(f"{what}: nothing after {timeout} s")

    def _watch(self, step: int) -> None:
        """Nested memory waits share one watch: armed by the first, dropped by the last."""
        before = self._watching
        self._watching += step
        if (before == 0) != (self._watching == 0):
            self.port.send_record(RmWatch(self._watching > 0))

    def flush(self, timeout: float | None = WAIT_S) -> None:
        """Wait until the overflow queue is empty and every send has completed."""
        self.wait_for(lambda: not self.outbox.overflow and not self.port.outstanding,
                      timeout, "flush", memory=False)  # fmt: skip

    def stats(self) -> dict[str, object]:
        """Host-side counters, JSON-able."""
        with self._lock:
            return {
                "rank": self.rank,
                "channel": self.channel,
                "counts": dict(self.counts),
                "overflow": {
                    **self.outbox.counts,
                    "peak": self.outbox.overflow_peak,
                    "queued": len(self.outbox.overflow),
                },
                "upcalls_answered": self.kernel.upcalls,
                "handlers": self.handlers.table(),
                "errors": list(self.errors),
            }

    def nic_stats(self) -> dict[str, object]:
        """The NIC's counters (management request over a second connection)."""
        path = HostConfig.from_env().nic_socket or ""
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
            sock.settimeout(10)
            sock.connect(path)
            for rec in hl.encode_record(hl.StatsReq()):
                sock.send(rec)
            reply = hl.Assembler().feed(sock.recv(hl.MAX_RECORD_BYTES))
        assert isinstance(reply, hl.StatsReply)
        return reply.stats

    def close(self) -> None:
        """Stop the polling thread, free the blocks and close the port."""
        if self._closed:
            return
        self.stop_polling()
        if self.signals:
            signals.unregister(self)
            self.signals = False
        with self._lock:
            with contextlib.suppress(TimeoutError, PortError, RMError):
                self.flush(timeout=10.0)  # closing fails what is still in flight
            self._closed = True
            for block in self._blocks.values():
                block.buf.release()
            self._blocks.clear()
            with contextlib.suppress(BufferError):  # views still held: unmapped at exit
                self.port.close()

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------

    def _submit(self, msg: OutMsg) -> None:
        """Hand ``msg`` to the NIC, or (inside a handler, NIC full) to the overflow queue;
        outside handlers wait (polling) until it can go."""
        self._progress()
        port = self.port
        if self._dispatching:
            if self.outbox.admit(msg, port.free_send_tokens, port.outstanding):
                self._send_now(msg)
            return
        if not self.outbox.overflow and self.outbox.may_send(
            port.free_send_tokens, port.outstanding
        ):
            self._send_now(msg)
            return
        self.counts["send_waits"] += 1
        self.wait_for(
            lambda: not self.outbox.overflow
            and self.outbox.may_send(port.free_send_tokens, port.outstanding),
            WAIT_S, "send token", memory=False,
        )  # fmt: skip
        self._send_now(msg)

    def _send_now(self, msg: OutMsg) -> None:
        handle = self.port.send(msg.dest, msg.dst_port, msg.payload, msg_type=msg.msg_type,
                                am_handler=msg.am_handler, args=msg.args)  # fmt: skip
        if isinstance(msg.tag, RmRequest):
            self._by_handle[handle] = msg.tag

    def _progress(self) -> None:
        """Take in events; complete requests; drain the overflow queue."""
        self._owed = False  # this drain reads what a signal announced
        port = self.port
        for event in port.poll():
            if isinstance(event, RecvEvent):
                self._on_recv(event)
            elif isinstance(event, SentEvent):
                self._by_handle.pop(event.handle, None)
            elif isinstance(event, ErrorEvent):
                req = self._by_handle.pop(event.handle, None)
                if req is not None:
                    self._fail(req, RMError(f"{req.what} failed: {event.reason}", event.reason))
                else:
                    self._note(f"send to node {event.dst_node} failed: {event.reason}")
        n = self.outbox.drainable(port.free_send_tokens, port.outstanding)
        for msg in self.outbox.take(n):
            self._send_now(msg)

    def _on_recv(self, event: RecvEvent) -> None:
        if event.src_port == NIC_PORT:
            try:
                req, table = decode_am_reply(event.payload)
            except Exception:  # BadPacket: a garbled reply is counted
                self.counts["bad_registry_reply"] += 1
                return
            self._registry[req] = table
        elif event.msg_type == MsgType.AM_DATA:
            self._amq.append(event)
        else:
            self.counts["not_grim"] += 1

    def _run(self, event: RecvEvent) -> None:
        d = self.handlers.dispatch(event.am_handler)
        if d.name is None and not self._ask_failed(event.am_handler):
            self.counts["registry_lookups"] += 1
            self.handlers.merge(self._ask_registry("lookup", [], WAIT_S))
            d = self.handlers.dispatch(event.am_handler)
        if d.handler is None:
            self.counts["unknown_handler"] += 1
            what = f"id {event.am_handler}" if d.name is None else repr(d.name)
            self._note(f"active message from rank {event.src_node} for handler {what}: "
                       "no such handler on this endpoint; dropped")  # fmt: skip
            return
        self.counts["am_handled"] += 1
        try:
            d.handler(event.src_node, event.args, event.payload)
        except Exception as exc:
            self.counts["handler_errors"] += 1
            self._note(f"handler {d.name!r} raised {type(exc).__name__}: {exc}")
            raise

    def _ask_failed(self, hid: int) -> bool:
        """True if ``hid`` was looked up in vain within the last second (so a stream of
        messages for an unknown id costs one registry round trip a second, not one each)."""
        now = time.monotonic()
        if now - self._asked.get(hid, -_REASK_S) < _REASK_S:
            return True
        self._asked[hid] = now
        return False

    def _ask_registry(self, op: str, names: list[str], timeout: float | None) -> dict[str, int]:
        req = self._next_req
        self._next_req = (req + 1) & _U32 or 1
        payload = encode_am_request(op, req, names)
        self._submit(OutMsg(REGISTRY_NODE, NIC_PORT, MsgType.AM_DATA, payload))
        deadline = None if timeout is None else time.monotonic() + timeout

        def answered() -> bool:
            self._progress()
            return req in self._registry

        if not self.port.wait_until(answered, deadline):
            raise TimeoutError(f"the AM registry on node {REGISTRY_NODE} did not answer")
        return self._registry.pop(req)

    def _note(self, message: str) -> None:
        self.errors.append(message)
        print(f"emucluster.am rank {self.rank}: {message}", file=sys.stderr)

    def _check_rank(self, rank: int) -> None:
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} is outside 0..{self.size - 1}")


_BARRIER = "emucluster.grim.barrier"
_default: Endpoint | None = None
_default_lock = threading.Lock()


def default_endpoint() -> Endpoint:
    """The process's endpoint on ``GRIM_CHANNEL`` (opened on first use, under emurun)."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = Endpoint()
            atexit.register(_default.close)
        return _default
