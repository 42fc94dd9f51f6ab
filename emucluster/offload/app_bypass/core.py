"""Application-bypass reduce (thesis ch. 3): one rank's descriptor queue, its own unexpected
queue, the combining logic, and the reduce algorithm the registry names ``app-bypass``.

`AppBypass` is the sans-IO state of one rank. Its inputs are the synchronous part of a
``Reduce`` call (Fig 3.3: `start`, `consume` per child, `leave`) and an application-bypass
packet handed over by the progress engine (Fig 3.5: `on_packet`); each returns
``list[Action]`` (`SendUp` a finished result to the parent, `SetSignals` on or off). The
MPI layer (``emucluster.offload.app_bypass.shell``) carries them out and is the `BypassService` the
algorithm `reduce_app_bypass` talks to.

Invariants:

* A descriptor is in the queue exactly while children of its instance are outstanding; the
  action that removes it is the `SendUp` of its result (sent once).
* A packet either matches an outstanding descriptor (it names the instance and comes from a
  pending child) and is combined straight from its buffer, or waits in the unexpected queue
  (one copy) until that instance's ``Reduce`` starts: never both, never lost. Instances are
  told apart by (collective context id, wire tag), so late messages of many outstanding
  reductions each find their own.
* Children are combined nearest first after this rank's contribution; an operation that does
  not commute holds a child that arrives early (one copy) until its predecessors are in, so
  rank order is kept.
* Signals: off while a synchronous part runs (`start`), on when one leaves with descriptors
  outstanding (`leave`), off when an asynchronous completion empties the queue (`on_packet`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from emucluster.coll.binomial import reduce_binomial
from emucluster.coll.payload import received
from emucluster.coll.tags import Tag
from emucluster.coll.trees import binomial_children, binomial_parent
from emucluster.offload.services import services_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.coll.context import CollContext, CollGen, CollRequest, Combine

__all__ = [
    "COUNTERS",
    "Action",
    "AppBypass",
    "BypassService",
    "Descriptor",
    "InstanceKey",
    "SendUp",
    "SetSignals",
    "reduce_app_bypass",
]

COUNTERS = (
    "sync_started",  # synchronous parts at internal nodes (Fig 3.3)
    "sync_completed",  # ... that finished inside Reduce
    "async_completed",  # instances finished by the asynchronous part after Reduce returned
    "expected",  # packets matched to a descriptor while its Reduce was running
    "late",  # packets matched to a descriptor after its Reduce had returned
    "early",  # packets for an instance not started yet: into the unexpected queue
    "from_unexpected",  # early packets combined by the synchronous part
    "copies",  # payloads kept beyond their packet buffer (early, or held for order)
    "sends_up",  # results sent to the parent
)


class InstanceKey(NamedTuple):
    """One reduction instance: the collective context id and the call's wire tag."""

    context: int
    tag: int


@dataclass(slots=True)
class Descriptor:
    """An outstanding reduction instance (thesis 3.4.1)."""

    key: InstanceKey
    value: bytes
    """The running result."""
    combine: Combine
    """The operation."""
    source: int
    """This rank, as the parent will see it."""
    parent: int
    parent_node: int
    parent_is_root: bool
    """The parent is the tree root: it receives by the default path (Fig 3.4)."""
    pending: list[int]
    """Children still outstanding, nearest first."""
    held: dict[int, bytes] = field(default_factory=dict)
    """Early children of an operation that does not commute, waiting for their turn."""
    in_reduce: bool = True
    """The synchronous part (inside Reduce) is still running."""


@dataclass(slots=True)
class SendUp:
    """Send ``payload`` (the finished result of ``key``) from rank ``source`` to the parent."""

    key: InstanceKey
    source: int
    parent: int
    parent_node: int
    parent_is_root: bool
    payload: bytes


@dataclass(slots=True)
class SetSignals:
    """Tell the NIC to enable (and acknowledge) or disable signals on the MPI port."""

    enabled: bool


Action = SendUp | SetSignals


