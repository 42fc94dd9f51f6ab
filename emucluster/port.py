"""The host side of the PCI bus: a GM-port client over nicd's Unix SOCK_SEQPACKET socket.

The analogue of the GM library: open a port, send with send tokens, provide receive
buffers (receive tokens), and poll or wait for RECV / SENT / ERROR events. Waiting follows
the wait policy (``EMU_WAIT``: ``spin`` polls like GM and burns CPU as on the real
cluster, ``block`` sleeps in the kernel, ``hybrid`` spins ``EMU_SPIN_US`` then blocks).

Signals (thesis 3.4.1): ``send_collective`` sends the application-bypass packet type, and
``enable_signals`` / ``disable_signals`` tell the NIC whether such a message arriving should
raise SIGUSR1 in this process (off when the port opens). A blocking wait here sleeps in
``select``, which PEP 475 resumes after a Python signal handler ran, so handlers run during
waits too; installing one is the caller's business (``emucluster.mpi.appbypass``).
"""

from __future__ import annotations

import os
import select
import socket
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory
from typing import TYPE_CHECKING, Literal

from emucluster.errors import EmuclusterError
from nicd import hostlink as hl
from nicd.hostlink import ErrorEvent, McastErrorEvent, RecvEvent, RmWriteEvent, SentEvent
from nicd.link.wire import MsgType

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

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

Event = RecvEvent | SentEvent | ErrorEvent | RmWriteEvent | McastErrorEvent
WaitPolicy = Literal["spin", "block", "hybrid"]
DEFAULT_SPIN_US = 50.0  # hybrid: microseconds of polling before sleeping in the kernel
_SOCKET_BUFFER_BYTES = 1024 * 1024


