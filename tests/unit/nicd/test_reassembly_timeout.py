"""A partial reassembly whose sender went silent (audit test 18): after
``reassembly_timeout_s`` without a packet of its stream it is discarded, counted, and its
receive token goes back to the port; a later message into the port is delivered."""

from __future__ import annotations

from dataclasses import replace

from nicd import hostlink as hl
from nicd.config import NicConfig, TransportConfig
from nicd.core.actions import ToHost, Transmit
from nicd.core.nic import NicCore
from nicd.link.wire import encode
from tests.unit.factories import data_packet

ADDRS = {0: ("127.0.0.1", 1001), 1: ("127.0.0.1", 1002), 2: ("127.0.0.1", 1003)}
PORT = 0
TIMEOUT = 5.0


def _cores() -> list[NicCore]:
    config = NicConfig(0, "/tmp", transport=TransportConfig(mtu=100),
                       reassembly_timeout_s=TIMEOUT)  # fmt: skip
    cores = [NicCore(replace(config, node_id=i)) for i in range(3)]
    for core in cores:
        core.set_routes(ADDRS)
        core.on_host(1, hl.OpenReq(PORT), now=0.0)
    cores[1].on_host(1, hl.ProvideReq(1), now=0.0)  # one receive buffer only
    return cores


def _datagrams(actions: list[object]) -> list[bytes]:
    return [a.datagram for a in actions if isinstance(a, Transmit) and not a.control]


def _deliveries(actions: list[object]) -> list[hl.RecvEvent]:
    return [a.record for a in actions if isinstance(a, ToHost)
            and isinstance(a.record, hl.RecvEvent)]  # fmt: skip


def test_a_silent_senders_partial_message_gives_its_token_back() -> None:
    cores = _cores()
    sender, receiver, other = cores
    frags = _datagrams(sender.on_host(1, hl.SendReq(1, 1, PORT, b"x" * 250), now=0.0))
    assert len(frags) == 3
    receiver.on_datagram(frags[0], ADDRS[0], now=0.0)  # then the sender dies
    state = receiver.ports.get(PORT)
    assert state is not None
    assert state.receive_tokens == 0
    now = 0.0
    for _ in range(100):  # the receiver's own timers run; nothing more comes from node 0
        deadline = receiver.next_deadline()
        if deadline is None or deadline > TIMEOUT + 1:
            break
        now = max(now, deadline)
        receiver.on_timer(now=now)
    now = TIMEOUT + 1
    receiver.on_timer(now=now)
    assert state.receive_tokens == 1
    assert receiver.link.drops["reassembly_timeout"] == 1
    msg = _datagrams(other.on_host(1, hl.SendReq(1, 1, PORT, b"after"), now=now))
    got = [e for d in msg for e in _deliveries(receiver.on_datagram(d, ADDRS[2], now=now))]
    assert [e.payload for e in got] == [b"after"]


def test_a_partial_that_keeps_coming_is_not_dropped() -> None:
    cores = _cores()
    sender, receiver, _ = cores
    frags = _datagrams(sender.on_host(1, hl.SendReq(1, 1, PORT, b"y" * 250), now=0.0))
    receiver.on_datagram(frags[0], ADDRS[0], now=0.0)
    receiver.on_datagram(frags[1], ADDRS[0], now=TIMEOUT * 0.9)
    receiver.on_timer(now=TIMEOUT * 1.5)  # 0.6 timeouts since the last packet
    got = _deliveries(receiver.on_datagram(frags[2], ADDRS[0], now=TIMEOUT * 1.5))
    assert [e.payload for e in got] == [b"y" * 250]
    assert receiver.link.drops["reassembly_timeout"] == 0


def test_an_abandoned_partial_gives_its_token_back_when_the_next_message_starts() -> None:
    cores = _cores()
    sender, receiver, _ = cores
    receiver.on_host(1, hl.ProvideReq(1), now=0.0)  # two buffers
    frags = _datagrams(sender.on_host(1, hl.SendReq(1, 1, PORT, b"z" * 250), now=0.0))
    receiver.on_datagram(frags[0], ADDRS[0], now=0.0)
    state = receiver.ports.get(PORT)
    assert state is not None
    assert state.receive_tokens == 1
    # A peer that gives up mid-message and starts another: a whole message at the next seq.
    fresh = data_packet(
        seq=1, src_node=0, src_port=PORT, dst_node=1, dst_port=PORT, payload=b"fresh", token=0
    )  # fmt: skip  (the stream's epoch)
    got = _deliveries(receiver.on_datagram(encode(fresh), ADDRS[0], now=0.0))
    assert [e.payload for e in got] == [b"fresh"]
    assert receiver.transport.stats()["drops"]["abandoned"] == 1  # type: ignore[index]
    assert state.receive_tokens == 1  # the abandoned message's token came back
