"""NIC-multicast broadcast (seed 001 §6): the bcast algorithm the registry names ``nic-mcast``.

The root hands an eager-size message to its NIC once; the NICs replicate it down a spanning
tree and forward it without their hosts (:mod:`nicd.mcast`); every other rank receives it as
an ordinary eager message of this call's collective context, so it matches as the bcast of
the right communicator and root, in call order, beside any point-to-point traffic.

Groups are demand-driven (§6): the first bcast from a root on a communicator posts that
root's groups to every member's NIC, one group per distinct tree (`GroupPlan`). Trees
(§5.4-§5.5, :mod:`emucluster.offload.nic_mcast.trees`) are postal-optimal for the message size,
from the end-to-end latency ``L`` and per-extra-destination cost ``g`` measured on the
running cluster by the first nic-mcast bcast of a communicator (`calibrate`: ranks 0 and 1
time ping-pongs of 0 B and 8 KiB messages for ``L``, rank 0 times handing a burst of such
sends to its NIC for ``g`` (a header pack, a copy and a syscall per destination: the work the
NIC's multisend repeats per destination), rank 0 broadcasts the two linear fits with the host
binomial algorithm, so every rank builds the same trees), or binomial. Since
receivers cannot know a pickled message's size, every tree of the root is posted everywhere
and the root picks one per message.

Group ids depend on the collective context id, which a communicator freed (``Comm.Free``)
gives back for reuse by another membership once its pending calls ended (an Ibcast still
agreeing its epoch included, ``emucluster.mpi.comm.free``): the shell then frees the
communicator's groups at its NIC (which finishes their resends in the background) and
forgets its plans and costs, and the groups of the next communicator on that id carry a new
*epoch*, agreed by its members at its first nic-mcast bcast (`agree_epoch`: one past the
largest epoch any member used on the id, by a host max-reduce and bcast), so a NIC never
takes the old tree's late packets or ACKs for the new one's. COMM_WORLD and COMM_SELF never
give their ids back: epoch 0, no agreement.

A message longer than the eager limit takes the host binomial algorithm instead (§6: MPICH-GM
keeps rendezvous for those); the root first multicasts an empty message marked `LARGE` so
receivers, who wait for the multicast, know to switch. The marker (`DATA` or `LARGE`)
travels in a user argument of the multicast, not in its payload (an 8 KiB message stays two
4 KiB packets); the receiving rank puts it in front of the bytes it hands to matching.

Invariants: every rank of the communicator runs the same sequence of tag uses for a call;
group ids depend only on (collective context, root node, tree index) and epochs only on the
agreement, so every member posts the same ids under the same epoch; a rank never multicasts
on a group it has not posted itself; two communicators that used one context id one after
the other never share an epoch on it at any member.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from emucluster.coll.binomial import bcast_binomial, reduce_binomial
from emucluster.coll.payload import received
from emucluster.coll.tags import Tag
from emucluster.offload.nic_mcast.trees import PostalCosts, Tree, binomial_tree
from emucluster.offload.services import services_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emucluster.coll.context import CollContext, CollGen

__all__ = [
    "CALIBRATION_SIZES",
    "DATA",
    "GROUP_BASE",
    "LARGE",
    "SIZE_CLASSES",
    "EpochMax",
    "GroupPlan",
    "McastService",
    "agree_epoch",
    "bcast_nic_mcast",
    "calibrate",
    "fit_costs",
    "group_id",
]

DATA = 0  # marker: the payload is the broadcast message
LARGE = 1  # marker: the message is above the eager limit; run the host binomial bcast
SIZE_CLASSES = (0, 256, 1024, 4096, 8192, 16_384)  # bytes: one tree per distinct tree shape
CALIBRATION_SIZES = (0, 8192)  # bytes: the two points of the linear cost fits
PINGS = 8  # ping-pongs per size (the first one warms the path up and is not timed)
BURST = 8  # messages per burst
GROUP_BASE = 0x8000  # MPI's group ids: 0x8000..0xFFFF (GM-level users keep the rest)
TREES_PER_ROOT = 8  # group ids kept per (context, root): an upper bound on distinct trees
_COSTS = struct.Struct(">4d")  # L0, L per byte, g0, g per byte (seconds)
_EPOCH = struct.Struct(">Q")  # an epoch proposal


class McastService(Protocol):
    """What the algorithm needs from the MPI layer (``ctx.services.mcast``)."""

    @property
    def eager_limit(self) -> int:
        """Largest message multicast; larger ones take the host algorithm."""
        ...

    @property
    def num_nodes(self) -> int:
        """One past COMM_WORLD's highest node, the same at every rank of the world (group ids
        are spread over them)."""
        ...

    @property
    def tree_kind(self) -> str:
        """``postal`` or ``binomial``."""
        ...

    def costs(self, ctx: CollContext) -> PostalCosts | None:
        """The communicator's measured (or configured) costs; None until calibrated."""
        ...

    def set_costs(self, ctx: CollContext, costs: PostalCosts) -> None:
        """Keep the communicator's calibration (every member calibrates together)."""
        ...

    def now(self) -> float:
        """A monotonic clock in seconds (calibration)."""
        ...

    def plan(self, ctx: CollContext, root: int) -> GroupPlan | None:
        """The groups of ``root`` on this communicator, if this rank has posted them."""
        ...

    def epoch(self, ctx: CollContext) -> int | None:
        """The epoch of the communicator's groups; None until its members agreed one."""
        ...

    def propose_epoch(self, ctx: CollContext) -> int:
        """The lowest epoch this rank accepts on the communicator's context id: one past
        the last it used there (0 if none)."""
        ...

    def set_epoch(self, ctx: CollContext, epoch: int) -> None:
        """Keep the epoch every member agreed for the communicator."""
        ...

    def post(self, ctx: CollContext, root: int, plan: GroupPlan) -> None:
        """Post this rank's part of every tree of ``plan`` (``root``'s groups) to the NIC."""
        ...

    def multicast(
        self, ctx: CollContext, root: int, group: int, marker: int, payload: bytes
    ) -> None:
        """At the root: multicast ``payload`` on ``group`` as this call's message, marked
        ``marker``; every other rank receives ``bytes((marker,)) + payload``."""
        ...

    def check(self, ctx: CollContext) -> None:
        """Raise if a member's NIC is known to be dead (a dead child is an error)."""
        ...


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """The multicast groups of one root on one communicator: distinct trees and their ids."""

    root_node: int
    epoch: int
    """Epoch every group of the plan is posted under (the communicator's)."""
    trees: tuple[Tree, ...]
    groups: tuple[int, ...]
    """Group id of each tree."""
    by_class: tuple[int, ...]
    """Index into ``trees`` for each entry of `SIZE_CLASSES`."""

    def group_for(self, size: int) -> int:
        """The group a ``size``-byte payload goes on (the smallest class that holds it)."""
        for cls, index in zip(SIZE_CLASSES, self.by_class, strict=True):
            if size <= cls:
                return self.groups[index]
        return self.groups[self.by_class[-1]]

    @classmethod
    def build(
        cls, nodes: Sequence[int], root: int, context: int, num_nodes: int,
        costs: PostalCosts | None, kind: str, epoch: int = 0,
    ) -> GroupPlan:  # fmt: skip
        """Every rank computes the same plan from the same inputs."""
        root_node = nodes[root]
        trees: list[Tree] = []
        by_class: list[int] = []
        for size in SIZE_CLASSES:
            if kind == "binomial" or costs is None:
                tree = binomial_tree(root_node, nodes)
            else:
                tree = costs.tree(root_node, nodes, size)
            if tree not in trees:
                trees.append(tree)
            by_class.append(trees.index(tree))
        groups = tuple(group_id(context, root_node, i, num_nodes) for i in range(len(trees)))
        return cls(root_node, epoch, tuple(trees), groups, tuple(by_class))


