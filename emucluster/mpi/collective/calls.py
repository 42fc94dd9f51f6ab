"""The collective calls of a communicator, dispatched to the algorithms of ``emucluster.coll``.

Each call builds a `CallContext` (the `CollContext` of `emucluster.coll.context`) on the
communicator's collective context id with a fresh call number, looks the algorithm up
(``algorithm=`` keyword, else ``EMU_<OP>``, else the MPICH baseline), and drives the
generator: to completion for a blocking call, or inside a Request for Ibarrier, Ibcast,
Ireduce and Iallreduce. Lowercase calls pickle objects; uppercase calls move the raw bytes of
buffer specs and reduce elementwise on their numpy dtype.

Dup and Split agree on context ids with `internal_allreduce` / `internal_allgather`, which
always use the baseline algorithms, whatever the environment selects for the program.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

from emucluster import coll
from emucluster.coll.context import TAG_LIMIT, CollRequest, drive
from emucluster.mpi.buffer.spec import MessageSpecError, Msg, message
from emucluster.mpi.collective import plans as bufcoll
from emucluster.mpi.collective.ops import BufferCombine, ObjectCombine, Op, predefined_ops
from emucluster.mpi.comm.state import COLL_SEQ_MOD, CommState
from emucluster.mpi.constants import IN_PLACE
from emucluster.mpi.errors import (
    ERR_ARG,
    ERR_COMM,
    ERR_COUNT,
    ERR_OTHER,
    ERR_ROOT,
    ERR_TRUNCATE,
    ERR_TYPE,
)
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.request.request import CollDriver, Request, check_failed
from emucluster.offload.shells import HostServices
from emucluster.port.progress import DeadlockError

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.coll.context import CollGen
    from emucluster.p2p.protocol import RecvOp, SendOp
    from emucluster.port.progress import Progress

__all__ = [
    "CallContext",
    "Collectives",
    "internal_allgather",
    "internal_allreduce",
    "lookup",
    "trace_describe",
]

PICKLE_PROTOCOL = pickle.HIGHEST_PROTOCOL
SUM = predefined_ops["SUM"]
_BASELINE_ALLREDUCE = "recursive-doubling"
_BASELINE_ALLGATHER = "recursive-doubling"
_LASTING_CONTEXTS = 4  # COMM_WORLD's (0) and COMM_SELF's (2): never freed, never reused


class CallContext:
    """One collective call's channel (the `CollContext` the algorithms see)."""

    __slots__ = ("_base", "_context", "_engine", "lasting", "nodes", "rank", "services", "size")

    def __init__(self, st: CommState) -> None:
        self.rank = st.rank
        self.size = st.size
        self.nodes = st.nodes
        """Node id of each rank (for offloads that talk to NICs)."""
        self.services = HostServices(st.runtime.engine, st.runtime.config)
        """This rank's offload shells (``emucluster.offload.services``)."""
        self.lasting = st.context < _LASTING_CONTEXTS
        """The communicator's context id is never freed (COMM_WORLD, COMM_SELF), so state an
        offload keeps per context at the NICs cannot be met by another communicator."""
        self._engine = st.runtime.engine
        self._context = st.context + 1
        self._base = (st.coll_seq % COLL_SEQ_MOD) * TAG_LIMIT
        st.coll_seq += 1

    def isend(self, payload: bytes | bytearray | memoryview, dest: int, tag: int) -> SendOp:
        """Send ``payload`` to rank ``dest`` with algorithm tag ``tag``."""
        return self._engine.send(self._context, self.rank, self._base + tag,
                                 self.nodes[dest], payload)  # fmt: skip

    def wire(self, tag: int) -> tuple[int, int]:
        """(context id, wire tag) this call's messages with algorithm tag ``tag`` carry."""
        return self._context, self._base + tag

    def irecv(self, source: int, tag: int) -> RecvOp:
        """Receive the next message from rank ``source`` with algorithm tag ``tag``."""
        return self._engine.recv(self._context, source, self._base + tag,
                                 self.nodes[source], None)  # fmt: skip


def lookup(st: CommState, operation: str, algorithm: str | None) -> Callable[..., CollGen[Any]]:
    """The algorithm for ``operation`` (per-call name, else ``EMU_<OP>``, else baseline)."""
    return lookup_entry(st, operation, algorithm).algorithm


def lookup_entry(st: CommState, operation: str, algorithm: str | None) -> coll.Entry:
    """The registry entry for ``operation`` (per-call name, else ``EMU_<OP>``, else baseline)."""
    try:
        return coll.entry(operation, algorithm, environ=st.runtime.config.algorithms)
    except coll.UnknownAlgorithmError as exc:
        raise MPIException(ERR_ARG, str(exc)) from None


