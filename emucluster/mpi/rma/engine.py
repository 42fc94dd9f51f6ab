"""One rank's one-sided machinery: its GRIM endpoint, the operations in flight per window and
target, scratch blocks for fetched data, and the wait on two ports.

Windows live in registered memory of a GRIM endpoint on logical channel ``RMA_CHANNEL`` (one
per process, opened at the first window), so the target's NIC executes every Put, Get,
accumulate and atomic against that memory (RM-V, RM-RV, RM_ATOMIC) without its host. An
operation is complete at the origin when the NIC that executed it has said so; its
`RmaOp` then runs what the origin still owes (copying fetched bytes out of a scratch block
into the program's buffer). A wait for one-sided operations takes in both this endpoint's
port and MPI's (a Fence's barrier, a PSCW message), sleeping on both sockets when nothing is
there, so neither side starves the other.
"""

from __future__ import annotations

import atexit
import contextlib
import time
from typing import TYPE_CHECKING, Protocol

from emucluster.grim.endpoint import Endpoint
from emucluster.mpi.errors import ERR_OTHER, ERR_RMA_RANGE
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from emucluster.grim.port import Block, RMError
    from emucluster.mpi.runtime import Runtime

__all__ = ["RMA_CHANNEL", "WAIT_S", "Completion", "RmaEngine", "RmaOp", "engine_of"]

RMA_CHANNEL = 4
"""The GM port / GRIM logical channel of one-sided communication (MPI's is 2, GRIM's 3)."""
WAIT_S = 300.0
"""The longest a one-sided wait lasts before it is an error (a dead peer, never a hang)."""
_SLEEP_S = 0.05  # a sleep on both sockets is cut this short, then both are polled again
_MIN_SCRATCH = 256


class Completion(Protocol):
    """What an `RmaOp` waits for: a NIC request (`RmRequest`), or an MPI request in the
    host-driven mode (`emucluster.mpi.rma.hostdriven`)."""

    error: RMError | None

    def test(self) -> bool:
        """Whether it finished (making progress once)."""
        ...


class RmaOp:
    """One origin-side operation: the requests it waits for and what runs at the end."""

    __slots__ = ("after", "requests")

    def __init__(
        self, requests: Sequence[Completion], after: Callable[[], None] | None = None
    ) -> None:
        self.requests = requests
        self.after = after

    def done(self) -> bool:
        """Whether every request finished (polling the endpoint once)."""
        return all(r.test() for r in self.requests)

    def finish(self) -> None:
        """Run the end of a done operation; MPIException if the target NIC refused it."""
        errors = [r.error for r in self.requests if r.error is not None]
        after, self.after = self.after, None
        if after is not None:
            after()
        if errors:
            raise _mpi_error(errors[0])


class RmaEngine:
    """The one-sided side of one rank (see the module docstring)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        try:
            self.endpoint = Endpoint(RMA_CHANNEL)
        except Exception as exc:
            raise MPIException(ERR_OTHER, f"cannot open the one-sided port: {exc}") from exc
        self.rank = self.endpoint.rank
        self._pool: dict[int, list[Block]] = {}

    def close(self) -> None:
        """Close the endpoint (at exit)."""
        with contextlib.suppress(Exception):
            self.endpoint.close()

    # -- memory ------------------------------------------------------------------------------

    def alloc(self, nbytes: int) -> Block:
        """Registered memory the NIC reaches (a static translation when there is room)."""
        return self.endpoint.alloc(max(1, nbytes))

    def free(self, block: Block) -> None:
        """Give a window's block back."""
        self.endpoint.free(block)

    def scratch(self, nbytes: int) -> Block:
        """A registered block of at least ``nbytes`` for fetched data (reused)."""
        size = max(_MIN_SCRATCH, 1 << max(0, nbytes - 1).bit_length())
        free = self._pool.get(size)
        return free.pop() if free else self.endpoint.alloc(size)

    def give_back(self, block: Block) -> None:
        """Return a scratch block to the pool."""
        self._pool.setdefault(block.nbytes, []).append(block)

    # -- waiting -----------------------------------------------------------------------------

    def wait(self, ready: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
        """Make progress on both ports until ``ready()``; MPIException after ``timeout``."""
        if not self._progress_until(ready, time.monotonic() + timeout):
            raise MPIException(ERR_OTHER, f"{what}: not complete after {timeout:.0f} s")

    def pause(self, seconds: float) -> None:
        """Make progress on both ports for ``seconds`` (a lock attempt's back-off)."""
        self._progress_until(lambda: False, time.monotonic() + seconds)

    def _progress_until(self, ready: Callable[[], bool], deadline: float) -> bool:
        ep, mpi = self.endpoint, self.runtime.engine
        fds = [ep.port.fileno()]
        if not mpi.singleton:
            fds.append(mpi.port.fileno())
        waiter = ep.port.waiter
        while True:
            ep.poll()
            mpi.progress()
            if ready():
                return True
            now = time.monotonic()
            if now >= deadline:
                return False
            if waiter.policy != "spin":
                waiter.readable_any(fds, min(deadline, now + _SLEEP_S))

    def complete(self, ops: list[RmaOp], what: str) -> None:
        """Wait until every op in ``ops`` is done, finish them all, then raise the first
        error (if a target NIC refused one)."""
        if ops:
            self.wait(lambda: all(op.done() for op in ops), what)
        first: MPIException | None = None
        for op in ops:
            try:
                op.finish()
            except MPIException as exc:
                first = first or exc
        if first is not None:
            raise first


_engines: dict[int, RmaEngine] = {}


def engine_of(runtime: Runtime) -> RmaEngine:
    """The one-sided engine of ``runtime`` (opened on first use; NotImplementedError for a
    rank without a NIC, which has no NIC to execute one-sided operations)."""
    found = _engines.get(id(runtime))
    if found is None:
        if runtime.engine.singleton:
            raise NotImplementedError(
                "one-sided communication runs on the NIC: start the program with emurun"
            )
        found = _engines[id(runtime)] = RmaEngine(runtime)
        atexit.register(found.close)
    return found


def _mpi_error(error: RMError) -> MPIException:
    code = ERR_RMA_RANGE if error.status in ("out_of_range", "no_translation") else ERR_OTHER
    return MPIException(code, f"one-sided operation failed: {error}")
