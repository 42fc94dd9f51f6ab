"""Communicators: ``Comm`` / ``Intracomm`` with point-to-point calls, Dup, Split, Free.

A communicator is a context id pair (point-to-point traffic on the even id, collective
traffic on the odd one, so neither can take the other's messages), the list of nodes of its
ranks, and this process's rank. New pairs are agreed collectively as MPICH does: every member
contributes its mask of free pairs, an allreduce ANDs them, and all take the lowest common
one. Split groups of one call share the pair; they are disjoint, so they cannot collide.

Lowercase calls pickle Python objects (protocol 5); uppercase calls send the bytes of buffer
message specs (see `emucluster.mpi.buffer.spec`). Collective calls come from `Collectives`.
"""

from __future__ import annotations

import pickle
import warnings
from typing import TYPE_CHECKING, Any

from emucluster.mpi import lifecycle
from emucluster.mpi.buffer.serial import PICKLE
from emucluster.mpi.buffer.spec import message
from emucluster.mpi.collective.calls import Collectives, internal_allgather, internal_allreduce
from emucluster.mpi.collective.nonblocking import NonblockingCollectives, VectorCollectives
from emucluster.mpi.comm import free as commfree
from emucluster.mpi.comm import fromgroup as commgroup
from emucluster.mpi.comm import kinds
from emucluster.mpi.comm.extras import COMM_KEYVALS, CommExtras
from emucluster.mpi.comm.group import Group
from emucluster.mpi.comm.state import CommState
from emucluster.mpi.constants import (
    ANY_SOURCE,
    ANY_TAG,
    APPNUM,
    CONGRUENT,
    IDENT,
    IO,
    KEYVAL_INVALID,
    LASTUSEDCODE,
    PROC_NULL,
    SIMILAR,
    TAG_UB,
    TAG_UB_VALUE,
    UNDEFINED,
    UNEQUAL,
    UNIVERSE_SIZE,
    WTIME_IS_GLOBAL,
)
from emucluster.mpi.errhandler import Errhandler
from emucluster.mpi.errors import (
    ERR_COMM,
    ERR_KEYVAL,
    ERR_OTHER,
    ERR_RANK,
    ERR_TAG,
    last_used_code,
)
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import INFO_NULL, Info
from emucluster.mpi.pt2pt import bsend
from emucluster.mpi.pt2pt.mprobe import MatchedProbe
from emucluster.mpi.pt2pt.persistent import PersistentP2P
from emucluster.mpi.request.request import BothPending, RecvPending, Request, SendPending, completed
from emucluster.mpi.topo import create as topo_create
from emucluster.p2p.envelope import ANY_SOURCE as CORE_ANY_SOURCE
from emucluster.p2p.protocol import Outcome
from emucluster.port.progress import DeadlockError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emucluster.mpi.request.status import Status
    from emucluster.mpi.runtime import Runtime
    from emucluster.mpi.topo.topocomm import Cartcomm, Distgraphcomm, Graphcomm
    from emucluster.p2p.protocol import RecvOp, SendOp
    from emucluster.port.progress import Progress

__all__ = ["Comm", "Errhandler", "Intercomm", "Intracomm", "make_world"]

PICKLE_PROTOCOL = pickle.HIGHEST_PROTOCOL