def trace_describe(comm: Any, call: str, algorithm: str | None) -> tuple[int, str]:
    """For ``emurun --trace``: (context id, the algorithm ``call`` runs, "" if none) of a
    call on ``comm`` (an ``emucluster.MPI.Comm``)."""
    st = getattr(comm, "_st", None)
    if not isinstance(st, CommState):
        return -1, ""
    operation = call.lower()
    if operation not in coll.OPERATIONS:
        return st.context, ""
    return st.context, lookup_entry(st, operation, algorithm).name


def waiter(engine: Progress) -> Callable[[list[CollRequest]], None]:
    """``wait_all(requests)`` on ``engine``: block (making progress) until every request is
    complete; raise if one failed."""

    def wait_all(requests: list[CollRequest]) -> None:
        if not all(r.done for r in requests):
            try:
                engine.wait_for(lambda: all(r.done for r in requests))
            except DeadlockError as exc:
                raise MPIException(ERR_OTHER, str(exc)) from None
        check_failed(requests)

    return wait_all


def run(st: CommState, operation: str, algorithm: str | None, *args: object) -> Any:
    """Run one blocking collective call to completion."""
    gen = lookup(st, operation, algorithm)(CallContext(st), *args)
    return drive(gen, waiter(st.runtime.engine))


def start(st: CommState, operation: str, algorithm: str | None, args: tuple[object, ...],
          post: Callable[[Any], object]) -> Request:  # fmt: skip
    """Start one nonblocking collective call; its Request completes with ``post(result)``.
    An algorithm registered ``blocking_only`` (application bypass: its synchronous part would
    run inside the progress engine) gives way to the operation's baseline."""
    found = lookup_entry(st, operation, algorithm)
    if found.blocking_only:
        found = lookup_entry(st, operation, coll.BASELINES[operation])
    driver = CollDriver(found.algorithm(CallContext(st), *args), post, context=st.context)
    engine = st.runtime.engine
    engine.add(driver)
    return Request._of(driver, engine)


def run_plan(st: CommState, algorithm: str | None, plan: bufcoll.Plan) -> None:
    """Run a buffer collective's plan to completion."""
    plan.post(run(st, plan.operation, algorithm, *plan.args))


def start_plan(st: CommState, algorithm: str | None, plan: bufcoll.Plan) -> Request:
    """Start a buffer collective's plan; the Request completes after ``plan.post``."""
    return start(st, plan.operation, algorithm, plan.args, plan.post)


def internal_allreduce(st: CommState, mask: int) -> int:
    """Bitwise AND of every member's ``mask`` (context-id agreement; baseline algorithm)."""
    combine = ObjectCombine(predefined_ops["BAND"])
    data = pickle.dumps(mask, PICKLE_PROTOCOL)
    result: int = pickle.loads(run(st, "allreduce", _BASELINE_ALLREDUCE, data, combine))
    return result


def internal_allgather(st: CommState, value: object) -> list[Any]:
    """Every member's ``value`` in rank order (baseline algorithm)."""
    blocks = run(st, "allgather", _BASELINE_ALLGATHER, pickle.dumps(value, PICKLE_PROTOCOL))
    return [pickle.loads(b) for b in blocks]


