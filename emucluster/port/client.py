"""The host side of the PCI bus: a GM-port client over nicd's Unix SOCK_SEQPACKET socket.

The analogue of the GM library: open a port, send with send tokens, provide receive
buffers (receive tokens), and poll or wait for RECV / SENT / ERROR events. This module is the
socket shell only: the bookkeeping (handles, tokens, queues, which sink takes which record
type) is the pure `emucluster.port.state.PortState`, and every wait goes through the wait
policy of `emucluster.port.wait` (``EMU_WAIT``: ``spin`` polls like GM and burns CPU as on the
real cluster, ``block`` sleeps in the kernel, ``hybrid`` spins ``EMU_SPIN_US`` then blocks).

Services of a port (GRIM's endpoint, the NICVM client) take their own record types with
`Port.register_sink`, write with `Port.send_record` and wait with `Port.pump` /
`Port.wait_until`: the host has one loop, and nothing outside reads the socket.

Signals (thesis 3.4.1): ``send_collective`` sends the application-bypass packet type, and
``enable_signals`` / ``disable_signals`` tell the NIC whether such a message arriving should
raise SIGUSR1 in this process (off when the port opens). A blocking wait sleeps in
``select``, which PEP 475 resumes after a Python signal handler ran, so handlers run during
waits too; installing one is the caller's business (``emucluster.offload.app_bypass.shell``).

A little over 500 lines: it is GM's whole client API (open, close, tokens, sends of four
kinds, registered memory, signals, statistics, the one wait door), each call a short wrapper
that writes a record and waits; the logic that could be tested alone is already in `state`.
"""

from __future__ import annotations

import os
import select
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from emucluster.config import ENV_WAIT, HostConfig
from emucluster.errors import EmuclusterError
from emucluster.port.sharedmem import SealedSegment
from emucluster.port.state import Event, PortState, RecordRefused, UnexpectedRecord
from emucluster.port.wait import Waiter, WaitPolicy
from nicd import contract as hl
from nicd.contract import (
    ErrorEvent,
    McastErrorEvent,
    MsgType,
    RecvEvent,
    RmWriteEvent,
    SentEvent,
    watch_lifeline,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "ErrorEvent",
    "Event",
    "McastChildDeadError",
    "McastErrorEvent",
    "Port",
    "PortError",
    "RecvEvent",
    "Region",
    "RmWriteEvent",
    "SendFailedError",
    "SentEvent",
    "WaitPolicy",
    "wait_policy_from_env",
]

R = TypeVar("R")
_SOCKET_BUFFER_BYTES = 1024 * 1024
_Args = tuple[int, int, int, int]
_NO_ARGS: _Args = (0, 0, 0, 0)


@dataclass(slots=True)
class Region:
    """Registered memory: a sealed memfd segment this host and its NIC both map."""

    id: int
    """The region id peers name in remote-memory writes."""
    name: str
    """The memfd's name (``emu_<job>_...``), for diagnostics only: it is not in /dev/shm."""
    size: int
    segment: SealedSegment

    @property
    def buf(self) -> memoryview:
        """The memory itself."""
        return self.segment.buf


class PortError(EmuclusterError):
    """The NIC refused a request, or the PCI connection failed. Fix the call or the setup."""


class SendFailedError(PortError):
    """A send will never be delivered (dead peer, closed port, no route, too large)."""

    def __init__(self, event: ErrorEvent) -> None:
        super().__init__(f"send {event.handle} to node {event.dst_node} failed: {event.reason}")
        self.event = event
        self.handle = event.handle
        self.dst_node = event.dst_node
        self.reason = event.reason


class McastChildDeadError(PortError):
    """A child of a multicast group this node sends to is dead (its NIC stopped
    acknowledging): its subtree gets nothing more on the group (seed 001)."""

    def __init__(self, event: McastErrorEvent) -> None:
        super().__init__(
            f"multicast group {event.group}: child node {event.child} is dead ({event.reason})"
        )
        self.event = event
        self.group = event.group
        self.child = event.child
        self.reason = event.reason


def wait_policy_from_env() -> tuple[WaitPolicy, float]:
    """``(policy, spin seconds)`` from ``EMU_WAIT`` and ``EMU_SPIN_US``."""
    config = HostConfig.from_env()
    if config.wait not in ("spin", "block", "hybrid"):
        raise PortError(f"{ENV_WAIT}={config.wait!r}: expected spin, block or hybrid")
    return config.wait, config.spin_us / 1e6  # type: ignore[return-value]


