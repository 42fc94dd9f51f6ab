"""Buffered sends: ``Attach_buffer`` / ``Detach_buffer`` and the Bsend family.

A buffered send copies the message and returns at once; the copy is sent as a nonblocking
send that the library completes later. The attached buffer bounds how many bytes may be in
flight this way (each message also costs `BSEND_OVERHEAD`); a send that does not fit raises
ERR_BUFFER, as MPI says. ``Detach_buffer`` waits until every buffered message has left and
returns the buffer. With no buffer attached, a buffered send of a non-empty message raises
ERR_BUFFER (empty ones and PROC_NULL need no space).
"""

from __future__ import annotations

from typing import Any

from emucluster.mpi.buffer.spec import byte_view
from emucluster.mpi.constants import PROC_NULL
from emucluster.mpi.errors import ERR_BUFFER
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.request.pending import SendPending
from emucluster.mpi.request.request import Request, completed

__all__ = [
    "BSEND_OVERHEAD", "BUFFER_AUTOMATIC", "Attach_buffer", "Detach_buffer", "Flush_buffer",
    "Iflush_buffer", "start",
]  # fmt: skip

BSEND_OVERHEAD = 96
"""Bytes of bookkeeping each buffered message takes from the attached buffer (MPICH's)."""
BUFFER_AUTOMATIC = None
"""MPI 4.1's automatic buffering is not offered: attach a buffer."""

_attached: Any = None
_capacity = 0
_in_flight: list[tuple[Request, int]] = []  # (send, bytes it holds), bounded by _capacity


def Attach_buffer(buf: Any) -> None:
    """Attach ``buf`` for buffered sends (ERR_BUFFER if one is attached already, BufferError
    for read-only memory: the library writes the messages into it)."""
    global _attached, _capacity
    if _attached is not None:
        raise MPIException(ERR_BUFFER, "Attach_buffer: a buffer is attached already")
    view = byte_view(buf, writable=False) if buf is not None else None
    if view is not None and view.readonly:
        raise BufferError("Attach_buffer: the buffer is read-only")
    _capacity = len(view) if view is not None else 0
    _attached = buf


def Detach_buffer() -> Any:
    """Wait for the buffered messages to leave; detach and return the buffer."""
    global _attached, _capacity
    Flush_buffer()
    buf, _attached, _capacity = _attached, None, 0
    return buf


def Flush_buffer() -> None:
    """Wait until every buffered message has left (MPI 4.1); the buffer stays attached."""
    Request.Waitall([request for request, _ in _in_flight])
    _in_flight.clear()


def Iflush_buffer() -> Request:
    """`Flush_buffer` as a request; the flush completes before it returns (allowed: a
    nonblocking call may complete at once), so the request is complete."""
    Flush_buffer()
    return completed()


def _reclaim() -> int:
    """Drop the buffered sends that completed; the bytes still held."""
    _in_flight[:] = [(r, n) for r, n in _in_flight if not r.Get_status()]
    return sum(n for _, n in _in_flight)


def start(comm: Any, data: bytes, dest: int, tag: int) -> Request:
    """Start sending ``data`` (the caller's copy) from the attached buffer; its request."""
    op_args = comm._state(), dest  # validates the communicator first
    if op_args[1] == PROC_NULL:
        return completed()
    need = len(data) + BSEND_OVERHEAD
    held = _reclaim()
    if _attached is None or held + need > _capacity:
        free = 0 if _attached is None else _capacity - held
        raise MPIException(
            ERR_BUFFER, f"buffered send of {len(data)} bytes needs {need}; {free} free in the "
            "attached buffer (MPI.Attach_buffer)",
        )  # fmt: skip
    op = comm._post_send(data, dest, tag, False)
    request = completed() if op is None else Request._of(SendPending(op), comm._engine())
    if op is not None:
        _in_flight.append((request, need))
    return request
