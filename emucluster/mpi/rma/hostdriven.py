"""Host-driven passive target: the baseline the NIC-executed one is measured against
(``EMU_RMA_PROGRESS=host``, for ``emubench rma``).

In this mode Put, Get, Lock/Unlock (and Lock_all), Flush and their completion travel as
two-sided messages on the window's private communicator, and the target's host applies them
in its progress engine (an `Advancing` task), so they progress only while the target is
inside an MPI call, as one-sided communication does over a network without RDMA (MPICH's
ch3 over TCP, for one). The locks keep the NIC's rules (`nicd.contract.LockTable`: shared and
exclusive, first come first served), kept by the target host instead. Accumulates, atomics,
Fence and PSCW stay as in the NIC mode (the figure compares passive-target epochs), and so do
dynamic windows.

Messages (tag ``REQ`` to the target, ``REP`` back, on the window's communicator, in order):
a header (kind, lock type, offset in the target's block, length), the bytes of a PUT after
it; a GET is answered with the bytes, LOCK with one byte (1 granted, 0 refused) when granted,
UNLOCK and FLUSH with one byte once every earlier request from that origin was applied.
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING

from emucluster.config import ENV_RMA_PROGRESS
from emucluster.mpi.constants import ANY_SOURCE
from emucluster.mpi.datatype.handles import BYTE
from emucluster.mpi.errors import ERR_OTHER, ERR_RMA_SYNC
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.request.status import Status
from emucluster.mpi.rma.engine import Completion, RmaOp
from nicd.contract import LockGranted, LockOutcome, LockTable, LockWaiter

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.config import HostConfig
    from emucluster.grim.port import RMError
    from emucluster.mpi.request.request import Request
    from emucluster.mpi.rma.state import WinState

__all__ = ["MODE_ENV", "HostDriven", "host_driven"]

MODE_ENV = ENV_RMA_PROGRESS
"""The variable that selects this mode (``host``), read into `HostConfig.rma_progress`."""
REQ, REP = 3, 4  # tags on the window's private communicator (PSCW uses 1 and 2)
_HDR = struct.Struct("<BBqq")  # kind, exclusive, offset in the target's block, length
PUT, GET, LOCK, UNLOCK, FLUSH = range(1, 6)
_KEY = (0, 0)  # one lock per window


def host_driven(config: HostConfig) -> bool:
    """Whether windows created with ``config`` use host-driven passive target."""
    return config.rma_progress == "host"


class _Done:
    """An MPI request seen as an RmaOp's request (``test()`` and ``error``)."""

    __slots__ = ("error", "req")

    def __init__(self, req: Request) -> None:
        self.req = req
        self.error: RMError | None = None

    def test(self) -> bool:
        return bool(self.req.Test())


class HostDriven:
    """One window's host-driven passive target: the origin's calls and the target's server."""

    def __init__(self, st: WinState) -> None:
        self.st = st
        self.locks = LockTable()
        self.closed = False
        self._serving = False
        self._status = Status()

    # -- origin ------------------------------------------------------------------------------

    def put(self, rank: int, runs: list[tuple[int, int]], data: memoryview) -> RmaOp:
        """Send the bytes of each run (applied when the target's host is in MPI)."""
        reqs: list[Completion] = []
        pos = 0
        for offset, n in runs:
            msg = _HDR.pack(PUT, 0, offset, n) + bytes(data[pos : pos + n])
            reqs.append(_Done(self.st.comm.Isend(msg, rank, REQ)))
            pos += n
        return RmaOp(reqs)

    def get(
        self, rank: int, runs: list[tuple[int, int]], deliver: Callable[[bytes], None]
    ) -> RmaOp:
        """Ask for each run's bytes; ``deliver(bytes)`` runs with all of them at completion."""
        reqs: list[Completion] = []
        parts: list[bytearray] = []
        for offset, n in runs:
            reqs.append(_Done(self.st.comm.Isend(_HDR.pack(GET, 0, offset, n), rank, REQ)))
            part = bytearray(n)
            parts.append(part)
            reqs.append(_Done(self.st.comm.Irecv(part, rank, REP)))
        return RmaOp(reqs, lambda: deliver(b"".join(parts)))

    def request(self, rank: int, kind: int, *, exclusive: bool = False) -> RmaOp:
        """LOCK, UNLOCK or FLUSH at ``rank``: done when its one-byte answer came back (an
        error if it says no)."""
        comm, answer = self.st.comm, bytearray(1)
        sent = _Done(comm.Isend(_HDR.pack(kind, int(exclusive), 0, 0), rank, REQ))
        got = _Done(comm.Irecv(answer, rank, REP))

        def check() -> None:
            if answer[0] != 1:
                what = "lock refused (waited too long)" if kind == LOCK else "not locked"
                raise MPIException(ERR_RMA_SYNC if kind == UNLOCK else ERR_OTHER, what)

        return RmaOp([sent, got], check)

    # -- target (an Advancing task of the progress engine) -----------------------------------

    def advance(self) -> bool:
        """Apply every request that arrived; True (finished) once the window is freed."""
        if self.closed:
            return True
        if self._serving:  # a reply's send made progress, which came back here
            return False
        self._serving = True
        try:
            comm, status = self.st.comm, self._status
            while comm.Iprobe(ANY_SOURCE, REQ, status):
                src, n = status.Get_source(), status.Get_count(BYTE)
                msg = bytearray(n)
                comm.Recv(msg, src, REQ)
                self._serve(src, msg)
            self._answer(self.locks.on_timer(now=time.monotonic()))
        finally:
            self._serving = False
        return False

    def _serve(self, src: int, msg: bytearray) -> None:
        kind, exclusive, offset, n = _HDR.unpack_from(msg)
        block = self.st.local.block.buf if self.st.local is not None else memoryview(b"")
        comm = self.st.comm
        if kind == PUT:
            block[offset : offset + n] = msg[_HDR.size :]
        elif kind == GET:
            comm.Send(bytes(block[offset : offset + n]), src, REP)
        elif kind == LOCK:
            who = LockWaiter(src, 0, 0)
            self._answer(self.locks.acquire(_KEY, who, exclusive=bool(exclusive),
                                            now=time.monotonic()))  # fmt: skip
        elif kind == UNLOCK:
            held, grants = self.locks.release(_KEY, src, 0)
            comm.Send(bytes([int(held)]), src, REP)
            self._answer(grants)
        else:
            comm.Send(b"\x01", src, REP)

    def _answer(self, outcomes: list[LockOutcome]) -> None:
        for o in outcomes:
            answer = b"\x01" if isinstance(o, LockGranted) else b"\x00"
            self.st.comm.Send(answer, o.who.node, REP)
