"""One collective call: its channel, its algorithm looked up, its generator driven.

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
from emucluster.coll.tags import Tag
from emucluster.mpi.collective.ops import ObjectCombine, predefined_ops
from emucluster.mpi.comm.state import COLL_SEQ_MOD, CommState
from emucluster.mpi.errors import (
    ERR_ARG,
    ERR_COMM,
    ERR_OTHER,
    ERR_ROOT,
    ERR_TRUNCATE,
)
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.request.pending import CollDriver, check_failed
from emucluster.mpi.request.request import Request
from emucluster.offload.shells import HostServices
from emucluster.port.progress import DeadlockError

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.coll.context import CollGen
    from emucluster.mpi.buffer.spec import Msg
    from emucluster.mpi.collective import plans as bufcoll
    from emucluster.mpi.comm.intracomm import Intracomm
    from emucluster.p2p.protocol import RecvOp, SendOp
    from emucluster.port.progress import Progress

__all__ = [
    "CallContext",
    "CollectiveCalls",
    "dump_object",
    "fill",
    "internal_allgather",
    "internal_allreduce",
    "internal_trade",
    "lookup",
    "object_items",
    "run",
    "run_plan",
    "start",
    "start_plan",
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


def internal_trade(st: CommState, seq: int, peer: int, value: object) -> Any:
    """``value`` for rank ``peer``'s, both running this (Intercomm.Create_from_groups'
    leaders): one message each way on ``st``'s collective context as call number ``seq``
    (a slot the caller reserved), with the intercommunicator tag."""
    saved, st.coll_seq = st.coll_seq, seq
    ctx = CallContext(st)
    st.coll_seq = saved

    def trade() -> CollGen[bytes]:
        sent = ctx.isend(pickle.dumps(value, PICKLE_PROTOCOL), peer, Tag.INTER)
        got = ctx.irecv(peer, Tag.INTER)
        yield [sent, got]
        assert got.result is not None
        return got.result

    return pickle.loads(drive(trade(), waiter(st.runtime.engine)))


def dump_object(obj: object) -> bytes:
    """``obj`` pickled as lowercase collectives send it."""
    return pickle.dumps(obj, PICKLE_PROTOCOL)


def object_items(seq: Any, size: int) -> list[Any]:
    """The ``size`` items of a lowercase collective's sequence argument (ValueError if not);
    None sends None to every rank, as in mpi4py (``comm.scatter(None)`` gives each None)."""
    if seq is None:
        return [None] * size
    items = list(seq)
    if len(items) != size:
        raise ValueError(f"expecting {size} items, got {len(items)}")
    return items


def fill(msg: Msg, data: bytes) -> None:
    """Copy a collective's result into the receive buffer of ``msg`` (ERR_TRUNCATE if it
    does not fit)."""
    view = msg.view
    if len(data) > len(view):
        raise MPIException(
            ERR_TRUNCATE, f"collective result of {len(data)} bytes; the buffer holds {len(view)}"
        )
    view[: len(data)] = data


class CollectiveCalls:
    """What every collective delegate of ``Comm`` and ``Intracomm`` holds: the communicator's
    state, and the root and count checks its calls share."""

    __slots__ = ("_st",)

    def __init__(self, comm: Intracomm) -> None:
        self._st = comm._state()
        if self._st.local is not None:  # mpi4py has the collectives on Comm; ours are intra
            raise MPIException(ERR_COMM, "collectives on an intercommunicator are not offered")

    def _state(self) -> CommState:
        return self._st

    def _root(self, root: int) -> CommState:
        st = self._state()
        if not 0 <= root < st.size:
            raise MPIException(ERR_ROOT, f"invalid root {root} (communicator of {st.size})")
        return st

    def _counts_of(self, st: CommState) -> Any:
        return lambda count: [int(c) for c in internal_allgather(st, count)]
