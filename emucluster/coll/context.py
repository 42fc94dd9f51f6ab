"""The contract between the MPI surface and collective algorithms (``emucluster.coll``).

A collective algorithm sees one communicator's *collective channel*: a `CollContext` with
``rank``, ``size``, ``isend(payload, dest, tag)`` and ``irecv(source, tag)``. It is a
generator function: it ``yield``s a list of `CollRequest` objects to wait for (all of them
complete before the generator resumes; an empty list resumes at once) and ``return``s its
result. The blocking surface call (``comm.bcast``) drives the generator to completion; the
nonblocking one (``comm.Ibcast``) wraps it in a Request that the progress engine advances on
``test``/``wait``. Algorithms never block, sleep or touch the Port themselves.

Traffic isolation (MPICH does the same): the collective channel runs on a context id of its
own (the communicator's point-to-point context + 1), so collective messages never match
point-to-point receives of the same communicator. Each collective *call* gets a fresh
`CollContext` whose tags are private to that call: algorithm tags ``0 <= tag < TAG_LIMIT``
are mapped to a wire tag that includes a per-communicator call sequence number, so two
nonblocking collectives outstanding on one communicator never take each other's messages.
Messages between a pair of ranks on one tag are matched in the order they were sent.

Payloads are bytes: lowercase (object) collectives pickle, uppercase (buffer) collectives
pass the raw bytes of the numpy buffer. A reduction combines two payloads with a `Combine`
callable; ``combine(left, right)`` must be given the contribution of the *lower* ranks as
``left`` (MPI applies an operation in rank order: ``a0 op a1 op ... op a(n-1)``); when
``combine.commute`` is False the algorithm must keep that order.

Algorithm signatures, by operation name (``emucluster.coll.get(name, algorithm)`` returns one
of these; ``algorithm=None`` means the one chosen by ``EMU_<NAME>`` or the MPICH baseline)::

    barrier(ctx)                                   -> Gen[None]
    bcast(ctx, data: bytes | None, root: int)      -> Gen[bytes]         (data None off-root)
    reduce(ctx, data: bytes, combine, root: int)   -> Gen[bytes | None]  (None off-root)
    allreduce(ctx, data: bytes, combine)           -> Gen[bytes]
    gather(ctx, data: bytes, root: int)            -> Gen[list[bytes] | None]  (rank order)
    scatter(ctx, data: list[bytes] | None, root)   -> Gen[bytes]
    allgather(ctx, data: bytes)                    -> Gen[list[bytes]]
    alltoall(ctx, data: list[bytes])               -> Gen[list[bytes]]   (data[i] goes to i)
    scan(ctx, data: bytes, combine)                -> Gen[bytes]         (inclusive prefix)
    exscan(ctx, data: bytes, combine)              -> Gen[bytes | None]  (None on rank 0)

where ``Gen[T]`` is ``Generator[list[CollRequest], None, T]``. Every algorithm must work for
``size == 1`` and for any root. `simulate` runs an algorithm on N in-memory ranks, so the
algorithms can be unit-tested without processes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Sequence
from typing import Protocol, TypeVar

from emucluster.errors import EmuclusterError

__all__ = [
    "TAG_LIMIT",
    "CollContext",
    "CollGen",
    "CollRequest",
    "Combine",
    "LoopbackContext",
    "SimDeadlockError",
    "drive",
    "simulate",
]

TAG_LIMIT = 1 << 10  # algorithm tags are 0 .. TAG_LIMIT - 1 within one collective call

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class CollRequest(Protocol):
    """One pending isend or irecv of a collective algorithm."""

    @property
    def done(self) -> bool:
        """True once the operation completed (after the algorithm was resumed, always)."""
        ...

    @property
    def result(self) -> bytes | None:
        """The received bytes for an irecv; None for an isend (and before completion)."""
        ...


class CollContext(Protocol):
    """One communicator's collective channel, as one collective call sees it."""

    @property
    def rank(self) -> int:
        """This process's rank in the communicator."""
        ...

    @property
    def size(self) -> int:
        """Number of ranks in the communicator."""
        ...

    def isend(self, payload: bytes | bytearray | memoryview, dest: int, tag: int) -> CollRequest:
        """Start sending ``payload`` (copied or owned from now on) to rank ``dest`` on the
        collective context, with algorithm tag ``tag`` (0 <= tag < TAG_LIMIT)."""
        ...

    def irecv(self, source: int, tag: int) -> CollRequest:
        """Start receiving the next message from rank ``source`` with algorithm tag ``tag``;
        completes with its bytes as ``result``. No wildcards."""
        ...