def group_id(context: int, root_node: int, index: int, num_nodes: int) -> int:
    """The group id of tree ``index`` of ``root_node`` on collective context ``context``
    (unique while fewer than 0x8000 / (TREES_PER_ROOT * num_nodes) communicators are used)."""
    if not 0 <= index < TREES_PER_ROOT:
        raise ValueError(f"tree index {index} outside 0..{TREES_PER_ROOT - 1}")
    slot = ((context >> 1) * max(1, num_nodes) + root_node) * TREES_PER_ROOT + index
    return GROUP_BASE | (slot & (GROUP_BASE - 1))


def fit_costs(latency: Sequence[float], gap: Sequence[float]) -> PostalCosts:
    """Linear fits through the two `CALIBRATION_SIZES` points (clamped: L > 0, g >= 0)."""
    (s0, s1), (l0, l1), (g0, g1) = CALIBRATION_SIZES, latency, gap
    span = s1 - s0
    l0 = max(l0, 1e-7)
    g0 = max(g0, 0.0)
    return PostalCosts(
        latency_s=l0,
        gap_s=g0,
        latency_per_byte_s=max(0.0, (l1 - l0) / span),
        gap_per_byte_s=max(0.0, (g1 - g0) / span),
    )


class EpochMax:
    """The reduction of `agree_epoch`: the larger of two proposals."""

    commute = True

    def __call__(self, left: bytes, right: bytes) -> bytes:
        return max(left, right, key=lambda b: _EPOCH.unpack(b)[0])


