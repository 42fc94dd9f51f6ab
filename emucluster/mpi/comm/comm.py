"""Communicators: ``Comm``, its identity, queries, handles, Dup, Split, Free, and delegates.

A communicator is a context id pair (point-to-point traffic on the even id, collective
traffic on the odd one, so neither can take the other's messages), the list of nodes of its
ranks, and this process's rank. New pairs are agreed collectively as MPICH does: every member
contributes its mask of free pairs, an allreduce ANDs them, and all take the lowest common
one. Split groups of one call share the pair; they are disjoint, so they cannot collide.

Lowercase calls pickle Python objects (protocol 5); uppercase calls send the bytes of buffer
message specs (see `emucluster.mpi.buffer.spec`); both live in ``emucluster.mpi.pt2pt.calls``.
Collective calls are ``Intracomm``'s (``emucluster.mpi.comm.intracomm``).

Over 500 lines because it is the handle every communicator call reaches through: identity,
handles, error handlers, names and attributes, creation and freeing, and the delegate wiring.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

from emucluster.mpi import handles, lifecycle, predefined
from emucluster.mpi.collective.blocking import Collectives
from emucluster.mpi.collective.calls import internal_allgather, internal_allreduce
from emucluster.mpi.collective.nonblocking import NonblockingCollectives, VectorCollectives
from emucluster.mpi.collective.persistent import PersistentCollectives
from emucluster.mpi.comm import free as commfree
from emucluster.mpi.comm import fromgroup as commgroup
from emucluster.mpi.comm import kinds
from emucluster.mpi.comm.attrs import COMM_KEYVALS, CommAttributes
from emucluster.mpi.comm.delegate import delegate
from emucluster.mpi.comm.group import Group
from emucluster.mpi.comm.roles import ErrorHandling, Hints, hints_of
from emucluster.mpi.comm.state import CommState
from emucluster.mpi.constants import (
    CONGRUENT,
    IDENT,
    KEYVAL_INVALID,
    SIMILAR,
    UNDEFINED,
    UNEQUAL,
)
from emucluster.mpi.errhandler import Errhandler
from emucluster.mpi.errors import (
    ERR_COMM,
    ERR_OTHER,
)
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.ft.ulfm import FaultTolerance, guard
from emucluster.mpi.info import INFO_NULL, Info
from emucluster.mpi.pt2pt.calls import PointToPoint
from emucluster.mpi.pt2pt.mprobe import MatchedProbe
from emucluster.mpi.pt2pt.partitioned import PartitionedP2P
from emucluster.mpi.pt2pt.persistent import PersistentP2P
from emucluster.mpi.request.request import Request, completed
from emucluster.mpi.unsupported import not_41
from emucluster.port.progress import DeadlockError

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.intercomm import Intercomm
    from emucluster.mpi.comm.intracomm import Intracomm
    from emucluster.mpi.keyvals import Callback
    from emucluster.port.progress import Progress


__all__ = ["COMM_NULL", "Comm", "Errhandler"]

_PREDEFINED = ("COMM_NULL", "COMM_SELF", "COMM_WORLD")

PICKLE_PROTOCOL = pickle.HIGHEST_PROTOCOL


class Comm:
    """A communicator (mpi4py's ``MPI.Comm``); COMM_NULL when it has no state.

    Its calls are delegated by concern to plain objects: point-to-point to `PointToPoint`,
    persistent requests to `PersistentP2P`, matched probes to `MatchedProbe`, attributes to
    `CommAttributes` (``emucluster.mpi.comm.delegate``)."""

    __slots__ = ("__weakref__", "_st")

    _st: CommState | None

    def __new__(cls, comm: Comm | None = None) -> Comm:
        """A handle to ``comm``'s communicator (COMM_NULL if None), as mpi4py's ``__new__``:
        subclasses may pass another communicator (a Dup, say) up from their ``__new__``."""
        if comm is not None and not isinstance(comm, Comm):
            raise TypeError(f"{cls.__name__}() takes a communicator, not {type(comm).__name__}")
        self = object.__new__(cls)
        self._st = None if comm is None else comm._st
        return self

    def __init__(self, comm: Comm | None = None) -> None:
        """Everything happens in ``__new__`` (so a subclass's choice there stands)."""

    # -- identity -----------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Comm):
            return NotImplemented
        return self._st is other._st

    __hash__ = None  # type: ignore[assignment]  # unhashable, as mpi4py's handles

    def __bool__(self) -> bool:
        return self._st is not None

    def __repr__(self) -> str:
        if self._st is None:
            return "<emucluster.MPI.Comm COMM_NULL>"
        st = self._st
        return f"<emucluster.MPI.{type(self).__name__} {st.name or 'comm'} {st.rank}/{st.size}>"

    def _state(self) -> CommState:
        st = self._st
        if st is None:
            raise MPIException(ERR_COMM, "the communicator is COMM_NULL (or freed)")
        return st

    def _engine(self) -> Progress:
        """The progress engine of the communicator's rank."""
        return self._state().runtime.engine

    # -- queries ------------------------------------------------------------------------------

    def Get_rank(self) -> int:
        """This process's rank in the communicator."""
        return self._state().rank

    def Get_size(self) -> int:
        """Number of processes in the communicator."""
        return self._state().size

    @property
    def rank(self) -> int:
        """This process's rank."""
        return self._state().rank

    @property
    def size(self) -> int:
        """Number of processes."""
        return self._state().size

    def Get_name(self) -> str:
        """The communicator's name ("MPI_COMM_NULL" for COMM_NULL)."""
        return "MPI_COMM_NULL" if self._st is None else self._st.name

    def Set_name(self, name: str) -> None:
        """Name the communicator."""
        self._state().name = str(name)

    @property
    def name(self) -> str:
        """The communicator's name."""
        return self.Get_name()

    @name.setter
    def name(self, value: str) -> None:
        self.Set_name(value)

    def Is_inter(self) -> bool:
        """Whether this is an intercommunicator."""
        return self._state().local is not None

    def Is_intra(self) -> bool:
        """Whether this is an intracommunicator."""
        return self._state().local is None

    @property
    def is_inter(self) -> bool:
        """Whether this is an intercommunicator."""
        return self.Is_inter()

    @property
    def is_intra(self) -> bool:
        """Whether this is an intracommunicator."""
        return self.Is_intra()

    @property
    def topology(self) -> int:
        """CART, GRAPH, DIST_GRAPH or UNDEFINED."""
        return self.Get_topology()

    def Get_topology(self) -> int:
        """CART, GRAPH, DIST_GRAPH or UNDEFINED (no topology)."""
        topo = self._state().topo
        return UNDEFINED if topo is None else topo.kind

    @property
    def is_topo(self) -> bool:
        """Whether the communicator has a topology."""
        return self._state().topo is not None

    Get_errhandler = delegate(ErrorHandling, ErrorHandling.Get_errhandler)
    Set_errhandler = delegate(ErrorHandling, ErrorHandling.Set_errhandler)

    def Compare(self, comm: Comm) -> int:
        """IDENT, CONGRUENT, SIMILAR or UNEQUAL (``Comm.Compare(a, b)`` works too)."""
        a, b = self._state(), comm._state()
        if a is b:
            return IDENT
        if a.nodes == b.nodes:
            return CONGRUENT
        return SIMILAR if sorted(a.nodes) == sorted(b.nodes) else UNEQUAL

    def Get_queue_stats(self) -> dict[str, object]:
        """This rank's matching-queue statistics (emucluster extension; `runtime.stats`)."""
        return self._state().runtime.stats()

    def Abort(self, errorcode: int = 0) -> None:
        """Terminate the whole job with ``errorcode``."""
        lifecycle.abort(errorcode)

    @classmethod
    def Get_parent(cls) -> Intercomm:
        """The intercommunicator to the processes that spawned this one (``Intracomm.Spawn``);
        COMM_NULL in a process that was not spawned, and after its ``Disconnect``."""
        found: Intercomm | None = kinds.parent()
        return found if found is not None else kinds.handle(None, kinds.INTER)

    @classmethod
    def Join(cls, fd: int) -> Intercomm:
        """An intercommunicator with the process at the other end of the socket ``fd``
        (both on this job's fabric; ``emucluster.mpi.dynamic.ports``)."""
        found: Intercomm = kinds.dynamic("join")(fd)
        return found

    @classmethod
    def Create_from_group(cls, group: Group, stringtag: str = "org.mpi4py",
                          info: Info = INFO_NULL,
                          errhandler: object = None) -> Intracomm:  # fmt: skip
        """The communicator of ``group`` without a parent (collective over the group; the
        agreement runs over COMM_WORLD's channel under a tag derived from ``stringtag``)."""
        world = lifecycle.current().world
        assert world is not None  # built with the runtime
        st = commgroup.create_group(world, group, commgroup.string_tag(stringtag))
        return _intracomm(st)

    # -- delegated by concern -------------------------------------------------------------------

    send = delegate(PointToPoint, PointToPoint.send)
    bsend = delegate(PointToPoint, PointToPoint.bsend)
    ssend = delegate(PointToPoint, PointToPoint.ssend)
    isend = delegate(PointToPoint, PointToPoint.isend)
    ibsend = delegate(PointToPoint, PointToPoint.ibsend)
    issend = delegate(PointToPoint, PointToPoint.issend)
    recv = delegate(PointToPoint, PointToPoint.recv)
    irecv = delegate(PointToPoint, PointToPoint.irecv)
    sendrecv = delegate(PointToPoint, PointToPoint.sendrecv)
    probe = delegate(PointToPoint, PointToPoint.probe)
    iprobe = delegate(PointToPoint, PointToPoint.iprobe)
    Send = delegate(PointToPoint, PointToPoint.Send)
    Bsend = delegate(PointToPoint, PointToPoint.Bsend)
    Rsend = delegate(PointToPoint, PointToPoint.Rsend)
    Ssend = delegate(PointToPoint, PointToPoint.Ssend)
    Isend = delegate(PointToPoint, PointToPoint.Isend)
    Ibsend = delegate(PointToPoint, PointToPoint.Ibsend)
    Irsend = delegate(PointToPoint, PointToPoint.Irsend)
    Issend = delegate(PointToPoint, PointToPoint.Issend)
    Recv = delegate(PointToPoint, PointToPoint.Recv)
    Irecv = delegate(PointToPoint, PointToPoint.Irecv)
    Sendrecv = delegate(PointToPoint, PointToPoint.Sendrecv)
    Isendrecv = delegate(PointToPoint, PointToPoint.Isendrecv)
    Isendrecv_replace = delegate(PointToPoint, PointToPoint.Isendrecv_replace)
    Sendrecv_replace = delegate(PointToPoint, PointToPoint.Sendrecv_replace)
    Probe = delegate(PointToPoint, PointToPoint.Probe)
    Iprobe = delegate(PointToPoint, PointToPoint.Iprobe)

    Send_init = delegate(PersistentP2P, PersistentP2P.Send_init)
    Bsend_init = delegate(PersistentP2P, PersistentP2P.Bsend_init)
    Ssend_init = delegate(PersistentP2P, PersistentP2P.Ssend_init)
    Rsend_init = delegate(PersistentP2P, PersistentP2P.Rsend_init)
    Recv_init = delegate(PersistentP2P, PersistentP2P.Recv_init)
    Psend_init = delegate(PartitionedP2P, PartitionedP2P.Psend_init)
    Precv_init = delegate(PartitionedP2P, PartitionedP2P.Precv_init)

    Improbe = delegate(MatchedProbe, MatchedProbe.Improbe)
    Mprobe = delegate(MatchedProbe, MatchedProbe.Mprobe)
    improbe = delegate(MatchedProbe, MatchedProbe.improbe)
    mprobe = delegate(MatchedProbe, MatchedProbe.mprobe)

    Get_attr = delegate(CommAttributes, CommAttributes.Get_attr)
    Set_attr = delegate(CommAttributes, CommAttributes.Set_attr)
    Delete_attr = delegate(CommAttributes, CommAttributes.Delete_attr)

    # -- collectives (``emucluster.mpi.collective``) ---------------------------------------------

    barrier = delegate(Collectives, Collectives.barrier)
    bcast = delegate(Collectives, Collectives.bcast)
    gather = delegate(Collectives, Collectives.gather)
    scatter = delegate(Collectives, Collectives.scatter)
    allgather = delegate(Collectives, Collectives.allgather)
    alltoall = delegate(Collectives, Collectives.alltoall)
    reduce = delegate(Collectives, Collectives.reduce)
    allreduce = delegate(Collectives, Collectives.allreduce)
    Barrier = delegate(Collectives, Collectives.Barrier)
    Bcast = delegate(Collectives, Collectives.Bcast)
    Reduce = delegate(Collectives, Collectives.Reduce)
    Allreduce = delegate(Collectives, Collectives.Allreduce)
    Gather = delegate(Collectives, Collectives.Gather)
    Scatter = delegate(Collectives, Collectives.Scatter)
    Allgather = delegate(Collectives, Collectives.Allgather)
    Alltoall = delegate(Collectives, Collectives.Alltoall)
    Ibarrier = delegate(Collectives, Collectives.Ibarrier)
    Ibcast = delegate(Collectives, Collectives.Ibcast)
    Ireduce = delegate(Collectives, Collectives.Ireduce)
    Iallreduce = delegate(Collectives, Collectives.Iallreduce)

    Gatherv = delegate(VectorCollectives, VectorCollectives.Gatherv)
    Scatterv = delegate(VectorCollectives, VectorCollectives.Scatterv)
    Allgatherv = delegate(VectorCollectives, VectorCollectives.Allgatherv)
    Alltoallv = delegate(VectorCollectives, VectorCollectives.Alltoallv)
    Alltoallw = delegate(VectorCollectives, VectorCollectives.Alltoallw)
    Reduce_scatter_block = delegate(VectorCollectives, VectorCollectives.Reduce_scatter_block)
    Reduce_scatter = delegate(VectorCollectives, VectorCollectives.Reduce_scatter)

    Igather = delegate(NonblockingCollectives, NonblockingCollectives.Igather)
    Igatherv = delegate(NonblockingCollectives, NonblockingCollectives.Igatherv)
    Iscatter = delegate(NonblockingCollectives, NonblockingCollectives.Iscatter)
    Iscatterv = delegate(NonblockingCollectives, NonblockingCollectives.Iscatterv)
    Iallgather = delegate(NonblockingCollectives, NonblockingCollectives.Iallgather)
    Iallgatherv = delegate(NonblockingCollectives, NonblockingCollectives.Iallgatherv)
    Ialltoall = delegate(NonblockingCollectives, NonblockingCollectives.Ialltoall)
    Ialltoallv = delegate(NonblockingCollectives, NonblockingCollectives.Ialltoallv)
    Ialltoallw = delegate(NonblockingCollectives, NonblockingCollectives.Ialltoallw)
    Ireduce_scatter_block = delegate(
        NonblockingCollectives, NonblockingCollectives.Ireduce_scatter_block
    )
    Ireduce_scatter = delegate(NonblockingCollectives, NonblockingCollectives.Ireduce_scatter)

    # -- persistent collectives (MPI 4.0) -------------------------------------------------------

    Barrier_init = delegate(PersistentCollectives, PersistentCollectives.Barrier_init)
    Bcast_init = delegate(PersistentCollectives, PersistentCollectives.Bcast_init)
    Gather_init = delegate(PersistentCollectives, PersistentCollectives.Gather_init)
    Gatherv_init = delegate(PersistentCollectives, PersistentCollectives.Gatherv_init)
    Scatter_init = delegate(PersistentCollectives, PersistentCollectives.Scatter_init)
    Scatterv_init = delegate(PersistentCollectives, PersistentCollectives.Scatterv_init)
    Allgather_init = delegate(PersistentCollectives, PersistentCollectives.Allgather_init)
    Allgatherv_init = delegate(PersistentCollectives, PersistentCollectives.Allgatherv_init)
    Alltoall_init = delegate(PersistentCollectives, PersistentCollectives.Alltoall_init)
    Alltoallv_init = delegate(PersistentCollectives, PersistentCollectives.Alltoallv_init)
    Alltoallw_init = delegate(PersistentCollectives, PersistentCollectives.Alltoallw_init)
    Reduce_init = delegate(PersistentCollectives, PersistentCollectives.Reduce_init)
    Allreduce_init = delegate(PersistentCollectives, PersistentCollectives.Allreduce_init)
    Reduce_scatter_block_init = delegate(
        PersistentCollectives, PersistentCollectives.Reduce_scatter_block_init
    )
    Reduce_scatter_init = delegate(PersistentCollectives, PersistentCollectives.Reduce_scatter_init)

    # -- fault tolerance (ULFM, ``emucluster.mpi.ft``) -------------------------------------------

    Revoke = delegate(FaultTolerance, FaultTolerance.Revoke)
    Is_revoked = delegate(FaultTolerance, FaultTolerance.Is_revoked)
    Get_failed = delegate(FaultTolerance, FaultTolerance.Get_failed)
    Ack_failed = delegate(FaultTolerance, FaultTolerance.Ack_failed)
    Agree = delegate(FaultTolerance, FaultTolerance.Agree)
    Iagree = delegate(FaultTolerance, FaultTolerance.Iagree)
    Shrink = delegate(FaultTolerance, FaultTolerance.Shrink)
    Ishrink = delegate(FaultTolerance, FaultTolerance.Ishrink)

    # -- info hints ---------------------------------------------------------------------------

    Get_info = delegate(Hints, Hints.Get_info)
    Set_info = delegate(Hints, Hints.Set_info)

    @property
    def info(self) -> Info:
        """The hints (a new Info object)."""
        return self.Get_info()

    @info.setter
    def info(self, info: Info) -> None:
        self.Set_info(info)

    # -- pickling and handles -----------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        found = predefined.name_of(self, _PREDEFINED)
        if found is None:
            raise ValueError(f"cannot serialize {self!r}")
        name, identical = found
        if identical:
            return predefined.lookup, (name,)
        return type(self), (predefined.lookup(name),)

    def toint(self) -> int:
        """An integer naming this communicator in this process (0 for COMM_NULL)."""
        return handles.handle_of(self._st)

    py2f = toint

    @property
    def handle(self) -> int:
        """The integer handle (``toint``)."""
        return self.toint()

    def tohandle(self) -> int:
        """The integer handle (``toint``)."""
        return self.toint()

    @classmethod
    def fromint(cls, arg: int, /) -> Comm:
        """The communicator named by ``arg``, as the class of its topology."""
        found: Comm = kinds.handle(handles.lookup(arg))
        return found

    f2py = fromint
    fromhandle = fromint

    @classmethod
    def Create_keyval(cls, copy_fn: Callback = None, delete_fn: Callback = None,
                      nopython: bool = False) -> int:  # fmt: skip
        """A new attribute key; ``copy_fn(comm, keyval, value)`` decides what Dup copies (None:
        nothing is copied), ``delete_fn(comm, keyval, value)`` runs when a value goes."""
        return COMM_KEYVALS.create(copy_fn, delete_fn)

    @classmethod
    def Free_keyval(cls, keyval: int) -> int:
        """Retire ``keyval``; returns KEYVAL_INVALID."""
        COMM_KEYVALS.free(keyval)
        return KEYVAL_INVALID

    # -- error handlers -----------------------------------------------------------------------

    @classmethod
    def Create_errhandler(cls, errhandler_fn: Callable[..., Any]) -> Errhandler:
        """A user error handler: ``errhandler_fn(comm, errorcode)``."""
        return Errhandler._create(errhandler_fn)

    Call_errhandler = delegate(ErrorHandling, ErrorHandling.Call_errhandler)

    # -- what emucluster does not have --------------------------------------------------------

    def Attach_buffer(self, buf: Any) -> None:
        """MPI 4.1 per-communicator buffers are not offered (use MPI.Attach_buffer)."""
        not_41("Comm.Attach_buffer")

    def Detach_buffer(self) -> Any:
        """MPI 4.1 per-communicator buffers are not offered."""
        not_41("Comm.Detach_buffer")

    def Flush_buffer(self) -> None:
        """MPI 4.1 per-communicator buffers are not offered."""
        not_41("Comm.Flush_buffer")

    def Iflush_buffer(self) -> Any:
        """MPI 4.1 per-communicator buffers are not offered."""
        not_41("Comm.Iflush_buffer")

    # -- communicator management --------------------------------------------------------------

    def Dup(self, info: object = None) -> Any:
        """A new communicator of this class with the same group, topology and hints and a
        new context (collective); ``info`` replaces the hints when given."""
        st = self._state()
        rt = st.runtime
        context = rt.claim_context(internal_allreduce(st, rt.free_context_mask()))
        new = CommState(rt, context, st.nodes, st.rank)
        new.topo = st.topo
        new.errhandler = st.errhandler.acquire()
        new.info = dict(st.info) if info is None else hints_of(info)
        CommAttributes(self).copy_into(new)
        comm = type(self).__new__(type(self))
        comm._st = new
        return comm

    def Dup_with_info(self, info: object) -> Any:
        """Dup with the hints of ``info``."""
        return self.Dup(info)

    def Idup(self, info: object = None) -> tuple[Any, Request]:
        """Nonblocking Dup: (the new communicator, a request); the agreement on a context id
        completes before this returns, so the request is complete already."""
        return self.Dup(info), completed()

    def Idup_with_info(self, info: object) -> tuple[Any, Request]:
        """Nonblocking Dup_with_info."""
        return self.Idup(info)

    def Clone(self) -> Any:
        """Same as Dup."""
        return self.Dup()

    def Split(self, color: int = 0, key: int = 0) -> Intracomm:
        """Communicators of the processes with equal ``color``, ranked by (key, old rank);
        COMM_NULL for color UNDEFINED (collective)."""
        st = self._state()
        entries = internal_allgather(st, (color, key))
        mask = internal_allreduce(st, st.runtime.free_context_mask())
        if color == UNDEFINED:
            return _intracomm(None)
        if color < 0:
            raise MPIException(ERR_COMM, f"Split color {color} must be >= 0 or UNDEFINED")
        context = st.runtime.claim_context(mask)
        members = sorted((k, r) for r, (c, k) in enumerate(entries) if c == color)
        nodes = tuple(st.nodes[r] for _, r in members)
        rank = [r for _, r in members].index(st.rank)
        return _intracomm(CommState(st.runtime, context, nodes, rank))

    # -- groups (logic in emucluster.mpi.comm.fromgroup) --------------------------------------

    def Get_group(self) -> Group:
        """The group of the communicator's processes."""
        return Group._of(self._state().nodes)

    @property
    def group(self) -> Group:
        """The group of the communicator's processes."""
        return self.Get_group()

    def Create(self, group: Group) -> Intracomm:
        """The communicator of ``group`` (COMM_NULL for non-members; collective)."""
        return _intracomm(commgroup.create(self._state(), group))

    def Create_group(self, group: Group, tag: int = 0) -> Intracomm:
        """The communicator of ``group`` (collective over the group's members only)."""
        return _intracomm(commgroup.create_group(self._state(), group, tag))

    def Split_type(self, split_type: int, key: int = 0, info: object = None) -> Intracomm:
        """One communicator per node for COMM_TYPE_SHARED and the MPI 4 hardware splits that
        find the node's shared memory; COMM_NULL otherwise (collective)."""
        return _intracomm(commgroup.split_type(self._state(), split_type, key, info))

    def free(self) -> None:
        """Free safely (mpi4py): COMM_WORLD, COMM_SELF and COMM_NULL stay; another handle of
        one of them becomes COMM_NULL; any other communicator is freed."""
        worlds = [predefined.lookup(name) for name in ("COMM_WORLD", "COMM_SELF")]
        if self._st is None or any(self is c for c in worlds):
            return
        if any(self._st is c._st for c in worlds):
            self._st = None
            return
        self.Free()

    def Free(self) -> None:
        """Free the communicator; it becomes COMM_NULL. Operations still pending on it
        complete normally; its context id is given back when the last has (`commfree`)."""
        self._free()

    def Disconnect(self) -> None:
        """Free the communicator once the operations pending on it completed (MPI-4.0
        §11.10.4: Disconnect waits for them, where Free returns at once)."""
        engine = self._state().runtime.engine
        release = self._free()
        if release.released:
            return
        try:
            engine.wait_for(lambda: release.released)
        except DeadlockError as exc:
            raise MPIException(ERR_OTHER, f"Disconnect: {exc}") from None

    def _free(self) -> commfree.DeferredRelease:
        st = self._state()
        if st.context < 4:
            raise MPIException(ERR_COMM, "cannot free COMM_WORLD or COMM_SELF")
        CommAttributes(self).delete_all()
        st.errhandler.release()
        rt = st.runtime
        rt.engine.forget(st.context)  # its revocation and agreements (the id will be reused)
        release = commfree.release_when_idle(rt.engine, st.context, rt.release_context)
        self._st = None
        return release


def _intracomm(st: CommState | None) -> Intracomm:
    """An ``Intracomm`` handle to ``st`` (its topology's class; a null Intracomm for None)."""
    found: Intracomm = kinds.handle(st, kinds.NO_TOPOLOGY)
    return found


kinds.register(kinds.NO_COMM, guard(Comm))

COMM_NULL = Comm()
"""The null communicator (``MPI.COMM_NULL``)."""
