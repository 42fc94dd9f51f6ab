"""GRIM remote memory (seed 002 §4.5): the RM half of :class:`emucluster.grim.Endpoint`.

Blocks are carved from registered shared-memory segments (:mod:`emucluster.grim.rmalloc`);
the NIC translates virtual addresses through its cache and asks the endpoint's
:class:`~emucluster.grim.port.Kernel` on a miss. Every operation completes when its status
comes back from the NIC that executed it (the port's sink for RM statuses is `_on_status`).

`RemoteMemory` is a base of `Endpoint`; it owns the RM state and uses what the endpoint gives
every service: its port and kernel, its lock, `_submit` (injection through the overflow
queue) and `_check_rank`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from emucluster.grim.amcore import OutMsg
from emucluster.grim.port import Block, Handle, RMError, RmRequest
from emucluster.grim.rmalloc import Allocator
from nicd.contract import (
    NOTIFY_P,
    READ_META,
    AtomicOp,
    MsgType,
    RmFlags,
    RmMapReq,
    RmStatus,
    RmStatusEvent,
    RmUnmapReq,
    Translation,
    pack_atomic_meta,
)

if TYPE_CHECKING:
    import threading
    from collections import Counter
    from collections.abc import Callable

    from emucluster.grim.port import Kernel
    from emucluster.port.client import Port, Region

__all__ = ["RemoteMemory"]

_U32 = 0xFFFFFFFF
_STATUSES = {int(s) for s in RmStatus}


class RemoteMemory:
    """Registered blocks and remote-memory requests of one endpoint."""

    port: Port
    kernel: Kernel
    rank: int
    channel: int
    counts: Counter[str]
    _lock: threading.RLock

    def __init__(self) -> None:
        self._next_req = 1
        self._requests: dict[int, RmRequest] = {}
        self._alloc = Allocator()
        self._segments: dict[int, Region] = {}  # allocator key -> registered region
        self._blocks: dict[int, Block] = {}  # vaddr -> block

    def _submit(self, msg: OutMsg) -> None:
        raise NotImplementedError  # the endpoint's

    def _check_rank(self, rank: int) -> None:
        raise NotImplementedError  # the endpoint's

    def poll(self) -> int:
        raise NotImplementedError  # the endpoint's (a request polls it)

    def wait_for(
        self, done: Callable[[], bool], timeout: float | None, what: str, *, memory: bool = True
    ) -> None:
        raise NotImplementedError  # the endpoint's (a request waits through it)

    # -- remote memory ----------------------------------------------------------------------

    def alloc(self, nbytes: int, *, static: bool = True) -> Block:
        """Allocate ``nbytes`` of registered memory. ``static`` programs the NIC's static
        translation entry at once (if the static region has room); otherwise the NIC
        learns the translation on the first access (a miss)."""
        with self._lock:
            placement, plan = self._alloc.place(nbytes)
            if plan is not None:
                self._segments[plan.key] = self.port.register_memory(plan.size)
            region = self._segments[placement.segment]
            t = Translation(placement.vaddr, nbytes, region.id, placement.offset)
            self.kernel.map.add(t)
            if static:
                self.port.send_record(RmMapReq(t.vaddr, t.size, t.region, t.offset))
            buf = region.buf[placement.offset : placement.offset + nbytes]
            handle = Handle(self.rank, self.channel, t.vaddr, nbytes, region.id, t.offset)
            block = Block(handle, buf, placement)
            self._blocks[t.vaddr] = block
            return block

    def free(self, block: Block) -> None:
        """Free a block: the NIC forgets its translations, later accesses are refused."""
        with self._lock:
            if self._blocks.pop(block.handle.vaddr, None) is None:
                raise RMError(
                    f"block at {block.handle.vaddr:#x} is not allocated here", "not_local"
                )
            self.kernel.map.remove(block.handle.vaddr)
            self.port.send_record(RmUnmapReq(block.handle.vaddr))
            block.buf.release()
            empty = self._alloc.release(block.placement)
            if empty is not None:
                region = self._segments.pop(empty)
                with contextlib.suppress(BufferError):  # views still held: unmapped at exit
                    self.port.deregister_memory(region)

    def iwrite(
        self,
        dest_rank: int,
        handle: Handle,
        offset: int,
        data: bytes | bytearray | memoryview,
        *,
        physical: bool = False,
        notify: tuple[Handle, int, int] | None = None,
    ) -> RmRequest:
        """Start writing ``data`` at ``offset`` of the remote block ``handle`` (RM-V, or
        RM-P with ``physical``); ``notify=(handle, offset, value)`` names a 32-bit word of
        the destination to set to ``value`` once the data is in place."""
        with self._lock:
            payload = bytes(data)
            self._check_remote(dest_rank, handle, offset, len(payload))
            req = self._request("write")
            flags = RmFlags.NONE
            nvaddr, value, prefix = 0, 0, b""
            if notify is not None:
                nh, noff, value = notify
                self._check_remote(dest_rank, nh, noff, 4, what="notify word")
                self._check_word(value)
                flags |= RmFlags.NOTIFY
                nvaddr = nh.vaddr + noff
                prefix = NOTIFY_P.pack(nh.segment, nh.offset + noff)
            if physical:
                args = (handle.segment, handle.offset + offset, req.req_id, value)
                msg = OutMsg(dest_rank, handle.channel, MsgType.RM_WRITE_P, prefix + payload,
                             int(flags | RmFlags.RM_API), args, req)  # fmt: skip
                self.counts["rm_p_writes"] += 1
            else:
                args = (handle.vaddr + offset, nvaddr, value, req.req_id)
                msg = OutMsg(dest_rank, handle.channel, MsgType.RM_WRITE_V, payload,
                             int(flags), args, req)  # fmt: skip
                self.counts["rm_v_writes"] += 1
            self._submit(msg)
            return req

    def write(
        self,
        dest_rank: int,
        handle: Handle,
        offset: int,
        data: bytes | bytearray | memoryview,
        *,
        physical: bool = False,
        notify: tuple[Handle, int, int] | None = None,
    ) -> None:
        """Blocking :meth:`iwrite`: returns once the destination NIC placed the data."""
        self.iwrite(dest_rank, handle, offset, data, physical=physical, notify=notify).wait()

    def iread(
        self,
        src_rank: int,
        handle: Handle,
        offset: int,
        nbytes: int,
        into: Block,
        into_offset: int = 0,
        *,
        notify: tuple[Handle, int, int] | None = None,
    ) -> RmRequest:
        """Start reading ``nbytes`` at ``offset`` of remote block ``handle`` into the local
        block ``into`` at ``into_offset`` (RM-RV: the remote NIC fetches, this NIC places
        the reply). ``notify`` names a local word set to ``value`` when the data is in."""
        with self._lock:
            self._check_remote(src_rank, handle, offset, nbytes)
            if into.handle.vaddr not in self._blocks or into.handle.node != self.rank:
                raise RMError("a read must land in a block of this endpoint", "not_local")
            if not (into_offset >= 0 and into_offset + nbytes <= into.nbytes):
                raise RMError(
                    f"{nbytes} B at {into_offset} do not fit the {into.nbytes} B local block",
                    "out_of_range",
                )
            nvaddr, value = 0, 0
            if notify is not None:
                nh, noff, value = notify
                if nh.node != self.rank or nh.channel != self.channel:
                    raise RMError("a read's notify word must be local", "not_local")
                self._check_bounds(nh, noff, 4, "notify word")
                self._check_word(value)
                nvaddr = nh.vaddr + noff
            req = self._request("read")
            args = (handle.vaddr + offset, nbytes, into.handle.vaddr + into_offset, req.req_id)
            meta = READ_META.pack(nvaddr, value)
            msg = OutMsg(src_rank, handle.channel, MsgType.RM_READ, meta, 0, args, req)
            self.counts["rm_reads"] += 1
            self._submit(msg)
            return req

    def read(
        self,
        src_rank: int,
        handle: Handle,
        offset: int,
        nbytes: int,
        into: Block,
        into_offset: int = 0,
        *,
        notify: tuple[Handle, int, int] | None = None,
    ) -> None:
        """Blocking :meth:`iread`."""
        self.iread(src_rank, handle, offset, nbytes, into, into_offset, notify=notify).wait()

    def iatomic(
        self,
        dest_rank: int,
        handle: Handle,
        offset: int,
        op: AtomicOp,
        code: str,
        operand: bytes,
        into: Block | None = None,
        into_offset: int = 0,
    ) -> RmRequest:
        """Start a remote atomic: the NIC of ``dest_rank`` applies ``op`` to the elements
        (numpy type ``code``) at ``offset`` of block ``handle`` with ``operand`` (CAS:
        compare value then new value), whole and without its host; with ``into`` the old
        contents land in that local block at ``into_offset``."""
        with self._lock:
            n = len(operand) // 2 if op is AtomicOp.CAS else len(operand)
            self._check_remote(dest_rank, handle, offset, n)
            reply = 0
            if into is not None:
                if into.handle.vaddr not in self._blocks or into.handle.node != self.rank:
                    raise RMError("a fetch must land in a block of this endpoint", "not_local")
                self._check_bounds(into.handle, into_offset, n, "result block")
                reply = into.handle.vaddr + into_offset
            req = self._request("atomic")
            meta = pack_atomic_meta(op, code, fetch=into is not None)
            args = (handle.vaddr + offset, reply, req.req_id, meta)
            msg = OutMsg(dest_rank, handle.channel, MsgType.RM_ATOMIC, operand, 0, args, req)
            self.counts["rm_atomics"] += 1
            self._submit(msg)
            return req

    # -- internals --------------------------------------------------------------------------

    def _on_status(self, st: RmStatusEvent) -> None:
        """The port's sink for RM statuses: complete the request."""
        req = self._requests.pop(st.req_id, None)
        if req is None:
            self.counts["stray_status"] += 1
            return
        if st.status == RmStatus.OK:
            req._finish(None)
        else:
            name = RmStatus(st.status).name.lower() if st.status in _STATUSES else "unknown"
            self._fail(req, RMError(f"{req.what} refused by the remote NIC: {name}", name))

    def _request(self, what: str) -> RmRequest:
        req = RmRequest(self, self._next_req, what)
        self._next_req = (self._next_req + 1) & _U32 or 1
        self._requests[req.req_id] = req
        return req

    def _fail(self, req: RmRequest, error: RMError) -> None:
        self._requests.pop(req.req_id, None)
        req._finish(error)

    def _check_remote(
        self, rank: int, handle: Handle, offset: int, length: int, what: str = "block"
    ) -> None:
        self._check_rank(rank)
        if not isinstance(handle, Handle):
            raise TypeError(f"expected a Handle, not {type(handle).__name__}")
        if handle.node != rank:
            raise RMError(f"the {what} belongs to rank {handle.node}, not {rank}", "wrong_node")
        self._check_bounds(handle, offset, length, what)

    @staticmethod
    def _check_bounds(handle: Handle, offset: int, length: int, what: str) -> None:
        if not (offset >= 0 and length >= 0 and offset + length <= handle.size):
            raise RMError(
                f"{length} B at offset {offset} are outside the {handle.size} B {what}",
                "out_of_range",
            )

    @staticmethod
    def _check_word(value: int) -> None:
        if not 0 <= value <= _U32:
            raise ValueError(f"notify value {value} is not a 32-bit unsigned int")