class Comm(CommExtras, PersistentP2P, MatchedProbe):
    """A communicator (mpi4py's ``MPI.Comm``); COMM_NULL when it has no state."""

    __slots__ = ("_st",)

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

    def __hash__(self) -> int:
        return id(self._st)

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
        """False: only intracommunicators exist here."""
        self._state()
        return False

    def Is_intra(self) -> bool:
        """True."""
        self._state()
        return True

    @property
    def is_inter(self) -> bool:
        """False."""
        return self.Is_inter()

    @property
    def is_intra(self) -> bool:
        """True."""
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

    def Get_attr(self, keyval: int) -> int | bool | None:
        """TAG_UB, UNIVERSE_SIZE and WTIME_IS_GLOBAL; None for other keys."""
        self._state()
        if keyval == TAG_UB:
            return TAG_UB_VALUE
        if keyval == UNIVERSE_SIZE:
            return self._state().runtime.num_nodes
        if keyval == WTIME_IS_GLOBAL:
            return False
        if keyval == LASTUSEDCODE:
            return last_used_code()
        if keyval == IO:
            return ANY_SOURCE  # every process may do (Python) I/O
        if keyval == APPNUM:
            return 0  # emurun launches one program
        if keyval == KEYVAL_INVALID:
            raise MPIException(ERR_KEYVAL, "Get_attr of KEYVAL_INVALID")
        return COMM_KEYVALS.get(self._state().attrs, keyval)  # type: ignore[no-any-return]

    def Get_errhandler(self) -> Errhandler:
        """A new handle to the communicator's error handler (see `emucluster.mpi.errhandler`:
        failing calls raise MPI.Exception whichever is set)."""
        return Errhandler._of(self._state().errhandler)

    def Set_errhandler(self, errhandler: Errhandler) -> None:
        """Set the handler ``Call_errhandler`` runs; ERR_ERRHANDLER for ERRHANDLER_NULL."""
        st = self._state()
        handler = errhandler._handler()
        st.errhandler.release()
        st.errhandler = handler.acquire()

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
        """The parent intercommunicator: COMM_NULL, as no process here was spawned."""
        return Intercomm()

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
        new.info = dict(st.info) if info is None else self._hints(info)
        self._copy_attrs(new)
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
            return Intracomm()
        if color < 0:
            raise MPIException(ERR_COMM, f"Split color {color} must be >= 0 or UNDEFINED")
        context = st.runtime.claim_context(mask)
        members = sorted((k, r) for r, (c, k) in enumerate(entries) if c == color)
        nodes = tuple(st.nodes[r] for _, r in members)
        rank = [r for _, r in members].index(st.rank)
        return Intracomm._of(CommState(st.runtime, context, nodes, rank))

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
        self._delete_attrs()
        st.errhandler.release()
        rt = st.runtime
        release = commfree.release_when_idle(rt.engine, st.context, rt.release_context)
        self._st = None
        return release

    # -- lowercase point-to-point (pickled objects) -------------------------------------------

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send a Python object (blocking; returns once the object may be reused)."""
        _wait_send(self._st, self._post_send(PICKLE.dumps(obj), dest, tag, False))

    def bsend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Buffered send: returns at once; the copy leaves from the attached buffer."""
        bsend.start(self, PICKLE.dumps(obj), dest, tag)

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Synchronous send: returns once a receive has matched it."""
        _wait_send(self._st, self._post_send(PICKLE.dumps(obj), dest, tag, True))

    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking send of a Python object."""
        op = self._post_send(PICKLE.dumps(obj), dest, tag, False)
        return completed() if op is None else Request._of(SendPending(op), self._engine())

    def ibsend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking buffered send."""
        return bsend.start(self, PICKLE.dumps(obj), dest, tag)

    def issend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking synchronous send."""
        op = self._post_send(PICKLE.dumps(obj), dest, tag, True)
        return completed() if op is None else Request._of(SendPending(op), self._engine())

    def recv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: Status | None = None) -> Any:  # fmt: skip
        """Receive a Python object (a ``buf`` is ignored, with a warning)."""
        _warn_buf(buf)
        op = self._post_recv(source, tag, None)
        if op is None:
            return completed(None).wait(status)
        _wait_op(self._st, op)
        return RecvPending(op, self._engine(), unpickle=True).finish(status)

    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Nonblocking receive of a Python object; ``wait()`` returns it."""
        op = self._post_recv(source, tag, None)
        return (
            completed(None)
            if op is None
            else Request._of(RecvPending(op, self._engine(), unpickle=True), self._engine())
        )

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: Status | None = None) -> Any:  # fmt: skip
        """Send one object and receive another."""
        request = self.irecv(None, source, recvtag)
        self.send(sendobj, dest, sendtag)
        return request.wait(status)

    def probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: Status | None = None) -> bool:  # fmt: skip
        """Wait until a matching message is available (not received); returns True."""
        return self.Probe(source, tag, status)

    def iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> bool:  # fmt: skip
        """Whether a matching message is available now."""
        return self.Iprobe(source, tag, status)

    # -- uppercase point-to-point (buffers) ---------------------------------------------------

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Send a buffer (blocking)."""
        _wait_send(self._st, self._post_send(message(buf, writable=False).view, dest, tag, False))

    def Bsend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Buffered send: returns at once; the copy leaves from the attached buffer."""
        bsend.start(self, bytes(message(buf, writable=False).view), dest, tag)

    Rsend = Send

    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Synchronous buffer send."""
        _wait_send(self._st, self._post_send(message(buf, writable=False).view, dest, tag, True))

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking buffer send (do not modify the buffer until it completes)."""
        op = self._post_send(message(buf, writable=False).view, dest, tag, False)
        return completed() if op is None else Request._of(SendPending(op), self._engine())

    def Ibsend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking buffered send."""
        return bsend.start(self, bytes(message(buf, writable=False).view), dest, tag)

    Irsend = Isend

    def Issend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Nonblocking synchronous buffer send."""
        op = self._post_send(message(buf, writable=False).view, dest, tag, True)
        return completed() if op is None else Request._of(SendPending(op), self._engine())

    def Recv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG,
             status: Status | None = None) -> None:  # fmt: skip
        """Receive into a buffer; ERR_TRUNCATE if the message is longer."""
        msg = message(buf, writable=True, staged=True)
        op = self._post_recv(source, tag, msg.view)
        if op is None:
            completed(None).wait(status)
            return
        _wait_op(self._st, op)
        RecvPending(op, self._engine(), unpickle=False, deliver=msg.deliver).finish(status)

    def Irecv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Nonblocking receive into a buffer."""
        msg = message(buf, writable=True, staged=True)
        op = self._post_recv(source, tag, msg.view)
        if op is None:
            return completed(None)
        return Request._of(
            RecvPending(op, self._engine(), unpickle=False, deliver=msg.deliver), self._engine()
        )

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                 status: Status | None = None) -> None:  # fmt: skip
        """Send one buffer and receive into another (both specs are checked before either
        is posted, so a bad one leaves nothing behind)."""
        outgoing = message(sendbuf, writable=False).view
        request = self.Irecv(recvbuf, source, recvtag)
        _wait_send(self._st, self._post_send(outgoing, dest, sendtag, False))
        request.Wait(status)

    def Isendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                  source: int = ANY_SOURCE, recvtag: int = ANY_TAG) -> Request:  # fmt: skip
        """Nonblocking Sendrecv: one request completing both."""
        outgoing = message(sendbuf, writable=False).view
        receive = self.Irecv(recvbuf, source, recvtag)
        op = self._post_send(outgoing, dest, sendtag, False)
        send = completed() if op is None else Request._of(SendPending(op), self._engine())
        return Request._of(BothPending(send, receive), self._engine())

    def Isendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0,
                          source: int = ANY_SOURCE, recvtag: int = ANY_TAG) -> Request:  # fmt: skip
        """Nonblocking Sendrecv_replace (the outgoing bytes are copied first)."""
        outgoing = bytes(message(buf, writable=True).view)
        receive = self.Irecv(buf, source, recvtag)
        op = self._post_send(outgoing, dest, sendtag, False)
        send = completed() if op is None else Request._of(SendPending(op), self._engine())
        return Request._of(BothPending(send, receive), self._engine())

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0,
                         source: int = ANY_SOURCE, recvtag: int = ANY_TAG,
                         status: Status | None = None) -> None:  # fmt: skip
        """Send a buffer and receive into the same buffer."""
        outgoing = bytes(message(buf, writable=True).view)
        request = self.Irecv(buf, source, recvtag)
        _wait_send(self._st, self._post_send(outgoing, dest, sendtag, False))
        request.Wait(status)

    def Probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
              status: Status | None = None) -> bool:  # fmt: skip
        """Wait until a matching message is available; returns True."""
        st, src, tg = self._probe_args(source, tag)
        if src is None:
            completed(None).wait(status)
            return True
        engine = st.runtime.engine
        context = st.context
        info = engine.probe(context, src, tg)
        if info is None:
            try:
                engine.wait_for(lambda: engine.probe(context, src, tg) is not None)
            except DeadlockError as exc:
                raise MPIException(ERR_RANK, f"Probe: {exc}") from None
            info = engine.probe(context, src, tg)
            assert info is not None
        if status is not None:
            status.set(info.source, info.tag, info.count)
        return True

    def Iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG,
               status: Status | None = None) -> bool:  # fmt: skip
        """Whether a matching message is available now."""
        st, src, tg = self._probe_args(source, tag)
        if src is None:
            completed(None).wait(status)
            return True
        engine = st.runtime.engine
        engine.progress()
        info = engine.probe(st.context, src, tg)
        if info is None:
            return False
        if status is not None:
            status.set(info.source, info.tag, info.count)
        return True

    # -- internals ----------------------------------------------------------------------------

    def _post_send(self, payload: bytes | memoryview, dest: int, tag: int,
                   sync: bool) -> SendOp | None:  # fmt: skip
        st = self._st
        if st is None:
            raise MPIException(ERR_COMM, "the communicator is COMM_NULL (or freed)")
        if not 0 <= tag <= TAG_UB_VALUE:
            raise MPIException(ERR_TAG, f"invalid tag {tag} (0..{TAG_UB_VALUE})")
        if not 0 <= dest < st.size:
            if dest == PROC_NULL:
                return None
            raise MPIException(ERR_RANK, f"invalid rank {dest} (communicator of {st.size})")
        return st.runtime.engine.send(st.context, st.rank, tag, st.nodes[dest], payload,
                                      sync=sync)  # fmt: skip

    def _post_recv(self, source: int, tag: int, buf: memoryview | None) -> RecvOp | None:
        st = self._st
        if st is None:
            raise MPIException(ERR_COMM, "the communicator is COMM_NULL (or freed)")
        if not 0 <= tag <= TAG_UB_VALUE and tag != ANY_TAG:
            raise MPIException(ERR_TAG, f"invalid tag {tag} (0..{TAG_UB_VALUE} or ANY_TAG)")
        if 0 <= source < st.size:
            src_node: int | None = st.nodes[source]
        elif source == ANY_SOURCE:
            source, src_node = CORE_ANY_SOURCE, None
        elif source == PROC_NULL:
            return None
        else:
            raise MPIException(ERR_RANK, f"invalid rank {source} (communicator of {st.size})")
        return st.runtime.engine.recv(st.context, source, tag, src_node, buf)

    def _probe_args(self, source: int, tag: int) -> tuple[CommState, int | None, int]:
        st = self._state()
        if not 0 <= tag <= TAG_UB_VALUE and tag != ANY_TAG:
            raise MPIException(ERR_TAG, f"invalid tag {tag}")
        if source == ANY_SOURCE:
            return st, CORE_ANY_SOURCE, tag
        if source == PROC_NULL:
            return st, None, tag
        if not 0 <= source < st.size:
            raise MPIException(ERR_RANK, f"invalid rank {source} (communicator of {st.size})")
        return st, source, tag