class AppBypass:
    """Application-bypass reduce state of one rank."""

    def __init__(self) -> None:
        self.descriptors: dict[InstanceKey, Descriptor] = {}
        """The descriptor queue, oldest first."""
        self.unexpected: dict[tuple[InstanceKey, int], bytes] = {}
        """Early packets by (instance, child rank), oldest first."""
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.dropped: dict[str, int] = {}

    @property
    def outstanding(self) -> int:
        """Reductions waiting for children."""
        return len(self.descriptors)

    # -- synchronous part (Fig 3.3) ---------------------------------------------------------

    def start(self, key: InstanceKey, value: bytes, combine: Combine, *, source: int,
              parent: int, parent_node: int, parent_is_root: bool,
              children: list[int]) -> tuple[Descriptor, list[Action]]:  # fmt: skip
        """An internal node entered Reduce: disable signals, queue a descriptor."""
        if key in self.descriptors:
            raise ValueError(f"reduction instance {key} is already outstanding")
        desc = Descriptor(key, value, combine, source, parent, parent_node, parent_is_root,
                          list(children))  # fmt: skip
        self.descriptors[key] = desc
        self.counters["sync_started"] += 1
        return desc, [SetSignals(False)]

    def consume(self, desc: Descriptor, child: int) -> list[Action] | None:
        """ "Message received?" for ``child``: combine it from the unexpected queue if it is
        there (None if not)."""
        payload = self.unexpected.pop((desc.key, child), None)
        if payload is None:
            return None
        self.counters["from_unexpected"] += 1
        return self._accept(desc, child, payload)

    def leave(self, desc: Descriptor) -> list[Action]:
        """The synchronous part returns: signals on if anything is outstanding."""
        desc.in_reduce = False
        if desc.key not in self.descriptors:
            self.counters["sync_completed"] += 1
        return [SetSignals(True)] if self.descriptors else []

    # -- asynchronous part (Fig 3.5) --------------------------------------------------------

    def on_packet(self, key: InstanceKey, child: int, payload: bytes) -> list[Action]:
        """An application-bypass packet from rank ``child`` for instance ``key``."""
        desc = self.descriptors.get(key)
        if desc is not None and child in desc.pending and child not in desc.held:
            self.counters["expected" if desc.in_reduce else "late"] += 1
            actions = self._accept(desc, child, payload)
            if actions and not desc.in_reduce:
                self.counters["async_completed"] += 1
                if not self.descriptors:
                    actions.append(SetSignals(False))
            return actions
        if desc is not None or (key, child) in self.unexpected:
            self.dropped["duplicate"] = self.dropped.get("duplicate", 0) + 1
            return []
        self.unexpected[(key, child)] = payload
        self.counters["early"] += 1
        self.counters["copies"] += 1
        return []

    # -- queries ----------------------------------------------------------------------------

    def stats(self) -> dict[str, object]:
        """Counters and queue lengths, JSON-able."""
        return {
            **self.counters,
            "outstanding": len(self.descriptors),
            "unexpected_queued": len(self.unexpected),
            "dropped": dict(self.dropped),
        }

    # -- helpers ----------------------------------------------------------------------------

    def _accept(self, desc: Descriptor, child: int, payload: bytes) -> list[Action]:
        """Combine ``child``'s payload; the SendUp if that was the last child."""
        combine = desc.combine
        if combine.commute:
            desc.value = combine(desc.value, payload)
            desc.pending.remove(child)
        else:
            if child != desc.pending[0]:
                self.counters["copies"] += 1
            desc.held[child] = payload
            while desc.pending and desc.pending[0] in desc.held:
                desc.value = combine(desc.value, desc.held.pop(desc.pending.pop(0)))
        if desc.pending:
            return []
        del self.descriptors[desc.key]
        self.counters["sends_up"] += 1
        return [SendUp(desc.key, desc.source, desc.parent, desc.parent_node,
                       desc.parent_is_root, desc.value)]  # fmt: skip


class BypassService(Protocol):
    """What the algorithm needs from the MPI layer (``ctx.services.bypass``)."""

    @property
    def core(self) -> AppBypass:
        """This rank's state."""
        ...

    @property
    def eager_limit(self) -> int:
        """Largest payload sent eagerly; a uniform-size reduce above it falls back."""
        ...

    def instance(self, ctx: CollContext, tag: int) -> InstanceKey:
        """The instance key of this call for algorithm tag ``tag``."""
        ...

    def execute(self, actions: list[Action]) -> list[CollRequest]:
        """Carry out ``actions``; the sends still in progress (a rendezvous to the root)."""
        ...

    def progress(self) -> None:
        """Make what communication progress is possible now, without waiting."""
        ...

    def linger(self, done: Callable[[], bool]) -> None:
        """The optional delay before leaving Reduce (thesis 3.3.5): make progress until
        ``done()`` or the delay passed; no-op when the delay is 0 (the default)."""
        ...


def reduce_app_bypass(
    ctx: CollContext, data: bytes, combine: Combine, root: int
) -> CollGen[bytes | None]:
    """Application-bypass reduce: like `reduce_binomial`, but an internal node returns as
    soon as its synchronous part is done and its late children are combined by the
    asynchronous part. Root and leaves take the default path; a reduce of uniform size
    (buffers) above the eager limit, or a context without the service, falls back to
    `reduce_binomial`. Every message of an instance is an application-bypass packet."""
    services = services_of(ctx)
    service = None if services is None else services.bypass
    uniform = bool(getattr(combine, "uniform", False))
    if service is None or (uniform and len(data) > service.eager_limit):
        return (yield from reduce_binomial(ctx, data, combine, root))
    rank, size = ctx.rank, ctx.size
    tree_root = root if combine.commute else 0
    parent = binomial_parent(rank, tree_root, size)
    if parent is None:  # the root: the default, synchronous path
        return (yield from reduce_binomial(ctx, data, combine, root))
    key = service.instance(ctx, Tag.REDUCE)
    nodes: tuple[int, ...] = getattr(ctx, "nodes", tuple(range(size)))
    children = binomial_children(rank, tree_root, size)[::-1]
    core = service.core
    if not children:  # a leaf: just the send
        up = SendUp(key, rank, parent, nodes[parent], parent == tree_root, bytes(data))
        waiting = service.execute([up])
    else:
        desc, actions = core.start(key, bytes(data), combine, source=rank, parent=parent,
                                   parent_node=nodes[parent], parent_is_root=parent == tree_root,
                                   children=children)  # fmt: skip
        waiting = service.execute(actions)
        for child in children:
            if key not in core.descriptors:
                break
            found = core.consume(desc, child)
            if found is None:
                service.progress()  # expected children arrive through the async logic
            else:
                waiting += service.execute(found)
        if key in core.descriptors:
            service.linger(lambda: key not in core.descriptors)
        waiting += service.execute(core.leave(desc))
    if waiting:
        yield waiting
    if tree_root != root and rank == root:  # an operation that does not commute
        request = ctx.irecv(tree_root, Tag.REDUCE_FORWARD)
        yield [request]
        return received(request)
    return None
