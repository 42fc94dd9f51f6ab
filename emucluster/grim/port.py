"""GRIM endpoint pieces the API hands out: handles and blocks of registered memory, requests,
the error class, and :class:`Kernel`, the GRIM half of the endpoint's GM port.

:class:`Kernel` is where the host plays the "kernel" of GRIM 4.5.2: registered as the port's
sink for GRIM records, it answers the NIC's translation upcalls from the endpoint's address
map during every drain of the port (so an upcall is answered whenever the program makes any
call, or a signal from the NIC makes the endpoint drain, see `emucluster.port.signals`) and hands
RM statuses to the endpoint.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, NamedTuple, Protocol

from emucluster.errors import EmuclusterError
from emucluster.port.client import Port
from nicd.contract import AddressMap, RmLanded, RmStatusEvent, RmXlateReply, RmXlateReq

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.grim.rmalloc import Placement
    from emucluster.port.client import Port

__all__ = ["WAIT_S", "Block", "Handle", "Kernel", "RMError", "RmRequest", "Waiter"]

WAIT_S = 60.0  # how long a blocking call waits before TimeoutError


class Waiter(Protocol):
    """What a request needs from its endpoint."""

    def poll(self) -> int: ...

    def wait_for(
        self, done: Callable[[], bool], timeout: float | None, what: str, *, memory: bool = True
    ) -> None: ...


class RMError(EmuclusterError):
    """A remote-memory operation was refused (by this host before sending, or by the NIC
    that executed it) or failed in transit; ``status`` names why."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status
        """``no_translation``, ``out_of_range``, ``no_region``, ``bad_notify``,
        ``bad_reply``, ``wrong_node``, ``not_local``, or a send failure (``peer_dead`` ...)."""


class Handle(NamedTuple):
    """A block's address, picklable and sendable to peers: the node and channel that own
    it, its virtual address and size, and its physical (segment, offset) for RM-P."""

    node: int
    channel: int
    vaddr: int
    size: int
    segment: int
    offset: int

    def pack(self) -> bytes:
        """18 bytes for an active-message payload."""
        return _HANDLE.pack(*self)

    @classmethod
    def unpack(cls, data: bytes) -> Handle:
        """The handle :meth:`pack` made."""
        return cls(*_HANDLE.unpack(data))


_HANDLE = struct.Struct(">HHIIHI")


class Block:
    """Registered memory allocated by :meth:`Endpoint.alloc`."""

    def __init__(self, handle: Handle, buf: memoryview, placement: Placement) -> None:
        self.handle = handle
        """Send this to peers so they can read and write the block."""
        self.buf = buf
        """The memory (writable); the NIC writes remote data straight into it."""
        self.placement = placement

    @property
    def nbytes(self) -> int:
        """The block's size."""
        return self.handle.size

    def word(self, offset: int) -> int:
        """The 32-bit notification word at ``offset`` (little-endian)."""
        return int.from_bytes(self.buf[offset : offset + 4], "little")


class RmRequest:
    """An outstanding remote-memory operation (from ``iwrite``/``iread``)."""

    def __init__(self, endpoint: Waiter, req_id: int, what: str) -> None:
        self._endpoint = endpoint
        self.req_id = req_id
        self.what = what
        self.done = False
        self.error: RMError | None = None

    def test(self) -> bool:
        """Poll once; True when the operation has finished (successfully or not)."""
        if not self.done:
            self._endpoint.poll()
        return self.done

    def wait(self, timeout: float | None = WAIT_S) -> None:
        """Block until finished; raise RMError if it was refused or failed."""
        self._endpoint.wait_for(lambda: self.done, timeout, f"{self.what} (request {self.req_id})",
                                memory=False)  # fmt: skip
        if self.error is not None:
            raise self.error

    def _finish(self, error: RMError | None) -> None:
        self.done = True
        self.error = error


class Kernel:
    """The host "kernel" of GRIM 4.5.2 on one port: the endpoint's translation table, and
    the sinks of the port's GRIM records. A translation upcall is answered from the table
    inside whatever call drains the port; an RM status goes straight to ``on_status``."""

    def __init__(self, port: Port, on_status: Callable[[RmStatusEvent], None]) -> None:
        self._port = port
        self.map = AddressMap()
        """Every block of this endpoint: the translation table."""
        self.upcalls = 0
        """Translation upcalls answered."""
        self.landed = 0
        """RmLanded records taken (writes into this port's memory while a wait watched)."""
        port.register_sink(RmXlateReq, self._on_upcall)
        port.register_sink(RmStatusEvent, on_status)
        port.register_sink(RmLanded, self._on_landed)

    def _on_landed(self, event: RmLanded) -> None:
        self.landed += 1  # the record itself is the wake-up: the waiter looks again

    def _on_upcall(self, event: RmXlateReq) -> None:
        self.upcalls += 1
        t = self.map.find(event.vaddr, 1)
        reply = (
            RmXlateReply(event.vaddr, t.vaddr, t.size, t.region, t.offset)
            if t is not None
            else RmXlateReply(event.vaddr, 0, 0, 0, 0)
        )
        self._port.send_record(reply)