class Collectives:
    """Collective calls of an intracommunicator (mixed into ``Intracomm``)."""

    __slots__ = ()

    def _state(self) -> CommState:
        raise MPIException(ERR_COMM, "not a communicator")

    def _root(self, root: int) -> CommState:
        st = self._state()
        if not 0 <= root < st.size:
            raise MPIException(ERR_ROOT, f"invalid root {root} (communicator of {st.size})")
        return st

    # -- lowercase (pickled objects) ----------------------------------------------------------

    def barrier(self, *, algorithm: str | None = None) -> None:
        """Wait until every rank has entered."""
        run(self._state(), "barrier", algorithm)

    def bcast(self, obj: Any = None, root: int = 0, *, algorithm: str | None = None) -> Any:
        """``obj`` of the root, on every rank."""
        st = self._root(root)
        data = dump_object(obj) if st.rank == root else None
        with st.lock("bcast"):
            return pickle.loads(run(st, "bcast", algorithm, data, root))

    def gather(self, sendobj: Any, root: int = 0, *, algorithm: str | None = None) -> Any:
        """The list of every rank's object at the root; None elsewhere."""
        st = self._root(root)
        with st.lock("gather"):
            blocks = run(st, "gather", algorithm, dump_object(sendobj), root)
        return None if blocks is None else [pickle.loads(b) for b in blocks]

    def scatter(self, sendobj: Any = None, root: int = 0, *, algorithm: str | None = None) -> Any:
        """Item ``rank`` of the root's sequence."""
        st = self._root(root)
        blocks = None
        if st.rank == root:
            blocks = [dump_object(item) for item in object_items(sendobj, st.size)]
        with st.lock("scatter"):
            return pickle.loads(run(st, "scatter", algorithm, blocks, root))

    def allgather(self, sendobj: Any, *, algorithm: str | None = None) -> list[Any]:
        """The list of every rank's object, on every rank."""
        st = self._state()
        with st.lock("allgather"):
            blocks = run(st, "allgather", algorithm, dump_object(sendobj))
        return [pickle.loads(b) for b in blocks]

    def alltoall(self, sendobj: Any, *, algorithm: str | None = None) -> list[Any]:
        """Item j of rank i's sequence goes to rank j, at position i."""
        st = self._state()
        blocks = [dump_object(item) for item in object_items(sendobj, st.size)]
        with st.lock("alltoall"):
            return [pickle.loads(b) for b in run(st, "alltoall", algorithm, blocks)]

    def reduce(self, sendobj: Any, op: Op = SUM, root: int = 0, *,
               algorithm: str | None = None) -> Any:  # fmt: skip
        """``op`` over every rank's object, in rank order, at the root; None elsewhere."""
        st = self._root(root)
        result = run(st, "reduce", algorithm, dump_object(sendobj), ObjectCombine(op), root)
        return None if result is None else pickle.loads(result)

    def allreduce(self, sendobj: Any, op: Op = SUM, *, algorithm: str | None = None) -> Any:
        """``op`` over every rank's object, on every rank."""
        result = run(self._state(), "allreduce", algorithm, dump_object(sendobj), ObjectCombine(op))
        return pickle.loads(result)

    def scan(self, sendobj: Any, op: Op = SUM, *, algorithm: str | None = None) -> Any:
        """Inclusive prefix reduction: ranks 0..rank."""
        result = run(self._state(), "scan", algorithm, dump_object(sendobj), ObjectCombine(op))
        return pickle.loads(result)

    def exscan(self, sendobj: Any, op: Op = SUM, *, algorithm: str | None = None) -> Any:
        """Exclusive prefix reduction: ranks 0..rank-1 (None on rank 0)."""
        result = run(self._state(), "exscan", algorithm, dump_object(sendobj), ObjectCombine(op))
        return None if result is None else pickle.loads(result)

    # -- uppercase (buffers) ------------------------------------------------------------------

    def Barrier(self, *, algorithm: str | None = None) -> None:
        """Wait until every rank has entered."""
        run(self._state(), "barrier", algorithm)

    def Bcast(self, buf: Any, root: int = 0, *, algorithm: str | None = None) -> None:
        """The root's buffer into every rank's buffer."""
        st = self._root(root)
        msg = message(buf, writable=st.rank != root, staged=True)
        data = msg.view if st.rank == root else None
        result = run(st, "bcast", algorithm, data, root)
        if st.rank != root:
            _fill(msg, result)
            if msg.deliver is not None:
                msg.deliver(len(result))

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0, *,
               algorithm: str | None = None) -> None:  # fmt: skip
        """Elementwise ``op`` of every rank's buffer, into the root's ``recvbuf``."""
        st = self._root(root)
        is_root = st.rank == root
        rmsg = message(recvbuf, writable=True) if is_root else None
        smsg = (
            rmsg if sendbuf is IN_PLACE and rmsg is not None else message(sendbuf, writable=False)
        )
        assert smsg is not None
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)
        result = run(st, "reduce", algorithm, bytes(smsg.view), combine, root)
        if rmsg is not None:
            _fill(rmsg, result)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
                  algorithm: str | None = None) -> None:  # fmt: skip
        """Elementwise ``op`` of every rank's buffer, into every ``recvbuf``."""
        st = self._state()
        rmsg = message(recvbuf, writable=True)
        smsg = rmsg if sendbuf is IN_PLACE else message(sendbuf, writable=False)
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)
        _fill(rmsg, run(st, "allreduce", algorithm, bytes(smsg.view), combine))

    def Scan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
             algorithm: str | None = None) -> None:  # fmt: skip
        """Inclusive elementwise prefix reduction."""
        st = self._state()
        rmsg = message(recvbuf, writable=True)
        smsg = rmsg if sendbuf is IN_PLACE else message(sendbuf, writable=False)
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)
        _fill(rmsg, run(st, "scan", algorithm, bytes(smsg.view), combine))

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
               algorithm: str | None = None) -> None:  # fmt: skip
        """Exclusive elementwise prefix reduction (rank 0's recvbuf is left alone)."""
        st = self._state()
        rmsg = message(recvbuf, writable=True)
        smsg = rmsg if sendbuf is IN_PLACE else message(sendbuf, writable=False)
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)
        result = run(st, "exscan", algorithm, bytes(smsg.view), combine)
        if result is not None:
            _fill(rmsg, result)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
               algorithm: str | None = None) -> None:  # fmt: skip
        """Every rank's buffer, in rank order, into the root's ``recvbuf``."""
        st = self._root(root)
        run_plan(st, algorithm, bufcoll.gather(st, sendbuf, recvbuf, root))

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                algorithm: str | None = None) -> None:  # fmt: skip
        """Block ``rank`` of the root's ``sendbuf`` into every ``recvbuf``."""
        st = self._root(root)
        run_plan(st, algorithm, bufcoll.scatter(st, sendbuf, recvbuf, root))

    def Allgather(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """Every rank's buffer, in rank order, into every ``recvbuf``."""
        st = self._state()
        run_plan(st, algorithm, bufcoll.allgather(st, sendbuf, recvbuf))

    def Alltoall(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """Block j of rank i's ``sendbuf`` into block i of rank j's ``recvbuf``."""
        st = self._state()
        run_plan(st, algorithm, bufcoll.alltoall(st, sendbuf, recvbuf))

    # -- nonblocking --------------------------------------------------------------------------

    def Ibarrier(self, *, algorithm: str | None = None) -> Request:
        """Nonblocking barrier."""
        return start(self._state(), "barrier", algorithm, (), lambda _: None)

    def Ibcast(self, buf: Any, root: int = 0, *, algorithm: str | None = None) -> Request:
        """Nonblocking Bcast (leave ``buf`` alone until the request completes)."""
        st = self._root(root)
        msg = message(buf, writable=st.rank != root, staged=True)
        data = bytes(msg.view) if st.rank == root else None

        def post(result: bytes) -> None:
            if st.rank != root:
                _fill(msg, result)
                if msg.deliver is not None:
                    msg.deliver(len(result))

        return start(st, "bcast", algorithm, (data, root), post)

    def Ireduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0, *,
                algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Reduce."""
        st = self._root(root)
        rmsg = message(recvbuf, writable=True) if st.rank == root else None
        smsg = (
            rmsg if sendbuf is IN_PLACE and rmsg is not None else message(sendbuf, writable=False)
        )
        assert smsg is not None
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)

        def post(result: bytes | None) -> None:
            if rmsg is not None and result is not None:
                _fill(rmsg, result)

        return start(st, "reduce", algorithm, (bytes(smsg.view), combine, root), post)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
                   algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Allreduce."""
        st = self._state()
        rmsg = message(recvbuf, writable=True)
        smsg = rmsg if sendbuf is IN_PLACE else message(sendbuf, writable=False)
        _check_reduce(smsg, rmsg)
        combine = BufferCombine(op, smsg.datatype)
        return start(st, "allreduce", algorithm, (bytes(smsg.view), combine),
                     lambda result: _fill(rmsg, result))  # fmt: skip


def _check_reduce(smsg: Msg, rmsg: Msg | None) -> None:
    """mpi4py's chk_cro_args: send and receive agree on datatype and count (ValueError-
    compatible MPI.Exceptions); nothing to check in place or without a receive buffer."""
    if rmsg is None or smsg is rmsg:
        return
    if smsg.datatype != rmsg.datatype:
        raise MessageSpecError(ERR_TYPE, "mismatch in send and receive MPI datatypes")
    if smsg.elements != rmsg.elements:
        raise MessageSpecError(ERR_COUNT, f"mismatch in send count {smsg.elements} "
                                          f"and receive count {rmsg.elements}")  # fmt: skip


def dump_object(obj: object) -> bytes:
    """``obj`` pickled as lowercase collectives send it."""
    return pickle.dumps(obj, PICKLE_PROTOCOL)


def object_items(seq: Any, size: int) -> list[Any]:
    """The ``size`` items of a lowercase collective's sequence argument (ValueError if not)."""
    if seq is None:
        raise ValueError(f"expecting {size} items, got None")
    items = list(seq)
    if len(items) != size:
        raise ValueError(f"expecting {size} items, got {len(items)}")
    return items


def _blocks(view: memoryview, size: int) -> list[memoryview]:
    block, rest = divmod(len(view), size)
    if rest:
        raise ValueError(f"buffer of {len(view)} bytes does not split into {size} blocks")
    return [view[i * block : (i + 1) * block] for i in range(size)]


def _fill(msg: Msg, data: bytes) -> None:
    view = msg.view
    if len(data) > len(view):
        raise MPIException(
            ERR_TRUNCATE, f"collective result of {len(data)} bytes; the buffer holds {len(view)}"
        )
    view[: len(data)] = data