class Combine(Protocol):
    """A reduction operation on serialised contributions (see the module docstring)."""

    @property
    def commute(self) -> bool:
        """True if ``combine(a, b) == combine(b, a)``: the algorithm may reorder operands."""
        ...

    def __call__(self, left: bytes, right: bytes) -> bytes:
        """``left op right``; ``left`` holds the contribution of the lower ranks."""
        ...


CollGen = Generator[list[CollRequest], None, T]
"""What a collective algorithm function returns when called."""


def drive(gen: CollGen[T], wait_all: Callable[[list[CollRequest]], None]) -> T:
    """Run an algorithm to completion, calling ``wait_all(requests)`` for every list it yields
    (the blocking surface passes the progress engine's wait)."""
    try:
        requests = next(gen)
        while True:
            if requests:
                wait_all(requests)
            requests = gen.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result


# -- in-memory simulation (pure; for unit tests of algorithms) ----------------------------------


class SimDeadlockError(RuntimeError, EmuclusterError):
    """`simulate`: no rank can make progress but some have not returned (an algorithm bug)."""


class _SimRequest:
    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = False
        self.result: bytes | None = None


class LoopbackContext:
    """A `CollContext` of one simulated rank; sends are buffered and complete at once."""

    def __init__(self, rank: int, size: int, net: _SimNet) -> None:
        self.rank = rank
        self.size = size
        self._net = net

    def isend(self, payload: bytes | bytearray | memoryview, dest: int, tag: int) -> _SimRequest:
        _check(dest, tag, self.size)
        self._net.queues.setdefault((self.rank, dest, tag), deque()).append(bytes(payload))
        self._net.sent += 1
        request = _SimRequest()
        request.done = True
        return request

    def irecv(self, source: int, tag: int) -> _SimRequest:
        _check(source, tag, self.size)
        request = _SimRequest()
        self._net.recvs.setdefault((source, self.rank, tag), deque()).append(request)
        return request


class _SimNet:
    def __init__(self) -> None:
        self.queues: dict[tuple[int, int, int], deque[bytes]] = {}
        self.recvs: dict[tuple[int, int, int], deque[_SimRequest]] = {}
        self.sent = 0

    def deliver(self) -> bool:
        moved = False
        for key, recvs in self.recvs.items():
            queue = self.queues.get(key)
            while recvs and queue:
                request = recvs.popleft()
                request.result = queue.popleft()
                request.done = True
                moved = True
        return moved


def simulate(
    algorithm: Callable[..., CollGen[object]],
    size: int,
    args: Callable[[int], Sequence[object]] = lambda rank: (),
    *,
    max_rounds: int = 100_000,
) -> list[object]:
    """Run ``algorithm(ctx_r, *args(r))`` on ``size`` in-memory ranks; return every rank's result.

    Ranks are resumed round-robin whenever all requests they wait for are complete.
    Raises `SimDeadlockError` if no rank can move while some have not returned.
    """
    net = _SimNet()
    gens = [algorithm(LoopbackContext(r, size, net), *args(r)) for r in range(size)]
    waiting: list[list[CollRequest] | None] = [[] for _ in range(size)]
    results: list[object] = [None] * size
    started = [False] * size
    running = size
    for _ in range(max_rounds):
        progressed = net.deliver()
        for r, gen in enumerate(gens):
            pending = waiting[r]
            if pending is None or not all(req.done for req in pending):
                continue
            progressed = True
            try:
                waiting[r] = gen.send(None) if started[r] else next(gen)
                started[r] = True
            except StopIteration as stop:
                results[r] = stop.value
                waiting[r] = None
                running -= 1
        if not running:
            return results
        if not progressed:
            stuck = [r for r in range(size) if waiting[r] is not None]
            raise SimDeadlockError(f"ranks {stuck} wait forever")
    raise SimDeadlockError(f"no result after {max_rounds} rounds")


def _check(peer: int, tag: int, size: int) -> None:
    if not 0 <= peer < size:
        raise ValueError(f"peer rank {peer} outside 0..{size - 1}")
    if not 0 <= tag < TAG_LIMIT:
        raise ValueError(f"collective tag {tag} outside 0..{TAG_LIMIT - 1}")
