"""The nicd shell's event-loop callbacks: the UDP link, the PCI sockets, the timer, the actions.

Compiled with the cores (setup.py): every datagram and every host record passes here, and
interpreted it took a third of a busy nicd's time (perf, an 8-byte stream). `nicd.shell.daemon`
owns the rest (sockets, signals, start and stop) and says how a turn of the loop goes.

Every input goes to :class:`~nicd.core.nic.NicCore` with ``now`` from the monotonic clock (uvloop's
``loop.time()`` only has millisecond resolution, too coarse for loopback RTTs); the actions
that come back are carried out at once, except frames for the link while host records or a
timer are being handled: those wait for the end of the turn and go to each peer as one
bundle (:mod:`nicd.link.bundle`).

Why over 300 lines: it is one event loop's callbacks (link, timer, host connections, the
actions they yield), which share the frames held for the turn and the armed timer; what
stands alone (a connection's state, routes, the memfd mapping) is already in its own module.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import time
from typing import Final, cast

from emutrace.kinds import K_HOST_IN, K_HOST_OUT, K_PKT_RECV, K_PKT_SEND, K_SIGNAL_RAISE, K_TIMER
from emutrace.recorder import Facts, Recorder
from nicd import hostlink as hl
from nicd.core.actions import NicAction, RaiseSignal, ToHost, Transmit
from nicd.core.nic import NicCore
from nicd.core.routing import Addr
from nicd.errors import BadPacket, ProtocolViolation, UsageError
from nicd.link.bundle import encode_bundle, is_bundle, plan_bundles, split_bundle_untrusted
from nicd.shell.hostconn import HostConn
from nicd.shell.memfd import map_sealed_memfd
from nicd.shell.routes import resolve_routes

__all__ = ["HOST_BUFFER_BYTES", "LINK_RETRY_S", "Shell"]

log: Final = logging.getLogger("nicd")
HOST_BUFFER_BYTES: Final = 1024 * 1024  # kernel socket buffers asked for on each PCI connection
LINK_RETRY_S: Final = 0.0005  # when the link said EAGAIN, try the control queue again after this
_SHELL_RECORDS: Final = frozenset(
    {hl.SetRoutesReq, hl.AddRoutesReq, hl.RegisterReq, hl.DeregisterReq}
)
"""Host records the shell takes part in before (or instead of) the core (``_shell_record``)."""


class Shell:
    """The callbacks of one nicd's event loop: the UDP link (a datagram protocol, by its
    methods: asyncio asks for no base class), the host connections, the timer."""

    def __init__(
        self, core: NicCore, loop: asyncio.AbstractEventLoop, link_sock: socket.socket
    ) -> None:
        self.core = core
        self.loop = loop
        self.link_sock = link_sock
        self._link_watched = False
        self.udp: asyncio.DatagramTransport | None = None
        self.conns: dict[int, HostConn] = {}
        self._next_conn = 1
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._flush_scheduled = False
        self._batch: dict[Addr, list[Transmit]] | None = None
        """Frames held to the end of this turn of the loop, by peer (see :meth:`_send_batch`)."""
        self.tracer: Recorder | None = None  # emurun --trace
        self.facts: Facts | None = None  # what the cores noted for the trace, while tracing

    # -- link -------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.udp = cast("asyncio.DatagramTransport", transport)  # uvloop's is no subclass

    def datagram_received(self, data: bytes, addr: Addr) -> None:
        if is_bundle(data):
            self._bundle_received(data, (addr[0], addr[1]))
        else:
            if self.tracer is not None:
                self.tracer.emit_packet(K_PKT_RECV, data)
            actions = self.core.on_datagram(data, (addr[0], addr[1]), now=time.monotonic())
            if actions or self.facts:
                self._execute(actions)
        if self._flush_scheduled:
            return
        if self.core.flush_due(now=time.monotonic()):  # an ACK to send once the burst is read
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)
        else:  # nothing due: no extra turn of the loop (a system call) for a flush of nothing
            self._rearm()

    def _bundle_received(self, data: bytes, addr: Addr) -> None:
        try:
            frames = split_bundle_untrusted(data)
        except BadPacket as exc:
            self.core.on_link_error(exc.reason)
            return
        core = self.core
        core.on_bundle_in(len(frames))
        self._batch = {}
        try:
            for frame in frames:
                if self.tracer is not None:
                    self.tracer.emit_packet(K_PKT_RECV, frame)
                actions = core.on_datagram(frame, addr, now=time.monotonic())
                if actions or self.facts:
                    self._execute(actions)
        finally:
            self._send_batch()

    def error_received(self, exc: Exception) -> None:
        self.core.on_link_error("socket_error")  # e.g. ICMP port unreachable from a dead peer

    def connection_lost(self, exc: Exception | None) -> None:
        """The link's transport closed (``close``): nothing to do."""

    def pause_writing(self) -> None:
        """The link's flow control: the shell watches EAGAIN itself (``_watch_link``)."""

    def resume_writing(self) -> None:
        """See ``pause_writing``."""

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._execute(self.core.flush(now=time.monotonic()))
        self._rearm()

    # -- timer ------------------------------------------------------------------------------

    def _rearm(self) -> None:
        # Re-arm for an earlier deadline. For a later one only when the armed timer would
        # fire in less than half the time to it: a timer that fires early costs a wake-up
        # and a no-op on_timer, which pays when the deadline creeps (the RTO moves a little
        # with each ACK of a stream), not when it jumped (a ping-pong's delayed ACK rode on
        # the reply, and the next deadline is the RTO, several times further).
        deadline = self.core.next_deadline()
        if deadline is None:
            return
        armed = self._timer_at
        if armed is not None and armed <= deadline:
            now = time.monotonic()
            if armed - now >= (deadline - now) / 2:
                return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = self.loop.call_later(max(0.0, deadline - time.monotonic()), self._fire)

    def _fire(self) -> None:
        deadline = self._timer_at
        self._timer = self._timer_at = None
        now = max(deadline or 0.0, time.monotonic())
        if self.tracer is not None:
            self.tracer.emit(K_TIMER)
        self._batch = {}
        try:
            self._execute(self.core.on_timer(now=now))
        finally:
            self._send_batch()
        self._rearm()

    # -- host connections -------------------------------------------------------------------

    def accept(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, HOST_BUFFER_BYTES)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, HOST_BUFFER_BYTES)
            conn = HostConn(self._next_conn, sock, self.core.config.max_message)
            self._next_conn += 1
            self.conns[conn.conn_id] = conn
            self.loop.add_reader(sock.fileno(), self._readable, conn)

    def _readable(self, conn: HostConn) -> None:
        started = time.monotonic()
        self._batch = {}
        try:
            self._read_records(conn)
        finally:
            self._send_batch()
        self._rearm()
        hold = self.core.on_host_batch(started, time.monotonic())
        if hold > 0.0:
            # The host is streaming: let it fill the socket while this NIC "works", so the
            # next turn reads a batch (nicd.core.doorbell). A blocking sleep, as a NIC busy with a
            # burst serves nothing else either; the link's datagrams wait in the socket.
            time.sleep(hold)

    def _read_records(self, conn: HostConn) -> None:
        # A budget of records per wake-up: the reader stays registered (level-triggered), so
        # the rest waits for the next turn of the loop and the link is served in between.
        # Per record: one receive, one feed, one core call; the records the shell itself
        # takes part in (routes, regions) are told apart by one set lookup.
        core, conns, conn_id = self.core, self.conns, conn.conn_id
        receive, feed, on_host = conn.receive, conn.assembler.feed, core.on_host
        budget = core.config.host_records_per_wake
        while conn_id in conns:
            if budget <= 0:
                core.on_host_read_yield()
                break
            budget -= 1
            record = receive()
            if record is None:
                break
            if not record:
                self._disconnect(conn)
                break
            try:
                whole = feed(record)
            except ProtocolViolation as exc:
                log.warning("host connection %d: %s; closing it", conn_id, exc)
                core.on_link_error("host_record")
                self._disconnect(conn)
                break
            if whole is None:
                continue
            if self.tracer is not None:
                self.tracer.emit(K_HOST_IN, conn_id, len(record))
            now = time.monotonic()
            if type(whole) in _SHELL_RECORDS:
                whole = self._shell_record(conn, whole, now)
                if whole is None:
                    continue
            if conn.fds:
                conn.close_fds()  # a descriptor that came with any other record is not wanted
            self._execute(on_host(conn_id, whole, now=now))

    def _shell_record(
        self, conn: HostConn, whole: hl.HostRecord, now: float
    ) -> hl.HostRecord | None:
        """A record the shell takes part in: routes to resolve (returned resolved, for the
        core's ``on_host``), a region to map or to forget (handled here: None)."""
        if isinstance(whole, hl.SetRoutesReq | hl.AddRoutesReq):
            try:  # numeric only: no DNS lookup may block the event loop
                return type(whole)(resolve_routes(whole.routes, numeric_only=True))
            except UsageError as exc:
                log.warning("host connection %d: routes refused: %s", conn.conn_id, exc)
                self.core.on_link_error("host_routes")
                self._execute([ToHost(conn.conn_id, hl.Refused(str(exc)))])
                return None
        if isinstance(whole, hl.RegisterReq):
            memory, why = map_sealed_memfd(conn.pop_fd(), whole.size)
            if memory is None:
                log.warning(
                    "host connection %d: region %d refused: %s", conn.conn_id, whole.region, why
                )
            self._execute(self.core.on_register(conn.conn_id, whole, memory, now=now))
        elif isinstance(whole, hl.DeregisterReq):
            self.core.on_deregister(conn.conn_id, whole.region)
        return None

    def _disconnect(self, conn: HostConn) -> None:
        if self.conns.pop(conn.conn_id, None) is None:
            return
        self.loop.remove_reader(conn.sock.fileno())
        if conn.writing:
            self.loop.remove_writer(conn.sock.fileno())
        conn.close()
        self._execute(self.core.on_disconnect(conn.conn_id, now=time.monotonic()))

    def _write_host(self, conn: HostConn, records: list[bytes]) -> None:
        if conn.conn_id not in self.conns:
            return
        self.core.on_host_written()
        if conn.outq:
            self._enqueue(conn, records)
            return
        for i, record in enumerate(records):
            try:
                conn.sock.send(record)
            except (BlockingIOError, InterruptedError):
                conn.writing = True
                self.loop.add_writer(conn.sock.fileno(), self._writable, conn)
                self._enqueue(conn, records[i:])
                return
            except OSError:
                self.loop.call_soon(self._disconnect, conn)
                return

    def _enqueue(self, conn: HostConn, records: list[bytes]) -> None:
        """Queue records for a host whose socket is full. Past the bound the connection is
        closed rather than records dropped: they are the port's events (SENT, ERROR,
        deliveries), each promised exactly once, so losing one silently would hang the host,
        while a closed port fails its sends loudly and the host sees why."""
        conn.outq.extend(records)
        conn.outq_bytes += sum(len(r) for r in records)
        limit = max(self.core.config.host_out_bytes, self.core.config.max_message + 65536)
        if conn.outq_bytes > limit:
            log.warning("host connection %d: over %d bytes queued that the host does not "
                        "read; closing it", conn.conn_id, limit)  # fmt: skip
            self.core.on_link_error("host_outq_full")
            conn.outq.clear()
            conn.outq_bytes = 0
            self._disconnect(conn)

    def _writable(self, conn: HostConn) -> None:
        while conn.outq:
            try:
                conn.sock.send(conn.outq[0])
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._disconnect(conn)
                return
            conn.outq_bytes -= len(conn.outq.popleft())
        conn.writing = False
        self.loop.remove_writer(conn.sock.fileno())

    # -- actions ----------------------------------------------------------------------------

    def _execute(self, actions: list[NicAction]) -> None:
        if self.facts and self.tracer is not None:
            self.tracer.emit_facts(self.facts)
        core = self.core
        batch = self._batch
        for action in actions:
            # by exact type (the NicAction classes are compiled: none has a subclass)
            if type(action) is Transmit:
                if core.control_queue and core.queue_behind(action):  # keeps it in order
                    continue
                if batch is None:
                    self._send(action.datagram, (action,))
                    continue
                if self.tracer is not None:  # when the NIC chose to send it, among its inputs
                    self.tracer.emit_packet(K_PKT_SEND, action.datagram)
                frames = batch.get(action.addr)
                if frames is None:
                    batch[action.addr] = [action]
                else:
                    frames.append(action)
            elif type(action) is ToHost:
                conn = self.conns.get(action.conn)
                if conn is not None:
                    if self.tracer is not None:
                        self.tracer.emit(K_HOST_OUT, action.conn)
                    self._write_host(conn, hl.encode_record(action.record))
            elif type(action) is RaiseSignal:
                self._raise_signal(action)

    def _send(
        self,
        datagram: bytes,
        frames: tuple[Transmit, ...] | list[Transmit],
        *,
        traced: bool = False,
    ) -> None:
        """Put one datagram (``frames``' one frame, or their bundle) on the link. Frames not
        ``traced`` yet are traced once sent; held frames were traced when the core made them,
        so the trace keeps each send after the input that caused it (a bundle leaves at the
        end of the turn, after later inputs of the same turn)."""
        try:
            self.link_sock.sendto(datagram, frames[0].addr)
        except (BlockingIOError, InterruptedError):
            for action in frames:
                self.core.on_link_busy(action)
            self._watch_link()
            return
        except OSError:
            self.core.on_link_error("socket_error")  # e.g. unreachable network
            return
        if self.tracer is not None and not traced:
            for action in frames:
                self.tracer.emit_packet(K_PKT_SEND, action.datagram)

    def _send_batch(self) -> None:
        """Send the frames held this turn: to each peer in order, several as one bundle."""
        batch = self._batch
        self._batch = None
        if not batch:
            return
        for frames in batch.values():
            if len(frames) == 1:
                self._send(frames[0].datagram, frames, traced=True)
                continue
            for run in plan_bundles([len(action.datagram) for action in frames]):
                some = frames[run.start : run.stop]
                if len(some) == 1:
                    self._send(some[0].datagram, some, traced=True)
                else:
                    self.core.on_bundle_out(len(some))
                    bundle = encode_bundle([action.datagram for action in some])
                    self._send(bundle, some, traced=True)

    def _raise_signal(self, action: RaiseSignal) -> None:
        # Only the process that owns the connection may be signalled (SO_PEERCRED), so a
        # host cannot aim the NIC's signals at someone else. Fail closed: a connection whose
        # peer pid is unknown (SO_PEERCRED gave none, e.g. across pid namespaces) gets no
        # signal at all, never one to the pid the host named.
        # The signal goes through the pidfd taken at connect time: if that process is gone
        # it fails (counted), and never reaches a process that reused its pid.
        conn = self.conns.get(action.conn)
        if conn is not None and (conn.pid is None or conn.pidfd is None):
            self.core.on_link_error("signal_unverified")
            return
        if conn is None or conn.pid != action.pid:
            self.core.on_link_error("signal_refused")
            return
        assert conn.pidfd is not None
        if self.tracer is not None:
            self.tracer.emit(K_SIGNAL_RAISE, action.pid)
        try:
            signal.pidfd_send_signal(conn.pidfd, signal.SIGUSR1)
        except OSError:
            self.core.on_link_error("signal_failed")  # the host exited

    def _watch_link(self) -> None:
        # uvloop refuses add_writer on a transport's fd, so retry after a moment instead.
        if not self._link_watched and self.core.control_waiting:
            self._link_watched = True
            self.loop.call_later(LINK_RETRY_S, self._link_writable)

    def _link_writable(self) -> None:
        self._link_watched = False
        self._execute(self.core.on_link_writable())

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for conn in list(self.conns.values()):
            self.loop.remove_reader(conn.sock.fileno())
            if conn.writing:
                self.loop.remove_writer(conn.sock.fileno())
            conn.close()
        self.conns.clear()
        if self.udp is not None:
            self.udp.close()
