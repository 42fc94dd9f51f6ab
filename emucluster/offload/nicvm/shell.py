"""The NICVM broadcast's shell in one rank: module upload, communicator maps, packet hook.

The `NicvmService` of ``emucluster.offload.nicvm.bcast``, installed on the first ``nicvm``
broadcast. The progress engine hands it every ``NICVM_DATA`` message (its hook); a message is
matched to its call by (communicator id, wire tag): the tag travels in user argument 0, the
communicator id in the NIC's communicator field. One that arrives before its call waits here
(one copy) until the call asks for it.

A communicator's first call (``prepare``) is decided by what this rank did on that
communicator, never by the map last posted for its id: a freed communicator's id serves
another membership next (`release`, from ``emucluster.mpi.runtime.release_context``), and
every member must agree that the call is the first, which synchronises.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from emucluster import nicvm
from emucluster.coll.tags import Tag
from emucluster.offload.nicvm.bcast import MODULE_NAME
from nicd import contract as hl
from nicd.contract import BCAST_BINARY_TREE, MsgType

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext
    from emucluster.port.client import RecvEvent
    from emucluster.port.progress import Progress

__all__ = ["MAX_OUTSTANDING", "NicvmBcast", "install", "release", "shutdown"]

MAX_OUTSTANDING = 64  # root delegations left unanswered before the root waits
TIMEOUT_S = 30.0

_service: NicvmBcast | None = None
Key = tuple[int, int]


def shutdown(timeout: float = TIMEOUT_S) -> None:
    """Finalize: the NIC finished every broadcast this rank delegated."""
    if _service is not None:
        _service.close(timeout)


def release(context: int) -> None:
    """Collective context ``context`` was given back (its communicator was freed)."""
    if _service is not None:
        _service.release(context)


def install(engine: Progress) -> NicvmBcast:
    """The shell for ``engine`` (installed on first call)."""
    global _service
    if _service is None or _service.engine is not engine:
        _service = NicvmBcast(engine)
    return _service


class _Arrival:
    """A request completing when this call's message arrives from the NIC."""

    __slots__ = ("result",)

    def __init__(self) -> None:
        self.result: bytes | None = None

    @property
    def done(self) -> bool:
        return self.result is not None


class _Done:
    """An already complete request (the root's delegation: the NIC owns the message now)."""

    __slots__ = ()
    done = True
    result = None


class NicvmBcast:
    """The NICVM broadcast service of one rank."""

    def __init__(self, engine: Progress) -> None:
        self.engine = engine
        self.client = nicvm.client(engine.port)
        self.max_bytes = hl.NICVM_MAX_DELEGATE
        self._loaded = False
        self._pending: deque[int] = deque()  # delegations the NIC has not answered yet
        self._arrived: dict[Key, bytes] = {}
        self._waiting: dict[Key, _Arrival] = {}
        self._prepared: set[int] = set()  # communicators (ids) of live communicators set up
        self.counters = {"delegated": 0, "received": 0, "early": 0}
        engine.hooks[int(MsgType.NICVM_DATA)] = self.on_packet

    def prepare(self, ctx: CollContext) -> bool:
        """Upload the module and post the communicator's map on its first call (True)."""
        comm, _ = _key(ctx)
        nodes = tuple(getattr(ctx, "nodes", range(ctx.size)))
        first = comm not in self._prepared
        self._prepared.add(comm)
        if not self._loaded:
            self.client.load(MODULE_NAME, BCAST_BINARY_TREE)
            self._loaded = True
        self.client.set_comm(comm, nodes)
        return first

    def release(self, context: int) -> None:
        """The communicator of collective context ``context`` was freed: its next user
        starts with a first call again."""
        self._prepared.discard(context & 0xFFFF)

    def delegate(self, ctx: CollContext, root: int, body: bytes) -> _Done:
        """The root hands the message to its NIC and returns at once, as the thesis's root
        does; the NIC's answers are collected later (here, at the next call, at Finalize),
        and a failure raises then. At most ``MAX_OUTSTANDING`` are left unanswered."""
        comm, tag = _key(ctx)
        self.counters["delegated"] += 1
        self.collect()
        while len(self._pending) >= MAX_OUTSTANDING:
            self._finish(self._pending.popleft(), TIMEOUT_S)
        handle = self.client.start_delegate(MODULE_NAME, body, root=root, comm=comm,
                                            args=(tag, 0, 0, 0))  # fmt: skip
        self._pending.append(handle)
        return _Done()

    def collect(self) -> None:
        """Take in the NIC's answers to delegations; raise NicvmRunError for a failed one."""
        client = self.client  # its port's drains fill client.done
        while self._pending and self._pending[0] in client.done:
            self._finish(self._pending.popleft(), 0.0)

    def _finish(self, handle: int, timeout: float) -> None:
        self.client.wait_done(handle, timeout=timeout)

    def close(self, timeout: float) -> None:
        """Finalize: wait until the NIC finished every delegated broadcast (closing the port
        earlier would fail the module's sends still in flight)."""
        deadline = time.monotonic() + timeout
        while self._pending:
            self._finish(self._pending.popleft(), max(0.0, deadline - time.monotonic()))

    def expect(self, ctx: CollContext) -> _Arrival:
        key = _key(ctx)
        request = _Arrival()
        body = self._arrived.pop(key, None)
        if body is None:
            self._waiting[key] = request
        else:
            request.result = body
        return request

    def on_packet(self, event: RecvEvent) -> None:
        """Progress-engine hook: a NICVM message for this rank."""
        key = (event.mcast_group, event.args[0])
        self.counters["received"] += 1
        request = self._waiting.pop(key, None)
        if request is None:
            self.counters["early"] += 1
            self._arrived[key] = event.payload
        else:
            request.result = event.payload


def _key(ctx: CollContext) -> Key:
    wire = getattr(ctx, "wire", None)
    context, tag = wire(Tag.BCAST) if wire is not None else (0, int(Tag.BCAST))
    return context & 0xFFFF, tag & 0xFFFFFFFF