class Intracomm(Comm, Collectives, VectorCollectives, NonblockingCollectives):
    """An intracommunicator (mpi4py's ``MPI.Intracomm``): point-to-point and collectives."""

    __slots__ = ()

    # -- topology constructors (``emucluster.mpi.topo.create``) --------------------------------

    def Create_cart(self, dims: Sequence[int], periods: Sequence[bool] | bool | None = None,
                    reorder: bool = False) -> Cartcomm:  # fmt: skip
        """A Cartesian communicator (COMM_NULL for ranks beyond ``prod(dims)``; collective)."""
        found: Cartcomm = topo_create.cart(self, dims, periods)
        return found

    def Create_graph(self, index: Sequence[int], edges: Sequence[int],
                     reorder: bool = False) -> Graphcomm:  # fmt: skip
        """A graph communicator (COMM_NULL for ranks beyond the graph's nodes; collective)."""
        found: Graphcomm = topo_create.graph(self, index, edges)
        return found

    def Create_dist_graph_adjacent(self, sources: Sequence[int] | None,
                                   destinations: Sequence[int] | None,
                                   sourceweights: object = None, destweights: object = None,
                                   info: object = None, reorder: bool = False,
                                   ) -> Distgraphcomm:  # fmt: skip
        """A distributed graph communicator from each rank's own neighbours (collective)."""
        found: Distgraphcomm = topo_create.dist_graph_adjacent(
            self, sources, destinations, sourceweights, destweights
        )
        return found

    def Create_dist_graph(self, sources: Sequence[int], degrees: Sequence[int],
                          destinations: Sequence[int], weights: object = None,
                          info: object = None, reorder: bool = False) -> Distgraphcomm:  # fmt: skip
        """A distributed graph communicator from any rank's edges (collective)."""
        found: Distgraphcomm = topo_create.dist_graph(self, sources, degrees, destinations,
                                                      weights)  # fmt: skip
        return found

    def Cart_map(self, dims: Sequence[int], periods: Sequence[bool] | bool | None = None) -> int:
        """This rank's rank in such a grid, or UNDEFINED (no reordering here)."""
        return topo_create.cart_map(self._state(), dims, periods)

    def Graph_map(self, index: Sequence[int], edges: Sequence[int]) -> int:
        """This rank's rank in such a graph, or UNDEFINED (no reordering here)."""
        return topo_create.graph_map(self._state(), index, edges)

    @classmethod
    def _of(cls, st: CommState) -> Intracomm:
        comm = cls()
        comm._st = st
        return comm


