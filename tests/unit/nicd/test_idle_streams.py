"""Idle incoming streams in their initial state are evicted (issue 14): packets a routed peer
sends to port pairs nobody uses cannot make a NIC keep a receiver each for ever, and a stream
that comes back after eviction works exactly as before (the sender sees no difference)."""

from __future__ import annotations

from dataclasses import replace

from nicd import hostlink as hl
from nicd.config import NicConfig, TransportConfig
from nicd.core.actions import ToHost
from nicd.core.nic import NicCore
from nicd.link.wire import FragFlags, encode
from tests.unit.factories import data_packet
from tests.unit.netsim import NicNet

ADDRS = {0: ("127.0.0.1", 2000), 1: ("127.0.0.1", 2001)}
IDLE = 10.0
CONFIG = NicConfig(0, "/tmp", transport=TransportConfig(idle_stream_s=IDLE))


def _receiver() -> NicCore:
    core = NicCore(replace(CONFIG, node_id=1))
    core.set_routes(ADDRS)
    core.on_host(1, hl.OpenReq(0), now=0.0)
    core.on_host(1, hl.ProvideReq(4), now=0.0)
    return core


def _garbage(core: NicCore, src_port: int, dst_port: int, now: float) -> None:
    packet = data_packet(seq=5, src_node=0, src_port=src_port, dst_node=1, dst_port=dst_port)
    core.on_datagram(encode(packet), ADDRS[0], now=now)


def _run_timers(core: NicCore, until: float) -> None:
    now = 0.0
    for _ in range(1000):
        deadline = core.next_deadline()
        if deadline is None or deadline > until:
            break
        now = max(now, deadline)
        core.on_timer(now=now)
    core.on_timer(now=until)


def _streams_in(core: NicCore) -> int:
    n = core.transport.stats()["streams_in"]
    assert isinstance(n, int)
    return n


def test_streams_a_peer_opens_and_never_uses_are_evicted() -> None:
    core = _receiver()
    for port in range(200):  # out-of-order junk and refusals at a never-opened port
        _garbage(core, port, 0, now=0.0)
        first = data_packet(seq=0, src_node=0, src_port=port, dst_node=1, dst_port=9)
        core.on_datagram(encode(first), ADDRS[0], now=0.0)
    assert _streams_in(core) == 400
    _run_timers(core, until=IDLE * 0.5)
    assert _streams_in(core) == 400  # not idle long enough yet
    _run_timers(core, until=IDLE * 1.5)
    assert _streams_in(core) == 0
    assert core.transport.stats()["streams_evicted"] == 400
    assert core.next_deadline() is None  # nothing left to sweep: no timer spins


def test_a_stream_that_carried_data_is_kept() -> None:
    core = _receiver()
    whole = data_packet(seq=0, src_node=0, src_port=3, dst_node=1, dst_port=0, payload=b"a")
    actions = core.on_datagram(encode(whole), ADDRS[0], now=0.0)
    assert any(isinstance(a, ToHost) and isinstance(a.record, hl.RecvEvent) for a in actions)
    _run_timers(core, until=IDLE * 3)
    assert _streams_in(core) == 1
    assert core.transport.stats()["streams_evicted"] == 0


def test_an_evicted_stream_comes_back_and_delivers_exactly_once() -> None:
    core = _receiver()
    _garbage(core, 3, 0, now=0.0)
    _run_timers(core, until=IDLE * 2)
    assert core.transport.stats()["streams_evicted"] == 1
    got: list[bytes] = []
    for seq, payload in enumerate((b"one", b"two")):
        packet = data_packet(seq=seq, src_node=0, src_port=3, dst_node=1, dst_port=0,
                             payload=payload, flags=FragFlags.ONLY)  # fmt: skip
        for _ in range(2):  # and a duplicate of each
            for a in core.on_datagram(encode(packet), ADDRS[0], now=IDLE * 2):
                if isinstance(a, ToHost) and isinstance(a.record, hl.RecvEvent):
                    got.append(a.record.payload)
    assert got == [b"one", b"two"]


def test_a_refused_stream_evicted_while_its_sender_waited_still_gets_through() -> None:
    """A sender whose first message was refused at a never-opened port, and which is silent
    longer than the idle limit (its retries are far apart), is served once the port opens."""
    config = replace(CONFIG, transport=TransportConfig(idle_stream_s=0.05))
    net = NicNet([replace(config, node_id=i) for i in range(2)])
    net.cores[0].on_host(1, hl.OpenReq(0), now=0.0)
    net.request(0, hl.SendReq(1, 1, 4, b"late host"))
    net.run(lambda: net.now >= 1.0)
    assert net.cores[1].transport.stats()["streams_evicted"] > 0
    net.request(1, hl.OpenReq(4))
    net.request(1, hl.ProvideReq(1))
    net.run()  # until idle: the message is through and acknowledged
    delivered = [r for r in net.hosts[1] if isinstance(r, hl.RecvEvent)]
    assert [r.payload for r in delivered] == [b"late host"]
    assert any(isinstance(r, hl.SentEvent | hl.SentBatch) for r in net.hosts[0])
