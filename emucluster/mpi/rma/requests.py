"""The requests of ``Rput``, ``Rget``, ``Raccumulate`` and ``Rget_accumulate``: an
``MPI.Request`` over one `RmaOp`, waited for on both ports by the window's `RmaEngine`.

The operation stays in the window's pending list too, so a Flush or Unlock completes it as
well; finishing it twice is harmless (its end runs once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from emucluster.mpi.constants import ANY_TAG, PROC_NULL
from emucluster.mpi.request.pending import Completed
from emucluster.mpi.request.request import Request

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.request.status import Status
    from emucluster.mpi.rma.engine import RmaEngine, RmaOp
    from emucluster.mpi.rma.state import WinState
    from emucluster.port.progress import Progress

__all__ = ["RmaPending", "rma_request"]


class RmaPending:
    """What an RMA request waits for (a `Pending`)."""

    __slots__ = ("op",)

    def __init__(self, op: RmaOp) -> None:
        self.op = op

    def done(self) -> bool:
        return self.op.done()

    def finish(self, status: Status | None) -> object:
        if status is not None:
            status.set(PROC_NULL, ANY_TAG, 0)
        self.op.finish()
        return None

    def cancel(self) -> None:
        return None


class _BothPorts:
    """What `Request` calls its engine, for an RMA request: waits that take in the
    one-sided port and MPI's (see `RmaEngine.wait`)."""

    __slots__ = ("engine",)

    def __init__(self, engine: RmaEngine) -> None:
        self.engine = engine

    def wait_for(self, ready: Callable[[], bool], timeout: float | None = None) -> bool:
        self.engine.wait(ready, "RMA request")
        return True

    def progress(self) -> None:
        self.engine.endpoint.poll()
        self.engine.runtime.engine.progress()


def rma_request(st: WinState, op: RmaOp | None) -> Request:
    """A request for ``op`` (complete at once for a PROC_NULL target: None)."""
    if op is None:
        return Request._of(Completed(None, PROC_NULL), None)
    return Request._of(RmaPending(op), cast("Progress", _BothPorts(st.engine)))