@dataclass(slots=True)
class Region:
    """Registered memory: a shared-memory segment this host and its NIC both map."""

    id: int
    """The region id peers name in remote-memory writes."""
    name: str
    """The POSIX shared-memory name (``emu_<job>_...``, swept by emurun)."""
    size: int
    shm: shared_memory.SharedMemory

    @property
    def buf(self) -> memoryview:
        """The memory itself."""
        view = self.shm.buf
        assert view is not None
        return view[: self.size]


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
    policy = os.environ.get("EMU_WAIT", "hybrid").strip().lower() or "hybrid"
    if policy not in ("spin", "block", "hybrid"):
        raise PortError(f"EMU_WAIT={policy!r}: expected spin, block or hybrid")
    spin_us = float(os.environ.get("EMU_SPIN_US", DEFAULT_SPIN_US))
    return policy, spin_us / 1e6  # type: ignore[return-value]


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
        self.free_send_tokens = opened.send_tokens
        """Sends this port may still start before one completes."""
        self.auto_replenish = auto_replenish
        """Give the NIC a new receive buffer for every message received (in batches: one
        PROVIDE record per quarter of the buffers, or before waiting when the NIC runs low)."""
        self._nic_buffers = 0  # receive tokens the NIC holds, as far as this side knows
        self._owed_buffers = 0  # consumed and not yet given back (auto_replenish)
        self._provide_batch = 1
        self.wait_policy: WaitPolicy = wait
        self._spin_s = spin_s
        self._assembler = hl.Assembler()
        self._recvq: deque[RecvEvent] = deque()
        self._rmq: deque[RmWriteEvent] = deque()
        self._doneq: deque[SentEvent | ErrorEvent | McastErrorEvent] = deque()
        self._outstanding: set[int] = set()
        self._next_handle = 1
        self._closed = False
        self._regions: dict[int, Region] = {}
        self._registered: set[int] = set()
        self._next_region = 1
        self._groups_ok: set[int] = set()
        self.nicvm_records: deque[hl.NicvmReply | hl.NicvmDone | hl.NicvmReport] = deque()
        """NICVM answers and reports, for ``emucluster.nicvm`` (never returned by wait)."""

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
        path = socket_path or os.environ.get("EMU_NIC_SOCKET")
        if not path:
            raise PortError("no NIC socket: pass socket_path or run under emurun (EMU_NIC_SOCKET)")
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
            self._provide_batch = max(1, receive_buffers // 4)
        return self

    # -- requests ---------------------------------------------------------------------------

    def send(
        self,
        dst_node: int,
        dst_port: int,
        payload: bytes | bytearray | memoryview,
        *,
        msg_type: int = 1,
        am_handler: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
        timeout: float | None = None,
    ) -> int:
        """Start sending ``payload`` to port ``dst_port`` of node ``dst_node``; return its
        handle. Waits for a send token when all are in use."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.free_send_tokens <= 0:
            if not self._pump(deadline):
                raise TimeoutError("no send token came back in time")
        handle = self._next_handle
        self._next_handle = (handle + 1) & 0xFFFFFFFF or 1
        self.free_send_tokens -= 1
        self._outstanding.add(handle)
        req = hl.SendReq(handle, dst_node, dst_port, bytes(payload), msg_type, am_handler, args)
        self._write(hl.encode_record(req))
        return handle

    def rm_write(
        self,
        dst_node: int,
        dst_port: int,
        region: int,
        offset: int,
        payload: bytes | bytearray | memoryview,
        *,
        notify: tuple[int, int] = (0, 0),
        timeout: float | None = None,
    ) -> int:
        """Remote-memory write (GRIM RM-P): the destination NIC places ``payload`` at
        ``offset`` of its host's region ``region`` and tells that host with an
        RmWriteEvent carrying ``notify``; no receive token is used. Completes like a send."""
        args = (region, offset, *notify)
        return self.send(
            dst_node, dst_port, payload, msg_type=MsgType.RM_WRITE_P, args=args, timeout=timeout
        )

    def send_collective(
        self,
        dst_node: int,
        dst_port: int,
        payload: bytes | bytearray | memoryview,
        *,
        flags: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
        timeout: float | None = None,
    ) -> int:
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
        req = hl.SignalCtl(True, os.getpid(), seen & 0xFFFFFFFF)
        self._write(hl.encode_record(req))

    def disable_signals(self) -> None:
        """No more signals from the NIC (a pending one is forgotten)."""
        self._write(hl.encode_record(hl.SignalCtl(False, os.getpid(), 0)))

    def register_memory(self, size: int, *, timeout: float = 10.0) -> Region:
        """Create ``size`` bytes of shared memory and register it with the NIC."""
        region_id = self._next_region
        self._next_region += 1
        job = os.environ.get("EMU_JOB_ID") or str(os.getpid())
        name = f"emu_{job}_{self.node_id}_{self.port_id}_{region_id}"
        shm = shared_memory.SharedMemory(name=name, create=True, size=max(1, size))
        region = Region(region_id, name, size, shm)
        self._regions[region_id] = region
        self._write(hl.encode_record(hl.RegisterReq(region_id, max(1, size), name)))
        deadline = time.monotonic() + timeout
        while region_id not in self._registered:
            if not self._pump(deadline):
                self.deregister_memory(region)
                raise TimeoutError("the NIC did not confirm the registration")
        return region

    def deregister_memory(self, region: Region) -> None:
        """Tell the NIC to forget ``region``, then free the shared memory."""
        if self._regions.pop(region.id, None) is None:
            return
        self._registered.discard(region.id)
        if not self._closed:
            self._write(hl.encode_record(hl.DeregisterReq(region.id)))
        _free_shared_memory(region.shm)

    def provide_receive_buffers(self, count: int) -> None:
        """Give the NIC ``count`` more receive tokens."""
        if count > 0:
            self._nic_buffers += count
            self._write(hl.encode_record(hl.ProvideReq(count)))

    def _give_back(self, *, low_only: bool) -> None:
        owed = self._owed_buffers
        if owed and (not low_only or self._nic_buffers < self._provide_batch):
            self._owed_buffers = 0
            self.provide_receive_buffers(owed)

    # -- events -----------------------------------------------------------------------------

    def poll(self) -> list[Event]:
        """Every event available now, without waiting."""
        self._drain()
        events: list[Event] = [*self._recvq, *self._rmq, *self._doneq]
        self._recvq.clear()
        self._rmq.clear()
        self._doneq.clear()
        return events

    def wait(self, timeout: float | None = None) -> Event | None:
        """The next event of any kind, or None after ``timeout`` seconds (or as soon as a
        NICVM record is waiting for ``emucluster.nicvm``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._recvq:
                return self._recvq.popleft()
            if self._rmq:
                return self._rmq.popleft()
            if self._doneq:
                return self._doneq.popleft()
            if self.nicvm_records:
                return None
            if not self._pump(deadline):
                return None

    def recv(self, timeout: float | None = None) -> RecvEvent:
        """The next message. SENT events are absorbed; an ERROR raises SendFailedError;
        remote-memory write events stay queued for ``wait`` and ``poll``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._raise_failures()
            if self._recvq:
                return self._recvq.popleft()
            if not self._pump(deadline):
                raise TimeoutError(f"no message within {timeout} s")

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every send started so far has completed; raise on the first failure."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._raise_failures()
            if not self._outstanding:
                return
            if not self._pump(deadline):
                raise TimeoutError(f"{len(self._outstanding)} sends still outstanding")

    @property
    def outstanding(self) -> int:
        """Sends started and not yet completed."""
        return len(self._outstanding)

    def close(self) -> None:
        """Close the port (and free its registered memory); sends in flight fail at the NIC."""
        if self._closed:
            return
        self._closed = True
        for region in list(self._regions.values()):
            _free_shared_memory(region.shm)
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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------

    def _raise_failures(self) -> None:
        for i, event in enumerate(self._doneq):
            if isinstance(event, ErrorEvent):
                del self._doneq[i]
                raise SendFailedError(event)
            if isinstance(event, McastErrorEvent):
                del self._doneq[i]
                raise McastChildDeadError(event)
        self._doneq.clear()  # SENT events: absorbed

    def _write(self, records: list[bytes]) -> None:
        for record in records:
            while True:
                try:
                    self._sock.send(record)
                    break
                except (BlockingIOError, InterruptedError):
                    # The NIC is behind: take in what it has for us, then wait to write.
                    self._drain()
                    select.select([self._sock], [self._sock], [], 1.0)
                except OSError as exc:
                    raise PortError(f"lost the NIC: {exc}") from exc

    def _drain(self) -> int:
        """Read every record available now; return how many events it produced."""
        got = 0
        while True:
            try:
                record = self._sock.recv(hl.MAX_RECORD_BYTES)
            except (BlockingIOError, InterruptedError):
                return got
            except OSError as exc:
                raise PortError(f"lost the NIC: {exc}") from exc
            if not record:
                raise PortError("the NIC closed the port (nicd exited?)")
            event = self._assembler.feed(record)
            if event is not None:
                got += self._take(event)

    def _take(self, event: hl.HostRecord) -> int:
        if isinstance(event, RecvEvent):
            self._recvq.append(event)
            self._nic_buffers -= 1
            if self.auto_replenish:
                self._owed_buffers += 1
                if self._owed_buffers >= self._provide_batch:
                    self._give_back(low_only=False)
        elif isinstance(event, RmWriteEvent):
            self._rmq.append(event)
        elif isinstance(event, hl.Registered):
            self._registered.add(event.region)
        elif isinstance(event, SentEvent | ErrorEvent):
            self._outstanding.discard(event.handle)
            self.free_send_tokens += 1
            self._doneq.append(event)
        elif isinstance(event, hl.SentBatch):
            for handle in event.handles:
                self._outstanding.discard(handle)
                self._doneq.append(SentEvent(handle))
            self.free_send_tokens += len(event.handles)
            return len(event.handles)
        elif isinstance(event, McastErrorEvent):
            self._doneq.append(event)
        elif isinstance(event, hl.McastGroupOk):
            self._groups_ok.add(event.group)
        elif isinstance(event, hl.NicvmReply | hl.NicvmDone | hl.NicvmReport):
            self.nicvm_records.append(event)
        elif isinstance(event, hl.Refused):
            raise PortError(f"the NIC refused a request: {event.reason}")
        else:
            raise PortError(f"unexpected record from the NIC: {event!r}")
        return 1

    def _pump(self, deadline: float | None) -> bool:
        """Wait, by the wait policy, until at least one event arrived; False on timeout."""
        if self._drain():
            return True
        self._give_back(low_only=True)  # never wait while the NIC is short of buffers
        policy = self.wait_policy
        if policy != "block":
            spin_until = None if policy == "spin" else time.monotonic() + self._spin_s
            while True:
                if self._drain():
                    return True
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return False
                if spin_until is not None and now >= spin_until:
                    break
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._sock], [], [], remaining)
            if ready and self._drain():
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    # -- multicast (seed 001) -----------------------------------------------------------------

    def create_group(
        self,
        group: int,
        root: int,
        parent: int | None,
        children: Sequence[int],
        *,
        epoch: int = 0,
        update: bool = False,
        timeout: float = 10.0,
    ) -> None:
        """Post this node's part of multicast group ``group`` to the NIC: the ``root``, this
        node's ``parent`` (None at the root) and ``children`` in sending order (build them
        with ``emucluster.coll.mcast_trees``; every member posts its own part, all with the
        same ``epoch``). ``update`` replaces the group's tree (a new epoch). This port
        becomes the group's port: it multicasts at the root and receives elsewhere.
        Raises PortError if the NIC refuses (id taken, bad tree)."""
        req = hl.McastGroupReq(group, root, parent, tuple(children), epoch, update)
        self._group_request(req, group, timeout)

    def update_group(
        self,
        group: int,
        root: int,
        parent: int | None,
        children: Sequence[int],
        *,
        epoch: int,
        timeout: float = 10.0,
    ) -> None:
        """Replace group ``group``'s tree with a new one under a new ``epoch``; multicasts
        still in flight on the old tree end with an ERROR."""
        self.create_group(group, root, parent, children, epoch=epoch, update=True,
                          timeout=timeout)  # fmt: skip

    def free_group(self, group: int, *, timeout: float = 10.0) -> None:
        """Forget group ``group`` at this NIC."""
        self._group_request(hl.McastFreeReq(group), group, timeout)

    def multicast(
        self,
        group: int,
        payload: bytes | bytearray | memoryview,
        *,
        am_handler: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
        timeout: float | None = None,
    ) -> int:
        """At the group's root: hand ``payload`` to the NIC once; it sends every packet to
        each child by header rewrite and the children's NICs forward it on (no host
        involved). Every other member gets a RecvEvent with ``mcast_group == group`` and
        ``src_node == root``. Returns a handle that completes like a send (SENT once every
        child acknowledged; ERROR naming a dead child)."""
        handle = self._take_handle(timeout)
        req = hl.McastSendReq(handle, group, bytes(payload), am_handler, args)
        self._write(hl.encode_record(req))
        return handle

    def multisend(
        self,
        dests: Sequence[int],
        dst_port: int,
        payload: bytes | bytearray | memoryview,
        *,
        msg_type: int = 1,
        am_handler: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
        timeout: float | None = None,
    ) -> int:
        """Send one message to port ``dst_port`` of every node in ``dests`` (distinct): one
        request to the NIC, which replicates it; receivers get ordinary RecvEvents. One
        handle for all copies: SENT when every copy was acknowledged, else ERROR."""
        handle = self._take_handle(timeout)
        req = hl.MultiSendReq(handle, tuple(dests), dst_port, bytes(payload), msg_type,
                              am_handler, args)  # fmt: skip
        self._write(hl.encode_record(req))
        return handle

    def _take_handle(self, timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.free_send_tokens <= 0:
            if not self._pump(deadline):
                raise TimeoutError("no send token came back in time")
        handle = self._next_handle
        self._next_handle = (handle + 1) & 0xFFFFFFFF or 1
        self.free_send_tokens -= 1
        self._outstanding.add(handle)
        return handle

    def _group_request(self, req: hl.HostRecord, group: int, timeout: float) -> None:
        self._groups_ok.discard(group)
        self._write(hl.encode_record(req))
        deadline = time.monotonic() + timeout
        while group not in self._groups_ok:
            if not self._pump(deadline):
                raise TimeoutError(f"the NIC did not confirm multicast group {group}")
        self._groups_ok.discard(group)


def _free_shared_memory(shm: shared_memory.SharedMemory) -> None:
    shm.close()
    try:
        shm.unlink()
    except FileNotFoundError:
        resource_tracker.unregister(shm._name, "shared_memory")  # type: ignore[attr-defined]
