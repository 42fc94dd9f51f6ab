"""The NICVM broadcast's shell in one rank: module upload, communicator maps, packet hook.

The `NicvmService` of ``emucluster.coll.nicvm_bcast``, installed on the first ``nicvm``
broadcast. The progress engine hands it every ``NICVM_DATA`` message (its hook); a message is
matched to its call by (communicator id, wire tag): the tag travels in user argument 0, the
communicator id in the NIC's communicator field. One that arrives before its call waits here
(one copy) until the call asks for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster import nicvm
from emucluster.coll.nicvm_bcast import MODULE_NAME
from emucluster.coll.tags import Tag
from nicd import hostlink as hl
from nicd.nicvm.modules import BCAST_BINARY_TREE
from nicd.wire import MsgType

if TYPE_CHECKING:
    from emucluster.mpi.collctx import CollContext
    from emucluster.port import RecvEvent
    from emucluster.progress import Progress

__all__ = ["NicvmBcast", "service"]

_service: NicvmBcast | None = None
Key = tuple[int, int]


def service() -> NicvmBcast | None:
    """The shell of this rank (None without a NIC)."""
    global _service
    from emucluster.mpi import runtime

    engine = runtime.engine()
    if engine.singleton:
        return None
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


class _Delegation:
    """A request completing when the root's NIC finished the module's sends."""

    __slots__ = ("_client", "_finished", "handle")
    result = None

    def __init__(self, client: nicvm.Nicvm, handle: int) -> None:
        self._client = client
        self.handle = handle
        self._finished = False

    @property
    def done(self) -> bool:
        if self._finished:
            return True
        client = self._client
        client._take()
        finished = client.done.pop(self.handle, None)
        if finished is None:
            return False
        self._finished = True
        if finished.outcome != "ok":
            raise nicvm.NicvmRunError(finished.outcome, finished.detail, finished.line)
        return True


class NicvmBcast:
    """The NICVM broadcast service of one rank."""

    def __init__(self, engine: Progress) -> None:
        self.engine = engine
        self.client = nicvm.client(engine.port)
        self.max_bytes = hl.NICVM_MAX_DELEGATE
        self._loaded = False
        self._arrived: dict[Key, bytes] = {}
        self._waiting: dict[Key, _Arrival] = {}
        self.counters = {"delegated": 0, "received": 0, "early": 0}
        engine.hooks[int(MsgType.NICVM_DATA)] = self.on_packet

    def prepare(self, ctx: CollContext) -> bool:
        comm, _ = _key(ctx)
        nodes = tuple(getattr(ctx, "nodes", range(ctx.size)))
        first = not self._loaded or self.client._comms.get(comm) != nodes
        if not self._loaded:
            self.client.load(MODULE_NAME, BCAST_BINARY_TREE)
            self._loaded = True
        self.client.set_comm(comm, nodes)
        return first

    def delegate(self, ctx: CollContext, root: int, body: bytes) -> _Delegation:
        comm, tag = _key(ctx)
        self.counters["delegated"] += 1
        handle = self.client.start_delegate(MODULE_NAME, body, root=root, comm=comm,
                                            args=(tag, 0, 0, 0))  # fmt: skip
        return _Delegation(self.client, handle)

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