class Port:
    """One open GM port of this host's NIC. Not thread-safe."""

    def __init__(
        self,
        sock: socket.socket,
        opened: hl.Opened,
        *,
        auto_replenish: bool,
        wait: WaitPolicy,
        spin_s: float,
    ) -> None:
        self._sock = sock
        self.port_id = opened.port
        """This port's number (the GRIM logical channel)."""
        self.node_id = opened.node_id
        """This node's id (its rank)."""
        self.num_nodes = opened.num_nodes
        """Nodes in the job (from the NIC's routing table)."""
        self.state = PortState(opened.send_tokens, auto_replenish=auto_replenish)
        """The bookkeeping (tokens, handles, queues, record sinks)."""
        self.waiter = Waiter(wait, spin_s)
        """The wait policy."""
        self._assembler = hl.Assembler()
        self._closed = False
        self._empty = False  # the last read found the socket empty, and none came since
        self._regions: dict[int, Region] = {}
        self._next_region = 1

    @classmethod
    def open(
        cls,
        socket_path: str | None = None,
        port: int | None = None,
        *,
        receive_buffers: int = 64,
        auto_replenish: bool = True,
        wait: WaitPolicy | None = None,
        timeout: float = 10.0,
    ) -> Port:
        """Connect to the NIC at ``socket_path`` (default ``EMU_NIC_SOCKET``) and open
        ``port`` (default: any free one) with ``receive_buffers`` receive tokens."""
        path = socket_path or HostConfig.from_env().nic_socket
        if not path:
            raise PortError("no NIC socket: pass socket_path or run under emurun (EMU_NIC_SOCKET)")
        watch_lifeline()  # started by a launcher: stop when it dies (no-op otherwise)
        env_policy, spin_s = wait_policy_from_env()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
                sock.setsockopt(socket.SOL_SOCKET, opt, _SOCKET_BUFFER_BYTES)
            sock.settimeout(timeout)
            sock.connect(path)
            for record in hl.encode_record(hl.OpenReq(hl.ANY_PORT if port is None else port)):
                sock.send(record)
            reply = hl.Assembler().feed(sock.recv(hl.MAX_RECORD_BYTES))
        except OSError as exc:
            sock.close()
            raise PortError(f"cannot open a port on the NIC at {path}: {exc}") from exc
        if not isinstance(reply, hl.Opened):
            sock.close()
            reason = reply.reason if isinstance(reply, hl.Refused) else repr(reply)
            raise PortError(f"the NIC refused to open port {port}: {reason}")
        sock.setblocking(False)
        self = cls(
            sock, reply, auto_replenish=auto_replenish, wait=wait or env_policy, spin_s=spin_s
        )
        if receive_buffers:
            self.provide_receive_buffers(receive_buffers)
            self.state.provide_batch = max(1, receive_buffers // 4)
        return self

    @property
    def free_send_tokens(self) -> int:
        """Sends this port may still start before one completes."""
        return self.state.free_send_tokens

    @property
    def outstanding(self) -> int:
        """Sends started and not yet completed."""
        return len(self.state.outstanding)

    @property
    def wait_policy(self) -> WaitPolicy:
        """``spin``, ``block`` or ``hybrid``; may be changed between waits."""
        return self.waiter.policy

    @wait_policy.setter
    def wait_policy(self, policy: WaitPolicy) -> None:
        self.waiter.policy = policy

    # -- requests ---------------------------------------------------------------------------

    def send(self, dst_node: int, dst_port: int, payload: bytes | bytearray | memoryview, *,
             msg_type: int = 1, am_handler: int = 0, args: _Args = _NO_ARGS,
             timeout: float | None = None) -> int:  # fmt: skip
        """Start sending ``payload`` to port ``dst_port`` of node ``dst_node``; return its
        handle. Waits for a send token when all are in use."""
        handle = self._start_send(timeout)
        req = hl.SendReq(handle, dst_node, dst_port, bytes(payload), msg_type, am_handler, args)
        self.send_record(req)
        return handle

    def rm_write(self, dst_node: int, dst_port: int, region: int, offset: int,
                 payload: bytes | bytearray | memoryview, *, notify: tuple[int, int] = (0, 0),
                 timeout: float | None = None) -> int:  # fmt: skip
        """Remote-memory write (GRIM RM-P): the destination NIC places ``payload`` at
        ``offset`` of its host's region ``region`` and tells that host with an
        RmWriteEvent carrying ``notify``; no receive token is used. Completes like a send."""
        args = (region, offset, *notify)
        return self.send(
            dst_node, dst_port, payload, msg_type=MsgType.RM_WRITE_P, args=args, timeout=timeout
        )

    def send_collective(self, dst_node: int, dst_port: int,
                        payload: bytes | bytearray | memoryview, *, flags: int = 0,
                        args: _Args = _NO_ARGS, timeout: float | None = None) -> int:  # fmt: skip
        """Send an application-bypass collective message (``MsgType.AB_COLL``): like `send`,
        but its arrival raises a signal at the destination if that port enabled signals.
        ``flags`` travel in the AM-handler field (16 bits)."""
        return self.send(dst_node, dst_port, payload, msg_type=MsgType.AB_COLL,
                         am_handler=flags, args=args, timeout=timeout)  # fmt: skip

    def enable_signals(self, seen: int) -> None:
        """Ask the NIC to send this process SIGUSR1 when an application-bypass message
        arrives (at most one pending). This also acknowledges the last signal; ``seen`` is
        how many such messages this side has taken in, so the NIC signals again at once if
        more have arrived."""
        self.send_record(hl.SignalCtl(True, os.getpid(), seen & 0xFFFFFFFF))

    def disable_signals(self) -> None:
        """No more signals from the NIC (a pending one is forgotten)."""
        self.send_record(hl.SignalCtl(False, os.getpid(), 0))

    def register_memory(self, size: int, *, timeout: float = 10.0) -> Region:
        """Create ``size`` bytes of shared memory and register it with the NIC."""
        region_id = self._next_region
        self._next_region += 1
        job = HostConfig.from_env().job_id or str(os.getpid())
        name = f"emu_{job}_{self.node_id}_{self.port_id}_{region_id}"
        segment = SealedSegment(name, max(1, size))
        region = Region(region_id, name, size, segment)
        self._regions[region_id] = region
        self.send_record(hl.RegisterReq(region_id, max(1, size), name), fd=segment.fd)
        registered = self.state.registered
        if not self.wait_until(lambda: region_id in registered, time.monotonic() + timeout):
            self.deregister_memory(region)
            raise TimeoutError("the NIC did not confirm the registration")
        return region

    def deregister_memory(self, region: Region) -> None:
        """Tell the NIC to forget ``region``, then free the shared memory."""
        if self._regions.pop(region.id, None) is None:
            return
        self.state.registered.discard(region.id)
        if not self._closed:
            self.send_record(hl.DeregisterReq(region.id))
        region.segment.close()

    def provide_receive_buffers(self, count: int) -> None:
        """Give the NIC ``count`` more receive tokens."""
        req = self.state.provide(count)
        if req is not None:
            self.send_record(req)

    def send_record(self, record: hl.HostRecord, *, fd: int | None = None) -> None:
        """Write one record to the NIC (a service's request: GRIM, NICVM); ``fd``, if given,
        travels with the record's first chunk (SCM_RIGHTS)."""
        for chunk in hl.encode_record(record):
            while True:
                try:
                    if fd is None:
                        self._sock.send(chunk)
                    else:
                        socket.send_fds(self._sock, [chunk], [fd])
                        fd = None
                    break
                except (BlockingIOError, InterruptedError):
                    # The NIC is behind: take in what it has for us, then wait to write.
                    self._drain()
                    select.select([self._sock], [self._sock], [], 1.0)
                except OSError as exc:
                    raise PortError(f"lost the NIC: {exc}") from exc

    def register_sink(self, record_type: type[R], sink: Callable[[R], None]) -> None:
        """Hand every record of ``record_type`` the NIC sends to ``sink`` (run while the
        port drains, inside whatever call drains it) instead of its default sink."""
        self.state.register_sink(record_type, sink)

    # -- events and waits -------------------------------------------------------------------

    def poll(self) -> list[Event]:
        """Every event available now, without waiting."""
        self._drain()
        return self.state.take_events()

    def pump(self, deadline: float | None) -> bool:
        """Take in what the NIC sent, waiting by the wait policy until at least one record
        arrived; False at ``deadline`` (monotonic seconds; None waits for ever).

        Two reads fewer than a full drain: none first when the last read found the socket
        empty (the wait looks at it anyway), and the records are read up to the first that
        brought a message (RECV or RM write: what a wait for data waits for) and the rest
        left for the next read, instead of one more read ending in EAGAIN. Completions
        (SENT) do not stop the read: a wait for data would only go round again."""
        if not self._empty and self._drain(stop_at_message=True):
            return True
        provide = self.state.give_back(low_only=True)  # never wait with the NIC short
        if provide is not None:
            self.send_record(provide)
        return self.waiter.wait(self._sock.fileno(), self._drain_to_message, deadline)

    def wait_until(self, ready: Callable[[], bool], deadline: float | None) -> bool:
        """Pump until ``ready()``; False at ``deadline``. ``ready`` is looked at after each
        record, so it must be one only records can change (GRIM's memory waits arm a watch
        at their NIC for that, see `emucluster.grim.endpoint.Endpoint.wait_for`)."""
        return self.waiter.until(ready, self.pump, deadline)

    def wait_readable(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until the NIC has sent something, reading nothing
        (GRIM's optional polling thread waits here without holding its endpoint's lock, then
        polls)."""
        return self.waiter.readable(self._sock.fileno(), time.monotonic() + timeout)

    def wait(self, timeout: float | None = None) -> Event | None:
        """The next event of any kind, or None after ``timeout`` seconds."""
        state = self.state
        found: list[Event] = []

        def got() -> bool:
            event = state.next_event()
            if event is not None:
                found.append(event)
            return bool(found)

        self.wait_until(got, _deadline(timeout))
        return found[0] if found else None

    def recv(self, timeout: float | None = None) -> RecvEvent:
        """The next message. SENT events are absorbed; an ERROR raises SendFailedError;
        remote-memory write events stay queued for ``wait`` and ``poll``."""
        found: list[RecvEvent] = []

        def got() -> bool:
            self._raise_failures()
            event = self.state.next_message()
            if event is not None:
                found.append(event)
            return bool(found)

        if not self.wait_until(got, _deadline(timeout)):
            raise TimeoutError(f"no message within {timeout} s")
        return found[0]

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every send started so far has completed; raise on the first failure."""
        state = self.state

        def done() -> bool:
            self._raise_failures()
            return not state.outstanding

        if not self.wait_until(done, _deadline(timeout)):
            raise TimeoutError(f"{len(state.outstanding)} sends still outstanding")

    def close(self) -> None:
        """Close the port (and free its registered memory); sends in flight fail at the NIC."""
        if self._closed:
            return
        self._closed = True
        for region in list(self._regions.values()):
            region.segment.close()
        self._regions.clear()
        try:
            self._sock.setblocking(True)
            self._sock.settimeout(1.0)
            for record in hl.encode_record(hl.CloseReq()):
                self._sock.send(record)
        except OSError:
            pass
        finally:
            self._sock.close()

    def fileno(self) -> int:
        """The PCI socket's descriptor, for select/poll loops."""
        return self._sock.fileno()

    def __enter__(self) -> Port:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- multicast (seed 001) -----------------------------------------------------------------

    def create_group(self, group: int, root: int, parent: int | None, children: Sequence[int],
                     *, epoch: int = 0, update: bool = False,
                     timeout: float = 10.0) -> None:  # fmt: skip
        """Post this node's part of multicast group ``group`` to the NIC: the ``root``, this
        node's ``parent`` (None at the root) and ``children`` in sending order (build them
        with ``emucluster.offload.nic_mcast.trees``; every member posts its own part, all with the
        same ``epoch``). ``update`` replaces the group's tree (a new epoch). This port
        becomes the group's port: it multicasts at the root and receives elsewhere.
        Raises PortError if the NIC refuses (id taken, bad tree)."""
        req = hl.McastGroupReq(group, root, parent, tuple(children), epoch, update)
        self._group_request(req, group, timeout)

    def update_group(self, group: int, root: int, parent: int | None, children: Sequence[int],
                     *, epoch: int, timeout: float = 10.0) -> None:  # fmt: skip
        """Replace group ``group``'s tree with a new one under a new ``epoch``; multicasts
        still in flight on the old tree end with an ERROR."""
        self.create_group(group, root, parent, children, epoch=epoch, update=True,
                          timeout=timeout)  # fmt: skip

    def free_group(self, group: int, *, timeout: float = 10.0) -> None:
        """Free group ``group`` at this NIC: its id is free at once; multicasts still in
        flight on it complete as usual (the NIC retires the group until they are over)."""
        self._group_request(hl.McastFreeReq(group), group, timeout)

    def free_groups(self, groups: Sequence[int], *, timeout: float = 10.0) -> None:
        """`free_group` for each of ``groups`` (distinct), waiting once for all answers."""
        groups_ok = self.state.groups_ok
        for group in groups:
            groups_ok.discard(group)
            self.send_record(hl.McastFreeReq(group))
        if not self.wait_until(lambda: groups_ok.issuperset(groups), time.monotonic() + timeout):
            raise TimeoutError(f"the NIC did not confirm freeing multicast groups {groups}")
        groups_ok.difference_update(groups)

    def multicast(self, group: int, payload: bytes | bytearray | memoryview, *,
                  am_handler: int = 0, args: _Args = _NO_ARGS,
                  timeout: float | None = None) -> int:  # fmt: skip
        """At the group's root: hand ``payload`` to the NIC once; it sends every packet to
        each child by header rewrite and the children's NICs forward it on (no host
        involved). Every other member gets a RecvEvent with ``mcast_group == group`` and
        ``src_node == root``. Returns a handle that completes like a send (SENT once every
        child acknowledged; ERROR naming a dead child)."""
        handle = self._start_send(timeout)
        self.send_record(hl.McastSendReq(handle, group, bytes(payload), am_handler, args))
        return handle

    def multisend(self, dests: Sequence[int], dst_port: int,
                  payload: bytes | bytearray | memoryview, *, msg_type: int = 1,
                  am_handler: int = 0, args: _Args = _NO_ARGS,
                  timeout: float | None = None) -> int:  # fmt: skip
        """Send one message to port ``dst_port`` of every node in ``dests`` (distinct): one
        request to the NIC, which replicates it; receivers get ordinary RecvEvents. One
        handle for all copies: SENT when every copy was acknowledged, else ERROR."""
        handle = self._start_send(timeout)
        self.send_record(hl.MultiSendReq(handle, tuple(dests), dst_port, bytes(payload),
                                         msg_type, am_handler, args))  # fmt: skip
        return handle

    # -- internals --------------------------------------------------------------------------

    def _start_send(self, timeout: float | None) -> int:
        """A handle and send token for one send, waiting for a token when all are in use."""
        state = self.state
        handle = state.start_send()
        if handle is None:
            if not self.wait_until(lambda: state.free_send_tokens > 0, _deadline(timeout)):
                raise TimeoutError("no send token came back in time")
            handle = state.start_send()
            assert handle is not None
        return handle

    def _group_request(self, req: hl.HostRecord, group: int, timeout: float) -> None:
        groups_ok = self.state.groups_ok
        groups_ok.discard(group)
        self.send_record(req)
        if not self.wait_until(lambda: group in groups_ok, time.monotonic() + timeout):
            raise TimeoutError(f"the NIC did not confirm multicast group {group}")
        groups_ok.discard(group)

    def _raise_failures(self) -> None:
        event = self.state.take_failure()
        if isinstance(event, ErrorEvent):
            raise SendFailedError(event)
        if isinstance(event, McastErrorEvent):
            raise McastChildDeadError(event)

    def _drain_to_message(self) -> int:
        """`_drain` up to the first record that brought a message (`pump`'s wait)."""
        return self._drain(stop_at_message=True)

    def _drain(self, *, stop_at_message: bool = False) -> int:
        """Read every record available now (``stop_at_message``: up to the first that queued a
        RECV or RM-write event) and route it to its sink; return how many."""
        got = 0
        state = self.state
        while True:
            try:
                chunk = self._sock.recv(hl.MAX_RECORD_BYTES)
            except (BlockingIOError, InterruptedError):
                self._empty = True
                return got
            except OSError as exc:
                raise PortError(f"lost the NIC: {exc}") from exc
            if not chunk:
                raise PortError("the NIC closed the port (nicd exited?)")
            record = self._assembler.feed(chunk)
            if record is None:
                continue
            try:
                writes = state.on_record(record)
            except RecordRefused as exc:
                raise PortError(f"the NIC refused a request: {exc.reason}") from None
            except UnexpectedRecord as exc:
                raise PortError(str(exc)) from None
            got += 1
            for write in writes:
                self.send_record(write)
            if stop_at_message and state.has_messages():
                self._empty = False
                return got


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout
