"""Spanning trees for NIC multicast (seed 001 §5.4-§5.5): binomial, flat and postal-optimal.

The host builds the tree and posts each node's (parent, children) to its NIC (DESIGN §7).
Every builder works on *positions*: position 0 is the root, positions 1.. are the other members
sorted by node id (§5.4). A parent always has a smaller position than its children, so a child's
node id is larger than its parent's unless the parent is the root: receive-token cycles between
concurrent multicasts cannot form (the §5.4 case study).

A node's children are listed in the order its NIC sends to them. Under the postal model of
Bar-Noy and Kipnis (seed 001 ref. [1]) with end-to-end latency ``L`` and per-extra-destination
send cost ``g``, the k-th child (from 0) of a node that has the message at ``t`` has it at
``t + L + k*g``; :func:`completion_time` is the time the last member has it.

Invariants: every tree spans its members; each non-root member has exactly one parent; parent
position < child position; :func:`postal_tree` is the greedy "every informed node keeps
sending" tree, which minimises the completion time under the postal model (checked against
brute force in the tests), and its fan-out grows with ``L/g`` (a flat tree once
``L >= (n-2)*g``, a binomial one when ``L == g``). Pure: no I/O.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import TYPE_CHECKING

from emucluster.coll.trees import binomial_children

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "PostalCosts",
    "Tree",
    "binomial_tree",
    "completion_time",
    "flat_tree",
    "member_order",
    "postal_fanout",
    "postal_tree",
    "receive_times",
]


@dataclass(frozen=True, slots=True)
class Tree:
    """A multicast spanning tree over node ids."""

    root: int
    """The node the multicast starts at."""
    order: tuple[int, ...]
    """All members: the root first, then the others by increasing node id."""
    parents: tuple[int | None, ...]
    """``parents[i]`` is the parent node of ``order[i]`` (None for the root)."""
    kids: tuple[tuple[int, ...], ...]
    """``kids[i]`` are the children of ``order[i]``, in the order its NIC sends to them."""

    def _index(self, node: int) -> int:
        try:
            return self.order.index(node)
        except ValueError:
            raise ValueError(f"node {node} is not a member of this tree") from None

    def parent(self, node: int) -> int | None:
        """The node ``node`` receives from (None at the root)."""
        return self.parents[self._index(node)]

    def children(self, node: int) -> tuple[int, ...]:
        """The nodes ``node`` sends to, in sending order."""
        return self.kids[self._index(node)]

    @property
    def members(self) -> frozenset[int]:
        """Every node of the tree."""
        return frozenset(self.order)

    def depth(self) -> int:
        """Hops from the root to the deepest member."""
        depth = [0] * len(self.order)
        for i in range(1, len(self.order)):
            parent = self.parents[i]
            assert parent is not None
            depth[i] = depth[self.order.index(parent)] + 1
        return max(depth)


@dataclass(frozen=True, slots=True)
class PostalCosts:
    """The two postal-model costs as linear functions of the message size, measured on the
    running cluster at start-up (§5.5: "different message lengths lead to different trees")."""

    latency_s: float
    """End-to-end latency of a 0-byte message, send to receipt."""
    gap_s: float
    """Cost of sending a 0-byte message to one more destination."""
    latency_per_byte_s: float = 0.0
    """Extra end-to-end latency per byte."""
    gap_per_byte_s: float = 0.0
    """Extra per-destination send cost per byte."""

    def at(self, size: int) -> tuple[float, float]:
        """``(L, g)`` for a message of ``size`` bytes."""
        return (
            self.latency_s + self.latency_per_byte_s * size,
            self.gap_s + self.gap_per_byte_s * size,
        )

    def tree(self, root: int, members: Iterable[int], size: int) -> Tree:
        """The postal-optimal tree for a ``size``-byte multicast."""
        latency, gap = self.at(size)
        return postal_tree(root, members, latency, gap)


def member_order(root: int, members: Iterable[int]) -> tuple[int, ...]:
    """The root, then every other member by increasing node id (duplicates ignored)."""
    others = set(members)
    if root not in others:
        raise ValueError(f"root {root} is not among the members")
    others.discard(root)
    if any(node < 0 for node in others) or root < 0:
        raise ValueError("node ids must be >= 0")
    return (root, *sorted(others))


def binomial_tree(root: int, members: Iterable[int]) -> Tree:
    """MPICH's binomial tree over the sorted members (farthest child sent to first)."""
    order = member_order(root, members)
    n = len(order)
    parents: list[int | None] = [None] * n
    kids: list[tuple[int, ...]] = []
    for v in range(n):
        children = binomial_children(v, 0, n)
        kids.append(tuple(order[c] for c in children))
        for c in children:
            parents[c] = order[v]
    return Tree(root, order, tuple(parents), tuple(kids))


def flat_tree(root: int, members: Iterable[int]) -> Tree:
    """The root sends to every other member itself (a plain multisend, §3.1)."""
    order = member_order(root, members)
    n = len(order)
    parents: tuple[int | None, ...] = (None,) + (root,) * (n - 1)
    kids = (order[1:],) + ((),) * (n - 1)
    return Tree(root, order, parents, kids)


def postal_tree(root: int, members: Iterable[int], latency: float, gap: float) -> Tree:
    """The latency-optimal tree under the postal model (§5.5, Bar-Noy/Kipnis).

    Greedy: the next member (in sorted order) is given to the sender whose next send would
    arrive earliest. A node that got the message at ``t`` offers arrivals ``t + L``,
    ``t + L + g``, ...; members are assigned in order of arrival, so a parent's position is
    below its children's. ``latency`` must be > 0, ``gap`` >= 0 (any time unit)."""
    if not latency > 0:
        raise ValueError(f"latency must be > 0, not {latency}")
    if not gap >= 0:
        raise ValueError(f"gap must be >= 0, not {gap}")
    order = member_order(root, members)
    n = len(order)
    parents: list[int | None] = [None] * n
    kids: list[list[int]] = [[] for _ in range(n)]
    slots: list[tuple[float, int]] = [(latency, 0)]  # (arrival of next send, sender position)
    for pos in range(1, n):
        arrival, sender = heapq.heappop(slots)
        parents[pos] = order[sender]
        kids[sender].append(order[pos])
        heapq.heappush(slots, (arrival + gap, sender))
        heapq.heappush(slots, (arrival + latency, pos))
    return Tree(root, order, tuple(parents), tuple(tuple(k) for k in kids))


def postal_fanout(latency: float, gap: float) -> int:
    """How many destinations a sender reaches before its first child can start sending
    (§5.5: the ratio of end-to-end latency to per-destination cost): sends whose arrival
    ``L + k*g`` is no later than the first child's first arrival ``2L``."""
    if not latency > 0 or not gap >= 0:
        raise ValueError("need latency > 0 and gap >= 0")
    if gap == 0:
        raise ValueError("gap 0: unbounded fan-out")
    return int(latency // gap) + 1


def receive_times(tree: Tree, latency: float, gap: float) -> dict[int, float]:
    """When each member has the message under the postal model (the root at 0)."""
    times = {tree.root: 0.0}
    for i, node in enumerate(tree.order):  # parents precede children in ``order``
        start = times[node] + latency
        for k, child in enumerate(tree.kids[i]):
            times[child] = start + k * gap
    return times


def completion_time(tree: Tree, latency: float, gap: float) -> float:
    """When the last member has the message under the postal model."""
    return max(receive_times(tree, latency, gap).values())
