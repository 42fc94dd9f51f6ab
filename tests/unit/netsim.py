"""A virtual network for transport and NIC tests: N Transports (:class:`Net`) or N NicCores
(:class:`NicNet`), a virtual clock, a seeded bad link.

Every SendPacket a transport returns is encoded with :func:`nicd.link.wire.encode` and handed to a
``route`` hook, which decides its fate: a list of copies, each ``(delay_s, datagram)``; an
empty list drops it. :class:`BadNetwork` is the seeded weighted-random hook (loss, duplication,
reordering, corruption by a flipped bit that the receiver's CRC must catch); tests may pass
any callable instead to script a loss exactly. Datagrams are decoded at arrival with
``decode_untrusted`` exactly as nicd does, so a corrupted one is a counted ``BadPacket``.

Time only moves in :meth:`Net.step`: to the next arrival or the earliest transport deadline,
whichever is first; after a burst of arrivals each receiving node is flushed, as the shell
does. :meth:`Net.run` fails after ``max_events`` steps instead of looping forever.

:class:`NicNet` runs whole NICs the same way: every ``Transmit`` goes through the same ``route``
hook, every ``ToHost`` record lands in that node's ``hosts`` list (and may be answered by an
``answer`` hook, as a host answers GRIM's translation upcalls), ``RaiseSignal`` s are kept in
``signals``; its :meth:`NicNet.run` fails too when the network does not settle.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from nicd import hostlink as hl
from nicd.config import NicConfig, TransportConfig
from nicd.core.actions import (
    Deliver,
    NicAction,
    PeerDead,
    RaiseSignal,
    SendComplete,
    SendFailed,
    SendPacket,
    ToHost,
    Transmit,
    TransportAction,
)
from nicd.core.nic import NicCore
from nicd.errors import BadPacket
from nicd.gm.ports import PortState, PortTable
from nicd.link.channels import Admission, Transport
from nicd.link.wire import ControlPacket, DataPacket, MsgType, decode_untrusted, encode

if TYPE_CHECKING:
    from collections.abc import Sequence

    from nicd.link.reliable import Verdict

__all__ = [
    "LINK_DELAY_S",
    "BadNetwork",
    "Net",
    "NicNet",
    "Node",
    "Ports",
    "Transit",
    "perfect",
    "sent_handles",
    "test_config",
]

LINK_DELAY_S = 50e-6  # one-way delay of the virtual link
REORDER_MAX_S = 0.002  # a reordered datagram is held back up to this much longer

Packet = DataPacket | ControlPacket


def sent_handles(records: Iterable[hl.HostRecord]) -> list[int]:
    """The send handles a host was told are complete, in order (SENT and SENT_BATCH)."""
    handles: list[int] = []
    for r in records:
        if isinstance(r, hl.SentEvent):
            handles.append(r.handle)
        elif isinstance(r, hl.SentBatch):
            handles += r.handles
    return handles


def test_config(**overrides: object) -> TransportConfig:
    """Small, fast settings: 64-byte MTU so fragmentation is cheap, short timers."""
    fields: dict[str, object] = {
        "mtu": 64,
        "window": 8,
        "ack_every": 4,
        "ack_delay_s": 0.0,
        "min_window": 2,
        "rto_initial_s": 0.005,
        "rto_min_s": 0.001,
        "rto_max_s": 0.2,
        "no_buffer_retry_s": 0.004,
        "dead_peer_timeout_s": 30.0,
        "dead_peer_probes": 20,
        "max_message": 1 << 16,
    }
    fields.update(overrides)
    return TransportConfig(**fields)  # type: ignore[arg-type]


test_config.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


@dataclass(frozen=True, slots=True)
class Transit:
    """One datagram entering the link."""

    src: int
    dst: int
    packet: Packet
    datagram: bytes
    now: float


Route = Callable[[Transit], list[tuple[float, bytes]]]


def perfect(t: Transit) -> list[tuple[float, bytes]]:
    """Deliver every datagram once, after the link delay."""
    return [(LINK_DELAY_S, t.datagram)]


class BadNetwork:
    """Seeded weighted-random fates: drop, duplicate, reorder, corrupt; optionally cut nodes
    off from some moment on. Prints its seed so a failure can be replayed."""

    def __init__(
        self,
        seed: int,
        *,
        loss: float = 0.0,
        dup: float = 0.0,
        reorder: float = 0.0,
        corrupt: float = 0.0,
    ) -> None:
        print(f"netsim BadNetwork seed={seed} loss={loss} dup={dup} reorder={reorder} "
              f"corrupt={corrupt}")  # fmt: skip
        self.rng = random.Random(seed)
        self.loss = loss
        self.dup = dup
        self.reorder = reorder
        self.corrupt = corrupt
        self.cut: dict[int, float] = {}
        """node -> time from which nothing reaches it or leaves it."""
        self.counts: Counter[str] = Counter()

    def cut_off(self, node: int, *, at: float) -> None:
        """Make ``node`` unreachable from time ``at`` on (both directions)."""
        self.cut[node] = at

    def __call__(self, t: Transit) -> list[tuple[float, bytes]]:
        rng = self.rng
        for node in (t.src, t.dst):
            if node in self.cut and t.now >= self.cut[node]:
                self.counts["cut"] += 1
                return []
        if rng.random() < self.loss:
            self.counts["lost"] += 1
            return []
        copies = 1
        if rng.random() < self.dup:
            self.counts["duplicated"] += 1
            copies = 2
        out: list[tuple[float, bytes]] = []
        for _ in range(copies):
            data = t.datagram
            if rng.random() < self.corrupt:
                self.counts["corrupted"] += 1
                bit = rng.randrange(len(data) * 8)
                flipped = bytearray(data)
                flipped[bit // 8] ^= 1 << (bit % 8)
                data = bytes(flipped)
            delay = LINK_DELAY_S
            if rng.random() < self.reorder:
                self.counts["reordered"] += 1
                delay += rng.uniform(0, REORDER_MAX_S)
            out.append((delay, data))
        return out


UNLIMITED = 2**62
"""Receive tokens no test uses up: an int, as `PortState` holds (compiled, it refuses a float)."""


class Ports:
    """A node's GM ports as the transport sees them, admitted through production's
    :class:`nicd.gm.PortTable` (audit test 19): a port that was never opened answers
    NO_BUFFER (its host is still starting) for as long as that lasts, one that was open and
    closed answers NO_PORT, an open one without receive tokens NO_BUFFER."""

    def __init__(self, max_ports: int = 64) -> None:
        self.table = PortTable(max_ports=max_ports, send_tokens=1)
        self.tokens = _Tokens(self.table)
        """Receive tokens by open port (read and set; `UNLIMITED` is more than any test uses)."""
        self.admitted: list[tuple[int, int, int, int]] = []
        self.refused: list[tuple[int, Admission]] = []

    def open(self, port: int, tokens: int = UNLIMITED) -> None:
        """Open ``port`` with ``tokens`` receive tokens (an open one just gets the tokens)."""
        if self.table.get(port) is None:
            self.table.open(_conn_of(port), port)
        self.tokens[port] = tokens

    def close(self, port: int) -> None:
        self.table.close_conn(_conn_of(port))

    def verdict(self, first: DataPacket) -> Verdict:
        """The transport's admission hook: :meth:`admit`, raising nothing."""
        return self.admit(first), []

    def admit(self, first: DataPacket) -> Admission:
        verdict = self.table.admit(first)
        if verdict is Admission.OK:
            self.admitted.append((first.dst_port, first.src_node, first.src_port, first.msg_len))
        else:
            self.refused.append((first.dst_port, verdict))
        return verdict