def agree_epoch(ctx: CollContext, service: McastService) -> CollGen[int]:
    """Every member returns the same epoch, one past the largest any member used on the
    communicator's context id (host binomial max-reduce to rank 0, then bcast)."""
    mine = _EPOCH.pack(service.propose_epoch(ctx))
    top = yield from reduce_binomial(ctx, mine, EpochMax(), 0)
    agreed = yield from bcast_binomial(ctx, top, 0)
    (epoch,) = _EPOCH.unpack(agreed)
    return int(epoch)


def calibrate(ctx: CollContext, service: McastService) -> CollGen[PostalCosts]:
    """Measure ``L`` and ``g`` on the running cluster (§5.5): ranks 0 and 1 ping-pong
    (one-way time = L); rank 0 times posting a burst of sends (time per send = g); both at
    the two calibration sizes; rank 0 broadcasts the fits. Every rank returns the same
    costs."""
    rank = ctx.rank
    packed: bytes | None = None
    if rank <= 1:
        peer = 1 - rank
        latency: list[float] = []
        gap: list[float] = []
        for size in CALIBRATION_SIZES:
            body = bytes(size)
            times = []
            for i in range(PINGS):
                start = service.now()
                if rank == 0:
                    yield [ctx.isend(body, peer, Tag.MCAST_CALIBRATE)]
                    yield [ctx.irecv(peer, Tag.MCAST_CALIBRATE)]
                else:
                    yield [ctx.irecv(peer, Tag.MCAST_CALIBRATE)]
                    yield [ctx.isend(body, peer, Tag.MCAST_CALIBRATE)]
                if i:
                    times.append(service.now() - start)
            one_way = sorted(times)[len(times) // 2] / 2
            if rank == 0:
                start = service.now()
                sends = [ctx.isend(body, peer, Tag.MCAST_CALIBRATE) for _ in range(BURST)]
                per_send = (service.now() - start) / BURST
                yield sends
                yield [ctx.irecv(peer, Tag.MCAST_CALIBRATE)]
            else:
                per_send = 0.0
                yield [ctx.irecv(peer, Tag.MCAST_CALIBRATE) for _ in range(BURST)]
                yield [ctx.isend(b"", peer, Tag.MCAST_CALIBRATE)]
            latency.append(one_way)
            gap.append(per_send)
        if rank == 0:
            costs = fit_costs(latency, gap)
            packed = _COSTS.pack(costs.latency_s, costs.latency_per_byte_s, costs.gap_s,
                                 costs.gap_per_byte_s)  # fmt: skip
    if ctx.size > 1:
        packed = yield from bcast_binomial(ctx, packed, 0)
    assert packed is not None
    l0, lb, g0, gb = _COSTS.unpack(packed)
    return PostalCosts(latency_s=l0, gap_s=g0, latency_per_byte_s=lb, gap_per_byte_s=gb)


def bcast_nic_mcast(ctx: CollContext, data: bytes | None, root: int) -> CollGen[bytes]:
    """Broadcast ``data`` from ``root`` by NIC multicast (eager sizes), else host binomial.
    Without the service (no NIC) or on one rank this is `bcast_binomial`."""
    services = services_of(ctx)
    service = None if services is None else services.mcast
    if service is None or ctx.size == 1:
        return (yield from bcast_binomial(ctx, data, root))
    service.check(ctx)
    plan = service.plan(ctx, root)
    if plan is None:  # the first bcast from this root here: post its groups (§6)
        costs = service.costs(ctx)
        if costs is None and service.tree_kind == "postal":
            costs = yield from calibrate(ctx, service)
            service.set_costs(ctx, costs)
        epoch = service.epoch(ctx)
        if epoch is None:  # the communicator's first: its id may have served another one
            epoch = yield from agree_epoch(ctx, service)
            service.set_epoch(ctx, epoch)
        context, _ = ctx.wire(Tag.MCAST)  # type: ignore[attr-defined]
        nodes: tuple[int, ...] = getattr(ctx, "nodes", tuple(range(ctx.size)))
        plan = GroupPlan.build(nodes, root, context, service.num_nodes, costs,
                               service.tree_kind, epoch)  # fmt: skip
        service.post(ctx, root, plan)
    if ctx.rank == root:
        if data is None:
            raise ValueError("bcast: the root must supply data")
        if len(data) > service.eager_limit:
            service.multicast(ctx, root, plan.group_for(0), LARGE, b"")
            return (yield from bcast_binomial(ctx, data, root))
        payload = bytes(data)
        service.multicast(ctx, root, plan.group_for(len(payload)), DATA, payload)
        return bytes(data)
    request = ctx.irecv(root, Tag.MCAST)
    yield [request]
    message = received(request)
    if not message or message[0] not in (DATA, LARGE):
        raise ValueError("bcast: a multicast message without its marker byte")
    if message[0] == LARGE:
        return (yield from bcast_binomial(ctx, None, root))
    return message[1:]
