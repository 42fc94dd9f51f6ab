"""One-sided synchronization: Fence, passive target (Lock/Unlock, Lock_all/Unlock_all,
Flush*, Sync) and generalized active target (Post/Start/Complete/Wait/Test).

Passive-target locks are queues the target's NIC keeps (:mod:`nicd.grim.locks`), named by
the lock word before the window's bytes: a lock is an ``RM_ATOMIC`` ``LOCK_SHARED`` or
``LOCK_EXCLUSIVE`` whose completion the NIC sends when it grants the lock (first come first
served, shared holders together, so neither kind starves), an unlock an ``UNLOCK`` on the
same ordered stream as the epoch's operations. So a lock, the operations in its epoch and the
unlock all complete with the target's host computing elsewhere: its NIC does everything. A
request the NIC cannot grant (it waited too long: a holder died) fails with an error. A Fence
completes this rank's operations (their completions from the target NICs), then meets the
others: up to `ALL_TO_ALL_MAX` ranks in one round, a zero-byte notice to every other rank and
one from each (a barrier would take ``ceil(log2(size))`` rounds, each a wait for a message,
and an emulated message costs a wake-up of four processes), above that in a barrier. When a
rank leaves, every rank has entered the fence with its operations complete at their targets,
so the epoch's operations are done everywhere. PSCW sends its post and completion notices as
zero-byte messages on the window's private communicator too. Every call that ends an epoch
waits for its operations' completions from the target NICs, so at its return they are done
there.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from emucluster.mpi.constants import PROC_NULL
from emucluster.mpi.errors import ERR_GROUP, ERR_LOCKTYPE, ERR_RANK, ERR_RMA_SYNC
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.request.request import Request
from emucluster.mpi.rma.constants import LOCK_EXCLUSIVE, LOCK_SHARED, MODE_NOCHECK, MODE_NOSUCCEED
from emucluster.mpi.rma.engine import RmaOp
from emucluster.mpi.rma.hostdriven import FLUSH, LOCK, UNLOCK
from nicd.contract import AtomicOp

if TYPE_CHECKING:
    from emucluster.mpi.comm.group import Group
    from emucluster.mpi.rma.state import WinState

__all__ = ["ALL_TO_ALL_MAX", "Synchronization"]

_Q = struct.Struct("<q")
_WORD = _Q.pack(0)  # a lock op's operand: the NIC names the lock by the word's address
_POST, _DONE = 1, 2  # tags of PSCW notices on the window's private communicator
_FENCE = 5  # the tag of Fence notices (hostdriven's requests and replies use 3 and 4)
ALL_TO_ALL_MAX = 4
"""Fence meets the others in one round of notices up to this many ranks (``size - 1`` sends
per rank, no more than the dissemination barrier's ``ceil(log2(size))`` sends up to 4 ranks),
in a barrier above."""
_NOT_HELD = 0  # a lock taken with MODE_NOCHECK: nothing to release


class Synchronization:
    """The synchronization calls of one window (``Win.Fence`` ... delegate here)."""

    __slots__ = ("st",)

    def __init__(self, st: WinState) -> None:
        self.st = st

    # -- fence -------------------------------------------------------------------------------

    def fence(self, assertion: int = 0) -> None:
        """Complete this rank's operations, then meet every rank: all operations of the
        epoch are complete everywhere at return."""
        st = self.st
        st.sync_memory()
        st.engine.complete(st.all_pending(), "Win.Fence")
        if st.size > ALL_TO_ALL_MAX:
            st.comm.Barrier()
        elif st.size > 1:  # one round: a notice to every other rank, one from each
            others = [r for r in range(st.size) if r != st.rank]
            notices = [st.comm.Irecv(bytearray(0), r, _FENCE) for r in others]
            notices += [st.comm.Isend(b"", r, _FENCE) for r in others]
            Request.Waitall(notices)
        st.sync_memory()
        st.fence_open = not assertion & MODE_NOSUCCEED

    # -- passive target ----------------------------------------------------------------------

    def lock(self, rank: int, lock_type: int = LOCK_EXCLUSIVE, assertion: int = 0) -> None:
        """Open a passive-target epoch at ``rank`` (the lock is taken at its NIC)."""
        if lock_type not in (LOCK_EXCLUSIVE, LOCK_SHARED):
            raise MPIException(ERR_LOCKTYPE, f"lock type {lock_type} is not LOCK_EXCLUSIVE/SHARED")
        if rank == PROC_NULL:
            return
        st = self._target(rank)
        if rank in st.locks or st.lock_all:
            raise MPIException(ERR_RMA_SYNC, f"rank {rank} is already locked by this rank")
        alone = st.size == 1  # nobody else can lock: nothing to take
        held = _NOT_HELD if assertion & MODE_NOCHECK or alone else lock_type
        if held:
            self._acquire(rank, exclusive=lock_type == LOCK_EXCLUSIVE)
        st.locks[rank] = held
        if rank == st.rank:
            st.sync_memory()

    def unlock(self, rank: int) -> None:
        """Complete the epoch's operations at ``rank`` and release its lock."""
        if rank == PROC_NULL:
            return
        st = self._target(rank)
        if rank not in st.locks:
            raise MPIException(ERR_RMA_SYNC, f"rank {rank} is not locked by this rank")
        held = st.locks.pop(rank)
        ops = st.take_pending(rank)
        if held:  # after the epoch's operations on the same ordered stream: one round trip
            ops.append(self._release(rank))
        st.engine.complete(ops, "Win.Unlock")
        if rank == st.rank:
            st.sync_memory()

    def lock_all(self, assertion: int = 0) -> None:
        """A shared lock at every rank."""
        st = self.st
        if st.lock_all or st.locks:
            raise MPIException(ERR_RMA_SYNC, "Lock_all inside a passive-target epoch")
        if not assertion & MODE_NOCHECK and st.size > 1:
            asked = [self._request(rank, AtomicOp.LOCK_SHARED) for rank in range(st.size)]
            try:
                st.engine.complete(asked, "Win.Lock_all")
            except MPIException:  # give back the locks that were granted
                granted = [r for r, op in enumerate(asked) if op.requests[0].error is None]
                st.engine.complete([self._release(r) for r in granted], "Win.Lock_all")
                raise
            st.locks = dict.fromkeys(range(st.size), LOCK_SHARED)
        else:
            st.locks = dict.fromkeys(range(st.size), _NOT_HELD)
        st.lock_all = True
        st.sync_memory()

    def unlock_all(self) -> None:
        """Complete every operation and release every lock of Lock_all."""
        st = self.st
        if not st.lock_all:
            raise MPIException(ERR_RMA_SYNC, "Unlock_all without Lock_all")
        held, st.locks, st.lock_all = st.locks, {}, False
        ops = st.all_pending()
        ops += [self._release(rank) for rank, kind in held.items() if kind]
        st.engine.complete(ops, "Win.Unlock_all")
        st.sync_memory()

    def flush(self, rank: int) -> None:
        """Complete the operations to ``rank`` (at the target, hence locally too)."""
        if rank == PROC_NULL:
            return
        st = self._target(rank)
        ops = st.take_pending(rank)
        if st.host is not None:  # the target's host answers once it applied the rest
            ops.append(st.host.request(rank, FLUSH))
        st.engine.complete(ops, "Win.Flush")

    def flush_all(self) -> None:
        """Complete every operation in flight."""
        st = self.st
        ops = st.all_pending()
        if st.host is not None:
            ops += [st.host.request(rank, FLUSH) for rank in range(st.size)]
        st.engine.complete(ops, "Win.Flush_all")

    def sync(self) -> None:
        """Make this rank's private and public window copies agree."""
        self.st.sync_memory()

    # -- PSCW --------------------------------------------------------------------------------

    def post(self, group: Group, assertion: int = 0) -> None:
        """Expose the window to the ranks of ``group`` until Wait/Test."""
        st = self.st
        if st.exposure is not None:
            raise MPIException(ERR_RMA_SYNC, "Post inside an exposure epoch")
        ranks = self._ranks(group)
        st.sync_memory()
        st.exposure, st.completed = ranks, set()
        for rank in ranks:
            st.comm.Send(b"", rank, _POST)

    def start(self, group: Group, assertion: int = 0) -> None:
        """Open an access epoch to the ranks of ``group`` once each has posted."""
        st = self.st
        if st.access is not None:
            raise MPIException(ERR_RMA_SYNC, "Start inside an access epoch")
        ranks = self._ranks(group)
        for rank in ranks:
            st.comm.Recv(bytearray(0), rank, _POST)
        st.access = ranks

    def complete(self) -> None:
        """End the access epoch: its operations are complete at their targets."""
        st = self.st
        if st.access is None:
            raise MPIException(ERR_RMA_SYNC, "Complete without Start")
        ranks, st.access = st.access, None
        ops = [op for rank in ranks for op in st.take_pending(rank)]
        st.engine.complete(ops, "Win.Complete")
        for rank in ranks:
            st.comm.Send(b"", rank, _DONE)

    def wait(self) -> None:
        """End the exposure epoch once every origin has completed."""
        st = self.st
        if st.exposure is None:
            raise MPIException(ERR_RMA_SYNC, "Wait without Post")
        for rank in st.exposure:
            if rank not in st.completed:
                st.comm.Recv(bytearray(0), rank, _DONE)
        self._end_exposure()

    def test(self) -> bool:
        """Wait's nonblocking form: True (the epoch ended) once every origin completed."""
        st = self.st
        if st.exposure is None:
            raise MPIException(ERR_RMA_SYNC, "Test without Post")
        for rank in st.exposure:
            if rank not in st.completed and st.comm.Iprobe(rank, _DONE):
                st.comm.Recv(bytearray(0), rank, _DONE)
                st.completed.add(rank)
        if len(st.completed) < len(st.exposure):
            return False
        self._end_exposure()
        return True

    # -- internals ---------------------------------------------------------------------------

    def _end_exposure(self) -> None:
        st = self.st
        st.exposure, st.completed = None, set()
        st.sync_memory()

    def _target(self, rank: int) -> WinState:
        st = self.st
        if not 0 <= rank < st.size:
            raise MPIException(ERR_RANK, f"rank {rank} is not in the window's group")
        return st

    def _ranks(self, group: Group) -> tuple[int, ...]:
        index = {node: i for i, node in enumerate(self.st.nodes)}
        try:
            return tuple(index[node] for node in group.members)
        except KeyError:
            raise MPIException(ERR_GROUP, "the group has processes outside the window") from None

    def _request(self, rank: int, op: AtomicOp) -> RmaOp:
        """Start a lock operation on ``rank``'s lock word at its NIC (at its host in the
        host-driven mode)."""
        st = self.st
        if st.host is not None:
            kind = UNLOCK if op is AtomicOp.UNLOCK else LOCK
            return st.host.request(rank, kind, exclusive=op is AtomicOp.LOCK_EXCLUSIVE)
        tgt = st.targets[rank]
        return RmaOp([st.engine.endpoint.iatomic(tgt.node, tgt.handle, 0, op, "q", _WORD)])

    def _acquire(self, rank: int, *, exclusive: bool) -> None:
        """Wait for ``rank``'s NIC to grant the lock (MPIException if it refuses)."""
        op = AtomicOp.LOCK_EXCLUSIVE if exclusive else AtomicOp.LOCK_SHARED
        self.st.engine.complete([self._request(rank, op)], "Win.Lock")

    def _release(self, rank: int) -> RmaOp:
        """Start releasing ``rank``'s lock (an op to complete with the epoch's)."""
        return self._request(rank, AtomicOp.UNLOCK)
