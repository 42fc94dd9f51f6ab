"""The ULFM calls of a communicator (``Comm`` delegates here): ``Revoke``, ``Is_revoked``,
``Get_failed``, ``Ack_failed``, ``Agree``/``Iagree``, ``Shrink``/``Ishrink``; and `guard`, which
makes every communicating call of a revoked communicator raise ``ERR_REVOKED``.

Failures are the transport's: a node the NIC gave up on (``peer_dead``) or whose MPI port is
gone (``no_port``) is in the engine's ``dead`` table, in the order noticed, and operations
involving it raise ``ERR_PROC_FAILED``. ``Revoke`` marks the communicator here and sends a
REVOKE control message (``emucluster.p2p.control``) to every other member; each member's core
fails the receives posted on it (``ERR_REVOKED``) and every later call raises. ``Agree`` and
``Shrink`` run `emucluster.mpi.ft.agreement` over control messages, which a revocation does
not stop: ``Agree`` ANDs the survivors' flags, ``Shrink`` ANDs their free context masks and
builds the communicator of the members the agreement did not find failed.

For an intercommunicator both groups take part in one agreement; ``Shrink`` gives an
intercommunicator of the surviving members of each group.
"""

from __future__ import annotations

import functools
import inspect
import time
from typing import TYPE_CHECKING, Any, TypeVar

from emucluster.mpi.buffer.view import byte_view
from emucluster.mpi.comm import kinds
from emucluster.mpi.comm.group import Group
from emucluster.mpi.comm.state import CommState
from emucluster.mpi.errors import ERR_ARG, ERR_COMM, ERR_PROC_FAILED, ERR_REVOKED
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.ft.agreement import ASK_INTERVAL_S, Agreement
from emucluster.mpi.request.request import Request, completed
from emucluster.p2p.control import REVOKE

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.comm import Comm
    from emucluster.p2p.control import Decision
    from emucluster.port.progress import Progress

__all__ = ["FaultTolerance", "guard", "revoked_error"]

C = TypeVar("C", bound=type)

_INT = 4  # bytes of the C int an Iagree flag buffer holds


class FaultTolerance:
    """The ULFM calls of one communicator."""

    __slots__ = ("_comm",)

    def __init__(self, comm: Comm) -> None:
        self._comm = comm

    def _state(self) -> CommState:
        st = self._comm._st
        if st is None:
            raise MPIException(ERR_COMM, "the communicator is COMM_NULL (or freed)")
        return st

    def Revoke(self) -> None:
        """Revoke the communicator at every member: pending and later operations on it raise
        ERR_REVOKED (the ULFM calls and Free still work)."""
        st = self._state()
        engine = st.runtime.engine
        if st.context in engine.revoked:
            return
        engine.revoke(st.context)
        for node in _members(st):
            if node != engine.node and node not in engine.dead:
                engine.control(node, (REVOKE, st.context, 0, 0), b"")

    def Is_revoked(self) -> bool:
        """Whether the communicator was revoked (here or by a member)."""
        st = self._state()
        engine = st.runtime.engine
        engine.progress()  # take in a revocation that arrived
        return st.context in engine.revoked

    def Get_failed(self) -> Group:
        """The group of the members known here to have failed, in the order noticed."""
        st = self._state()
        return Group._of(_failed(st))

    def Ack_failed(self, num_to_ack: int | None = None) -> int:
        """Acknowledge the first ``num_to_ack`` failures of ``Get_failed`` (None: all of them);
        the number acknowledged so far (``Agree`` raises only for unacknowledged ones)."""
        st = self._state()
        known = len(_failed(st))
        want = known if num_to_ack is None else min(int(num_to_ack), known)
        if want < 0:
            raise MPIException(ERR_ARG, f"Ack_failed: num_to_ack {num_to_ack} is negative")
        st.acked = max(st.acked, want)
        return st.acked

    def Agree(self, flag: int) -> int:
        """The bitwise AND of ``flag`` over the members that have not failed (collective over
        the survivors); ERR_PROC_FAILED if a member failed and this rank has not acknowledged
        it (``Ack_failed``)."""
        if not isinstance(flag, int):
            raise TypeError(f"Agree: flag must be an int, not {type(flag).__name__}")
        st = self._state()
        decision = _run(st, _agreement(st, int(flag)))
        _check_acked(st, decision)
        return _as_int32(decision.value)

    def Iagree(self, flag: Any) -> Request:
        """Nonblocking ``Agree`` on a buffer of one C int: read now, the AND written into it on
        completion."""
        view = byte_view(flag, writable=True)  # TypeError (and MPI.Exception) if no buffer
        if view.nbytes != _INT:
            raise ValueError(f"Iagree: the flag buffer holds {view.nbytes} bytes, not one int")
        cell = view.cast("i")
        st = self._state()
        agreement = _agreement(st, int(cell[0]))
        return Request._of(_AgreePending(st, agreement, cell), st.runtime.engine)

    def Shrink(self) -> Any:
        """A new communicator of the members that have not failed (collective over the
        survivors, whether or not the communicator was revoked)."""
        st = self._state()
        rt = st.runtime
        decision = _run(st, _agreement(st, rt.free_context_mask()))
        failed = decision.failed
        if st.local is None:
            nodes = tuple(n for n in st.nodes if n not in failed)
            new = CommState(rt, rt.claim_context(decision.value), nodes, nodes.index(rt.node))
            new.errhandler = st.errhandler.acquire()
            return kinds.handle(new, kinds.NO_TOPOLOGY)
        local = tuple(n for n in st.local.nodes if n not in failed)
        remote = tuple(n for n in st.nodes if n not in failed)
        context = rt.claim_context(decision.value)
        inner = rt.claim_context(decision.value & rt.free_context_mask())
        rank = local.index(rt.node)
        new = CommState(rt, context, remote, rank)
        new.local = CommState(rt, inner, local, rank)
        new.errhandler = st.errhandler.acquire()
        return kinds.handle(new, kinds.INTER)

    def Ishrink(self) -> tuple[Any, Request]:
        """Nonblocking ``Shrink``: (the new communicator, a request); the agreement completes
        before this returns, so the request is complete already."""
        return self.Shrink(), completed()


