"""When a freed communicator's context id is given back: once its pending operations ended.

MPI-4.0 §7.4.3 (MPI_COMM_FREE): the communicator is marked for deallocation; operations
still pending on it complete normally, and the object goes only when nothing refers to it any
more. Here what outlives the handle is the context id pair and the state offloads keep per
context at the NIC (``runtime.release_context``): giving the id back while an operation still
runs would let the next Dup or Split take it, so that the operation's receives match the new
communicator's messages, or its first nic-mcast bcast posts groups and an epoch under an id
another membership owns. `release_when_idle` therefore gives the id back at once if nothing is
pending, and otherwise leaves a `DeferredRelease` task to the progress engine, which gives it
back right after the last pending operation ended. Until then the id is not in this rank's
free mask, so no new communicator agrees on it.

Pending, on context pair (c, c + 1) of a communicator: a nonblocking collective's driver
(``CollDriver.context == c``) that has not finished; a receive posted on c or c + 1 and not
matched yet (an Irecv; a collective's own receive); an application-bypass reduction whose
children are still outstanding (its asynchronous part runs after Reduce returned). Sends
need no wait: once handed to the NIC their context id matters only at the receiver, whose
receive is its own pending operation. Requests the program never completes keep the id
(MPI: such a program is erroneous), as MPICH keeps it. The engine holds at most one task per
context pair not yet given back (``runtime.MAX_CONTEXT_PAIRS``); ``counters`` and the tasks
still waiting are in ``runtime.stats()["comm_free"]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.mpi.request.pending import CollDriver
from emucluster.offload.app_bypass import shell as appbypass

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.p2p.protocol import RecvOp
    from emucluster.port.progress import Progress

__all__ = ["DeferredRelease", "counters", "pending_on", "release_when_idle"]

counters: dict[str, int] = {"freed": 0, "deferred": 0}
"""This process's Frees and those whose release had to wait (``runtime.stats()``)."""


class DeferredRelease:
    """A progress-engine task: give ``context`` back with ``release`` once every check is
    true (each check: one pending operation ended). Checks that turned true are dropped, so
    the list only shrinks."""

    __slots__ = ("_pending", "_release", "context", "released")

    def __init__(self, context: int, pending: list[Callable[[], bool]],
                 release: Callable[[int], None]) -> None:  # fmt: skip
        self.context = context
        """The freed communicator's p2p context id."""
        self._pending = pending
        self._release = release
        self.released = False
        """Whether ``release`` ran."""

    def advance(self) -> bool:
        """Release the context if no operation is pending any more; True once released."""
        if self.released:
            return True
        self._pending = [done for done in self._pending if not done()]
        if self._pending:
            return False
        self.released = True
        self._release(self.context)
        return True

    def waiting(self) -> int:
        """Operations still pending."""
        return len(self._pending)


def pending_on(engine: Progress, context: int) -> list[Callable[[], bool]]:
    """One check per operation pending on context pair (``context``, ``context + 1``)."""
    checks: list[Callable[[], bool]] = [
        _finished(task) for task in engine.advancing
        if isinstance(task, CollDriver) and task.context == context and not task.finished
    ]  # fmt: skip
    checks += [_done(op) for op in engine.posted_receives((context, context + 1))]
    bypass = appbypass.active()
    if bypass is not None and bypass.engine is engine:
        descriptors = bypass.core.descriptors
        if any(key.context == context + 1 for key in descriptors):
            checks.append(lambda: all(key.context != context + 1 for key in descriptors))
    return checks


def release_when_idle(
    engine: Progress, context: int, release: Callable[[int], None]
) -> DeferredRelease:
    """Give ``context`` back with ``release`` now if nothing is pending on it, else as soon
    as the engine sees the last pending operation end; the task says which (``released``)."""
    counters["freed"] += 1
    task = DeferredRelease(context, pending_on(engine, context), release)
    if not task.advance():
        counters["deferred"] += 1
        engine.add(task)
    return task


def _finished(driver: CollDriver) -> Callable[[], bool]:
    return lambda: driver.finished


def _done(op: RecvOp) -> Callable[[], bool]:
    return lambda: op.done
