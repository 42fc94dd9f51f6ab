"""A virtual network of multicast engines: one tree, a virtual clock, netsim's seeded bad link.

Every SendPacket an engine returns is encoded with :func:`nicd.link.wire.encode` and handed to a
``route`` hook from :mod:`tests.unit.netsim` (``perfect`` or a seeded ``BadNetwork``), which
returns the copies to deliver and their delays. Arrivals are decoded with ``decode_untrusted``
as nicd does (a corrupted datagram is a counted BadPacket) and dispatched to ``on_data`` or
``on_ack``. Time only moves in :meth:`McastNet.step`, to the next arrival or the earliest
engine deadline; :meth:`McastNet.run` fails after ``max_events`` steps instead of hanging.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nicd.core.actions import Deliver, McastAction, McastChildDead, McastDone, SendPacket
from nicd.errors import BadPacket
from nicd.link.wire import ControlPacket, DataPacket, MsgType, decode_untrusted, encode
from nicd.mcast.config import McastConfig
from nicd.mcast.engine import GroupSpec, McastEngine
from tests.unit.netsim import Route, Transit, perfect

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.offload.nic_mcast.trees import Tree

__all__ = ["GROUP", "PORT", "McastNet", "fast_config", "specs"]

GROUP = 7
PORT = 3


def fast_config(**overrides: object) -> McastConfig:
    """Small, fast settings: 64-byte MTU so fragmentation is cheap, short timers."""
    fields: dict[str, object] = {
        "mtu": 64,
        "window": 8,
        "ack_every": 4,
        "ack_delay_s": 0.0002,
        "max_retries": 12,
        "rto_initial_s": 0.005,
        "rto_min_s": 0.001,
        "rto_max_s": 0.05,
        "max_message": 1 << 16,
    }
    fields.update(overrides)
    return McastConfig(**fields)  # type: ignore[arg-type]


fast_config.__test__ = False  # type: ignore[attr-defined]


def specs(
    tree: Tree, *, group: int = GROUP, port: int = PORT, epoch: int = 0
) -> dict[int, GroupSpec]:
    """Each member's GroupSpec for ``tree``."""
    return {
        node: GroupSpec(group, tree.root, tree.parent(node), tree.children(node), port, epoch)
        for node in tree.order
    }


@dataclass
class NodeLog:
    """What one engine reported."""

    delivered: list[Deliver] = field(default_factory=list)
    done: list[McastDone] = field(default_factory=list)
    dead: list[McastChildDead] = field(default_factory=list)


class McastNet:
    """The members of one multicast tree, each an McastEngine, on one virtual link."""

    def __init__(
        self,
        tree: Tree,
        *,
        config: McastConfig | None = None,
        route: Route = perfect,
    ) -> None:
        self.tree = tree
        self.config = config if config is not None else fast_config()
        self.route = route
        self.now = 0.0
        self.engines = {n: McastEngine(node_id=n, config=self.config) for n in tree.order}
        for node, spec in specs(tree).items():
            self.engines[node].create_group(spec)
        self.logs = {n: NodeLog() for n in tree.order}
        self.sent: list[tuple[float, int, DataPacket | ControlPacket]] = []
        """(time, from node, packet) of every packet put on the link."""
        self.bad: Counter[str] = Counter()
        self._wire: list[tuple[float, int, int, bytes]] = []
        self._order = itertools.count()

    # -- driving --------------------------------------------------------------------------------

    def multicast(self, payload: bytes, handle: int) -> None:
        """The root's host hands ``payload`` to its NIC now."""
        root = self.tree.root
        self.emit(root, self.engines[root].multicast(GROUP, payload, handle=handle, now=self.now))

    def emit(self, src: int, actions: list[McastAction]) -> None:
        """Carry out what node ``src`` returned."""
        log = self.logs[src]
        for action in actions:
            if isinstance(action, SendPacket):
                self.sent.append((self.now, src, action.packet))
                datagram = encode(action.packet)
                transit = Transit(src, action.node, action.packet, datagram, self.now)
                for delay, data in self.route(transit):
                    entry = (self.now + delay, next(self._order), action.node, data)
                    heapq.heappush(self._wire, entry)
            elif isinstance(action, Deliver):
                log.delivered.append(action)
            elif isinstance(action, McastDone):
                log.done.append(action)
            else:
                log.dead.append(action)

    def step(self) -> bool:
        """Advance to the next arrival or deadline and handle it; False when nothing is left."""
        deadlines = [d for e in self.engines.values() if (d := e.next_deadline()) is not None]
        next_timer = min(deadlines) if deadlines else None
        if self._wire and (next_timer is None or self._wire[0][0] <= next_timer):
            at, _, dst, data = heapq.heappop(self._wire)
            self.now = max(self.now, at)
            try:
                packet = decode_untrusted(data)
            except BadPacket as e:
                self.bad[e.reason] += 1
                return True
            engine = self.engines[dst]
            if isinstance(packet, DataPacket):
                self.emit(dst, engine.on_data(packet, now=self.now))
            elif packet.msg_type is MsgType.MCAST_ACK:
                self.emit(dst, engine.on_ack(packet, now=self.now))
            return True
        if next_timer is None:
            return False
        self.now = max(self.now, next_timer)
        for node, engine in self.engines.items():
            deadline = engine.next_deadline()
            if deadline is not None and deadline <= self.now:
                self.emit(node, engine.on_timer(now=self.now))
        return True

    def run(self, until: Callable[[], bool] | None = None, *, max_events: int = 200_000) -> None:
        """Step until ``until()`` holds (or nothing is left); fail after ``max_events``."""
        for _ in range(max_events):
            if until is not None and until():
                return
            if not self.step():
                return
        raise AssertionError(f"no quiescence after {max_events} events at t={self.now:.4f}")

    # -- queries --------------------------------------------------------------------------------

    def payloads(self, node: int) -> list[bytes]:
        """What ``node``'s host got, in order."""
        return [d.payload for d in self.logs[node].delivered]

    def data_to(self, node: int) -> list[DataPacket]:
        """Every data packet put on the link towards ``node``."""
        return [p for _, _, p in self.sent if isinstance(p, DataPacket) and p.dst_node == node]