class _AgreePending:
    """An ``Iagree``: its agreement stepped whenever the request is polled."""

    __slots__ = ("agreement", "cell", "st")

    def __init__(self, st: CommState, agreement: Agreement, cell: memoryview) -> None:
        self.st = st
        self.agreement = agreement
        self.cell = cell

    def done(self) -> bool:
        return _step(self.st.runtime.engine, self.agreement)

    def finish(self, status: Any) -> object:
        decision = self.agreement.decision
        assert decision is not None
        self.cell[0] = _as_int32(decision.value)
        if status is not None:
            status.set(-1, -1, 0)
        _check_acked(self.st, decision)
        return None

    def cancel(self) -> None:
        return None


def _members(st: CommState) -> list[int]:
    """Every member's node id (both groups of an intercommunicator)."""
    nodes = list(st.nodes)
    if st.local is not None:
        nodes += [n for n in st.local.nodes if n not in nodes]
    return nodes


def _failed(st: CommState) -> list[int]:
    """The members known dead here, in the order the transport noticed them."""
    members = set(_members(st))
    return [n for n in st.runtime.engine.dead if n in members]


def _agreement(st: CommState, value: int) -> Agreement:
    """This rank's part in the communicator's next agreement on ``value``."""
    seq = st.agreements
    st.agreements += 1
    engine = st.runtime.engine
    return Agreement(engine.ledger, (st.context, seq), _members(st), engine.node, value)


def _step(engine: Progress, agreement: Agreement) -> bool:
    for send in agreement.step(time.monotonic(), engine.dead):
        engine.control(send.dst_node, send.args, send.payload)
    decision = agreement.decision
    if decision is None:
        return False
    for node in decision.failed:  # known here from now on (Get_failed, Ack_failed)
        engine.peer_failed(node, "failed (reported by a fault-tolerant agreement)")
    return True


def _run(st: CommState, agreement: Agreement) -> Decision:
    """Drive ``agreement`` to its decision, asking the members waited on meanwhile."""
    engine = st.runtime.engine

    def ready() -> bool:
        return _step(engine, agreement)

    while not ready():
        engine.wait_for(ready, timeout=ASK_INTERVAL_S)
    decision = agreement.decision
    assert decision is not None
    return decision


def _check_acked(st: CommState, decision: Decision) -> None:
    acked = set(_failed(st)[: st.acked])
    unacked = sorted(decision.failed - acked)
    if unacked:
        raise MPIException(ERR_PROC_FAILED, f"Agree: nodes {unacked} failed, not acknowledged")


def _as_int32(value: int) -> int:
    """``value`` as a C int (the flag of MPI_Comm_agree)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


# -- the revoked check --------------------------------------------------------------------------

_EXEMPT = frozenset({
    "Revoke", "Is_revoked", "Get_failed", "Ack_failed", "Agree", "Iagree", "Shrink", "Ishrink",
    "Free", "free", "Disconnect", "Abort",
})  # fmt: skip
"""Calls that still work on a revoked communicator."""

_GUARDED_ROOMS = ("emucluster.mpi.pt2pt.", "emucluster.mpi.collective.")
"""The rooms whose delegated calls communicate (and the neighborhood collectives)."""

_GUARDED_NAMES = frozenset({
    "Dup", "Idup", "Dup_with_info", "Idup_with_info", "Clone", "Split", "Split_type", "Create",
    "Create_group", "Create_intercomm", "Merge",
})  # fmt: skip
"""Calls defined on the communicator class itself that communicate."""


def revoked_error() -> MPIException:
    """The error a call on a revoked communicator raises."""
    return MPIException(ERR_REVOKED, "the communicator was revoked")


def _guarded(function: Callable[..., Any]) -> Callable[..., Any]:
    # A `delegate` method is unwrapped: one frame does the check and the delegation (its
    # locals `handle` and `method` are what tests/unit/mpisim.py names a parked call by).
    role, method = getattr(function, "__delegate__", (None, function))

    @functools.wraps(function)
    def call(handle: Any, /, *args: Any, **kwargs: Any) -> Any:
        st = handle._st
        if st is not None:
            revoked = st.runtime.engine.revoked
            if revoked and st.context in revoked:
                raise revoked_error()
        return method(handle if role is None else role(handle), *args, **kwargs)

    return call


def guard(cls: C) -> C:
    """Make every communicating call defined in ``cls``'s body raise ERR_REVOKED once its
    communicator is revoked (one set lookup while none is)."""
    for name, value in list(vars(cls).items()):
        if inspect.isfunction(value) and _communicates(name, value):
            setattr(cls, name, _guarded(value))
    return cls


def _communicates(name: str, function: Callable[..., Any]) -> bool:
    if name in _EXEMPT:
        return False
    if name in _GUARDED_NAMES or name.lower().lstrip("i").startswith("neighbor_"):
        return True
    room = getattr(getattr(function, "__wrapped__", None), "__module__", None) or ""
    return room.startswith(_GUARDED_ROOMS)