def _conn_of(port: int) -> int:
    return port + 1  # one host connection per port


class _Tokens:
    """``ports.tokens[port]``: the receive tokens of an open port in the PortTable."""

    def __init__(self, table: PortTable) -> None:
        self._table = table

    def _state(self, port: int) -> PortState:
        state = self._table.get(port)
        if state is None:
            raise KeyError(port)
        return state

    def __getitem__(self, port: int) -> int:
        return self._state(port).receive_tokens

    def __setitem__(self, port: int, tokens: int) -> None:
        self._state(port).receive_tokens = tokens

    def get(self, port: int) -> int | None:
        state = self._table.get(port)
        return None if state is None else state.receive_tokens


@dataclass
class Node:
    """One transport and everything it reported."""

    transport: Transport
    ports: Ports
    delivered: list[Deliver] = field(default_factory=list)
    completed: list[SendComplete] = field(default_factory=list)
    failed: list[SendFailed] = field(default_factory=list)
    dead: list[PeerDead] = field(default_factory=list)


class Net:
    """N transports on one virtual link."""

    def __init__(
        self,
        n: int,
        config: TransportConfig | None = None,
        route: Route = perfect,
        *,
        open_ports: tuple[int, ...] = (0, 1),
        as_nic: bool = False,
    ) -> None:
        self.config = config or test_config()
        self.as_nic = as_nic
        self.open_ports = open_ports
        """Encode stream packets as NicCore does (`Transport.datagram`: piggy-backed ACKs,
        ESTABLISHED); else each packet as it is."""
        self.route = route
        self.now = 0.0
        self.nodes: list[Node] = []
        for node_id in range(n):
            ports = Ports()
            for port in open_ports:
                ports.open(port)
            self.nodes.append(Node(Transport(node_id, self.config, ports.verdict), ports))
        self._wire: list[tuple[float, int, int, bytes]] = []  # (arrival, order, dst, datagram)
        self._order = itertools.count()
        self._handles = itertools.count(1)
        self.log: list[tuple[float, int, Packet]] = []
        """Every packet put on the link: (time, source node, packet)."""
        self.bad: Counter[str] = Counter()
        """Datagrams the receiving side refused to decode, by BadPacket reason."""
        self.events = 0
        self.stalled: dict[int, float] = {}
        """node -> when its stall ends: until then it takes no input (arrivals wait)."""
        self._backlog: dict[int, list[bytes]] = {}

    def restart(self, node_id: int, *, epoch_seed: int) -> None:
        """Replace ``node_id``'s transport by a fresh one (a restarted nicd, same node id):
        its ports open again, nothing of its streams kept."""
        ports = Ports()
        for port in self.open_ports:
            ports.open(port)
        config = replace(self.config, epoch_seed=epoch_seed)
        self.nodes[node_id] = Node(Transport(node_id, config, ports.verdict), ports)

    def stall(self, node_id: int, seconds: float) -> None:
        """Stop ``node_id``'s loop for ``seconds`` (a stalled process): no timers run there
        and its arrivals queue up. When it resumes, its due timers run first, then the
        queued datagrams arrive (what an event loop does after a long pause)."""
        self.stalled[node_id] = self.now + seconds
        self._backlog.setdefault(node_id, [])

    # -- driving ----------------------------------------------------------------------------

    def send(
        self,
        src: int,
        dst: int,
        payload: bytes,
        *,
        src_port: int = 0,
        dst_port: int = 0,
        msg_type: MsgType = MsgType.GM_DATA,
    ) -> int:
        """Host request on node ``src``; returns the handle used."""
        handle = next(self._handles)
        actions = self.nodes[src].transport.send(
            now=self.now, src_port=src_port, dst_node=dst, dst_port=dst_port,
            msg_type=msg_type, payload=payload, handle=handle,
        )  # fmt: skip
        self.apply(src, actions)
        return handle

    def apply(self, node_id: int, actions: Iterable[TransportAction]) -> None:
        """Carry out a transport's actions: packets onto the link, the rest recorded."""
        node = self.nodes[node_id]
        for action in actions:
            if isinstance(action, SendPacket):
                packet = action.packet
                if self.as_nic and isinstance(packet, DataPacket):
                    datagram = node.transport.datagram(packet)
                else:
                    datagram = encode(packet)
                self.log.append((self.now, node_id, action.packet))
                transit = Transit(node_id, action.node, action.packet, datagram, self.now)
                for delay, data in self.route(transit):
                    item = (self.now + delay, next(self._order), action.node, data)
                    heapq.heappush(self._wire, item)
            elif isinstance(action, Deliver):
                node.delivered.append(action)
            elif isinstance(action, SendComplete):
                node.completed.append(action)
            elif isinstance(action, SendFailed):
                node.failed.append(action)
            elif isinstance(action, PeerDead):
                node.dead.append(action)
            else:  # pragma: no cover - a new action type the harness does not know
                raise AssertionError(f"unknown action {action!r}")

    def next_time(self) -> float | None:
        """When something next happens: an arrival or a transport deadline."""
        times = [
            d for i, n in enumerate(self.nodes)
            if i not in self.stalled and (d := n.transport.next_deadline()) is not None
        ]  # fmt: skip
        times += self.stalled.values()
        if self._wire:
            times.append(self._wire[0][0])
        return min(times) if times else None

    def step(self) -> bool:
        """Advance to the next event and process everything due then; False when idle."""
        when = self.next_time()
        if when is None:
            return False
        self.events += 1
        self.now = max(self.now, when)
        touched: set[int] = set()
        for node_id, until in list(self.stalled.items()):
            if until <= self.now:  # resumes: timers first, then what queued up
                del self.stalled[node_id]
                node = self.nodes[node_id]
                self.apply(node_id, node.transport.on_timer(now=self.now))
                for data in self._backlog.pop(node_id, []):
                    self._arrive(node_id, data)
                touched.add(node_id)
        while self._wire and self._wire[0][0] <= self.now:
            _, _, dst, data = heapq.heappop(self._wire)
            if dst in self.stalled:
                self._backlog[dst].append(data)
                continue
            self._arrive(dst, data)
            touched.add(dst)
        for node_id in sorted(touched):
            self.apply(node_id, self.nodes[node_id].transport.flush(now=self.now))
        for node_id, node in enumerate(self.nodes):
            if node_id in self.stalled:
                continue
            deadline = node.transport.next_deadline()
            if deadline is not None and deadline <= self.now:
                self.apply(node_id, node.transport.on_timer(now=self.now))
        return True

    def run(self, until: Callable[[], bool] | None = None, *, max_events: int = 200_000) -> None:
        """Step until ``until()`` holds (or, without it, until idle); fail after
        ``max_events`` steps."""
        for _ in range(max_events):
            if until is not None and until():
                return
            if not self.step():
                assert until is None or until(), "network idle but the condition never held"
                return
        raise AssertionError(f"not done after {max_events} events (now={self.now:.3f} s)")

    def advance(self, seconds: float) -> None:
        """Run every event up to ``now + seconds``, then set the clock there."""
        end = self.now + seconds
        for _ in range(200_000):
            when = self.next_time()
            if when is None or when > end:
                self.now = end
                return
            self.step()
        raise AssertionError("advance did not finish")

    # -- helpers ----------------------------------------------------------------------------

    def _arrive(self, dst: int, data: bytes) -> None:
        try:
            packet = decode_untrusted(data)
        except BadPacket as exc:
            self.bad[exc.reason] += 1
            return
        transport = self.nodes[dst].transport
        if isinstance(packet, ControlPacket):
            if packet.to_node != dst:
                self.bad["misrouted"] += 1
                return
            self.apply(dst, transport.on_control(packet, now=self.now))
        else:
            if packet.dst_node != dst:
                self.bad["misrouted"] += 1
                return
            self.apply(dst, transport.on_data(packet, now=self.now))

    def data_sent(self, *, src: int | None = None, seq: int | None = None) -> list[DataPacket]:
        """Data packets put on the link, optionally only from ``src`` / with ``seq``."""
        return [
            p
            for _, s, p in self.log
            if isinstance(p, DataPacket)
            and (src is None or s == src)
            and (seq is None or p.seq == seq)
        ]

    def controls(self, *, src: int | None = None) -> list[ControlPacket]:
        """Control packets put on the link, optionally only from ``src``."""
        return [
            p for _, s, p in self.log if isinstance(p, ControlPacket) and (src is None or s == src)
        ]