class Intercomm(Comm):
    """Intercommunicators (mpi4py's ``MPI.Intercomm``): only the null handle exists here
    (no spawn, no Create_intercomm); calls on it raise ERR_COMM."""

    __slots__ = ()

    def __new__(cls, comm: Comm | None = None) -> Intercomm:
        """COMM_NULL; TypeError for an intracommunicator."""
        if comm is not None and comm._st is not None:
            raise TypeError("Intercomm() takes an intercommunicator")
        self = super().__new__(cls, comm)
        assert isinstance(self, Intercomm)
        return self

    def Get_remote_group(self) -> Group:
        """The remote group (ERR_COMM: COMM_NULL)."""
        self._state()
        raise AssertionError("unreachable: an Intercomm is always null here")

    @property
    def remote_group(self) -> Group:
        """The remote group."""
        return self.Get_remote_group()

    def Get_remote_size(self) -> int:
        """The remote size (ERR_COMM: COMM_NULL)."""
        self._state()
        raise AssertionError("unreachable: an Intercomm is always null here")

    @property
    def remote_size(self) -> int:
        """The remote size."""
        return self.Get_remote_size()

    def Merge(self, high: bool = False) -> Intracomm:
        """Merge into an intracommunicator (ERR_COMM: COMM_NULL)."""
        self._state()
        raise AssertionError("unreachable: an Intercomm is always null here")


def _intracomm(st: CommState | None) -> Intracomm:
    return Intracomm() if st is None else Intracomm._of(st)


kinds.register(kinds.NO_COMM, Comm)
kinds.register(kinds.NO_TOPOLOGY, Intracomm)


def make_world(rt: Runtime) -> tuple[Intracomm, Intracomm]:
    """COMM_WORLD (contexts 0/1, rank == node) and COMM_SELF (contexts 2/3) of ``rt``."""
    node = rt.node
    world = CommState(rt, 0, tuple(range(rt.num_nodes)), node, name="MPI_COMM_WORLD")
    rt.world = world
    self_ = CommState(rt, 2, (node,), 0, name="MPI_COMM_SELF")
    return Intracomm._of(world), Intracomm._of(self_)


def _warn_buf(buf: Any) -> None:
    if buf is not None:
        warnings.warn("the buf argument of recv is ignored: any size is received",
                      UserWarning, stacklevel=3)  # fmt: skip


def _wait_op(st: CommState | None, op: RecvOp | SendOp) -> None:
    if op.done:
        return
    assert st is not None  # an operation was posted on it
    try:
        st.runtime.engine.wait_for(lambda: op.done)
    except DeadlockError as exc:
        raise MPIException(ERR_RANK, str(exc)) from None


def _wait_send(st: CommState | None, op: SendOp | None) -> None:
    if op is None:
        return
    _wait_op(st, op)
    if op.outcome is not Outcome.OK:
        SendPending(op).finish(None)