Answer = Callable[[int, "hl.HostRecord"], "hl.HostRecord | None"]
"""``answer(node, record)``: what host ``node`` sends its NIC back on seeing ``record``."""


class NicNet:
    """N NicCores on one virtual link, one host connection ``conn`` each."""

    def __init__(
        self,
        configs: Sequence[NicConfig] | int,
        route: Route = perfect,
        *,
        answer: Answer | None = None,
        conn: int = 1,
    ) -> None:
        if isinstance(configs, int):
            configs = [NicConfig(i, "/tmp") for i in range(configs)]
        self.cores = [NicCore(config) for config in configs]
        self.addrs = {i: ("127.0.0.1", 2000 + i) for i in range(len(self.cores))}
        self.by_addr = {addr: i for i, addr in self.addrs.items()}
        self.route = route
        self.answer = answer
        self.conn = conn
        self.now = 0.0
        self.hosts: list[list[hl.HostRecord]] = [[] for _ in self.cores]
        """Every record each NIC wrote to its host, in order."""
        self.signals: list[list[RaiseSignal]] = [[] for _ in self.cores]
        self.host_actions: list[list[ToHost | RaiseSignal]] = [[] for _ in self.cores]
        """What each NIC gave its host (records and signals), in order."""
        self.dead: set[int] = set()
        """Nodes that stopped: they take no datagrams and fire no timers."""
        self.event_count = 0
        self._wire: list[tuple[float, int, int, int, bytes]] = []  # (arrival, order, src, dst, dg)
        self._order = itertools.count()
        for core in self.cores:
            core.set_routes(self.addrs)

    # -- driving ----------------------------------------------------------------------------

    def request(self, node: int, record: hl.HostRecord) -> None:
        """Host ``node`` writes ``record`` to its NIC (nothing runs until :meth:`run`)."""
        self.apply(node, self.cores[node].on_host(self.conn, record, now=self.now))

    def apply(self, node: int, actions: Iterable[NicAction]) -> None:
        """Carry out a NIC's actions: datagrams onto the link, records to its host."""
        for action in actions:
            if isinstance(action, Transmit):
                dst = self.by_addr[action.addr]
                packet = decode_untrusted(action.datagram)
                transit = Transit(node, dst, packet, action.datagram, self.now)
                for delay, data in self.route(transit):
                    item = (self.now + delay, next(self._order), node, dst, data)
                    heapq.heappush(self._wire, item)
            elif isinstance(action, ToHost):
                assert action.conn == self.conn
                self.hosts[node].append(action.record)
                self.host_actions[node].append(action)
                reply = None if self.answer is None else self.answer(node, action.record)
                if reply is not None:
                    self.request(node, reply)
            elif isinstance(action, RaiseSignal):
                self.signals[node].append(action)
                self.host_actions[node].append(action)
            else:  # pragma: no cover - a new action type the harness does not know
                raise AssertionError(f"unknown action {action!r}")

    def next_time(self) -> float | None:
        """When something next happens: an arrival or a live NIC's deadline."""
        times = [
            d for i, c in enumerate(self.cores)
            if i not in self.dead and (d := c.next_deadline()) is not None
        ]  # fmt: skip
        if self._wire:
            times.append(self._wire[0][0])
        return min(times) if times else None

    def step(self) -> bool:
        """Advance to the next event and process everything due then; False when idle."""
        when = self.next_time()
        if when is None:
            return False
        self.event_count += 1
        self.now = max(self.now, when)
        touched: set[int] = set()
        while self._wire and self._wire[0][0] <= self.now:
            _, _, src, dst, data = heapq.heappop(self._wire)
            if dst in self.dead:
                continue
            self.apply(dst, self.cores[dst].on_datagram(data, self.addrs[src], now=self.now))
            touched.add(dst)
        for node in sorted(touched):
            self.apply(node, self.cores[node].flush(now=self.now))
        for node, core in enumerate(self.cores):
            deadline = core.next_deadline()
            if node not in self.dead and deadline is not None and deadline <= self.now:
                self.apply(node, core.on_timer(now=self.now))
        return True

    def run(self, until: Callable[[], bool] | None = None, *, max_events: int = 100_000) -> None:
        """Step until ``until()`` holds (or, without it, until idle); fail after
        ``max_events`` steps."""
        for _ in range(max_events):
            if until is not None and until():
                return
            if not self.step():
                assert until is None or until(), "network idle but the condition never held"
                return
        raise AssertionError(f"not settled after {max_events} events (now={self.now:.3f} s)")

    def pop_datagram(self) -> tuple[int, int, bytes]:
        """Take the next datagram off the link undelivered: (source, destination, datagram)."""
        _, _, src, dst, data = heapq.heappop(self._wire)
        return src, dst, data

    # -- queries ----------------------------------------------------------------------------

    def records(self, node: int, kind: type[object]) -> list[object]:
        """The records of type ``kind`` host ``node`` got."""
        return [r for r in self.hosts[node] if isinstance(r, kind)]
