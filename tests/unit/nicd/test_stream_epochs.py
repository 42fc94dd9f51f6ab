"""Stream epochs (issue 30): idle streams are evicted without a later stream being taken for
the evicted one, stale-epoch packets are counted drops, and a restarted receiving nicd (peer
reset) makes every message in flight to it fail ``peer_reset``, never SENT, never retried,
while new traffic after the restart flows. Transports on the virtual link, fake clock."""

from __future__ import annotations

from nicd.link.channels import Admission, Transport
from nicd.link.wire import ControlPacket, DataPacket, FragFlags, MsgType, NackReason
from tests.unit.netsim import Net, Transit, perfect, test_config

IDLE_S = 10.0


def _drop_to(node: int) -> object:
    def route(t: Transit) -> list[tuple[float, bytes]]:
        return [] if t.dst == node else perfect(t)

    return route


def _stats(net: Net, node: int) -> dict[str, object]:
    return net.nodes[node].transport.stats()


def test_a_restarted_receiver_fails_what_was_in_flight_and_new_traffic_flows() -> None:
    net = Net(2, test_config(idle_stream_s=IDLE_S), as_nic=True)
    for i in range(3):  # both ways, so each side holds an established stream of the other
        net.send(0, 1, b"before %d" % i)
        net.send(1, 0, b"back %d" % i)
    net.run()
    assert len(net.nodes[0].completed) == 3
    net.route = _drop_to(1)  # type: ignore[assignment]
    lost = [net.send(0, 1, b"in flight %d" % i) for i in range(3)]  # never reach old node 1
    net.advance(0.001)
    net.restart(1, epoch_seed=500)  # same node id, nothing kept
    net.route = perfect
    net.run(lambda: len(net.nodes[0].failed) == 3)
    failed = net.nodes[0].failed
    assert [(f.handle, f.dst_node, f.reason) for f in failed] == [
        (h, 1, "peer_reset") for h in lost
    ]
    assert not {c.handle for c in net.nodes[0].completed} & set(lost)  # never SENT
    assert net.nodes[1].delivered == []  # nothing meant for the old node reached the new one
    assert set(_stats(net, 1)["nacks_sent"]) == {"reset"}  # type: ignore[arg-type]
    # new traffic after the restart flows both ways, under new epochs
    after = net.send(0, 1, b"after")
    net.send(1, 0, b"hello again")
    net.run()
    assert [d.payload for d in net.nodes[1].delivered] == [b"after"]
    assert net.nodes[0].delivered[-1].payload == b"hello again"
    assert net.nodes[0].completed[-1].handle == after
    assert _stats(net, 0)["streams_restarted"] == 1  # node 1's new epoch replaced the old state
    assert net.nodes[0].transport.next_deadline() is None  # nothing retried for ever


def test_an_idle_sender_is_retired_and_its_next_message_starts_a_new_epoch() -> None:
    net = Net(2, test_config(idle_stream_s=IDLE_S), as_nic=True)
    net.send(0, 1, b"one")
    net.send(0, 1, b"two")
    net.run()
    first = {p.token for p in net.data_sent(src=0)}
    net.advance(IDLE_S / 2)
    net.send(0, 1, b"three")
    net.run()
    later = [p for p in net.data_sent(src=0) if p.token not in first]
    assert [p.seq for p in later] == [0]  # a new stream instance, from sequence 0
    assert [d.payload for d in net.nodes[1].delivered] == [b"one", b"two", b"three"]
    assert _stats(net, 0)["streams_retired"] == 1
    assert _stats(net, 1)["streams_restarted"] == 1
    assert net.nodes[0].failed == []


def test_idle_receivers_are_evicted_when_streams_are_made_and_nothing_is_confused() -> None:
    net = Net(3, test_config(idle_stream_s=IDLE_S), as_nic=True, open_ports=tuple(range(40)))
    for port in range(30):
        net.send(0, 1, b"x", dst_port=port)
    net.run()
    assert _stats(net, 1)["streams_in"] == 30
    net.advance(IDLE_S + 1)
    net.send(2, 1, b"a new stream")  # making a stream collects the idle ones
    net.run()
    assert _stats(net, 1)["streams_evicted"] == 30
    assert _stats(net, 1)["streams_in"] == 1  # bounded by the streams in recent use
    for port in range(30):  # the old sender retired its streams too: new epochs, no RESET
        net.send(0, 1, b"y", dst_port=port)
    net.run()
    assert net.nodes[0].failed == []
    assert (
        sorted(d.payload for d in net.nodes[1].delivered)
        == [b"a new stream"] + [b"x"] * 30 + [b"y"] * 30
    )
    assert "reset" not in _stats(net, 1)["nacks_sent"]  # type: ignore[operator]


def test_a_packet_of_an_established_epoch_with_no_state_here_is_answered_reset() -> None:
    t = Transport(1, test_config(), lambda _first: (Admission.OK, []))
    late = DataPacket(
        MsgType.GM_DATA, FragFlags.ONLY, 7, 12, 0, 0, 1, 0, 1, 0, b"z", established=True
    )
    (nack,) = t.on_data(late, now=0.0)
    packet = nack.packet  # type: ignore[union-attr]
    assert isinstance(packet, ControlPacket)
    assert (packet.reason, packet.epoch, packet.seq, packet.to_node) == (NackReason.RESET, 7, 12, 0)
    assert t.stats()["streams_in"] == 0  # no state made for it
    assert t.stats()["drops"] == {"no_stream_state": 1}


def test_stale_epoch_controls_and_piggy_backed_acks_are_counted_drops() -> None:
    t = Transport(0, test_config(epoch_seed=40), lambda _first: (Admission.OK, []))
    t.send(now=0.0, src_port=0, dst_node=1, dst_port=0, msg_type=MsgType.GM_DATA,
           payload=b"q", handle=1)  # fmt: skip
    stale = ControlPacket(MsgType.ACK, 1, 1, 0, 0, 0, epoch=39)
    assert t.on_control(stale, now=0.0) == []
    reset = ControlPacket(MsgType.NACK, 0, 1, 0, 0, 0, NackReason.RESET, epoch=41)
    assert t.on_control(reset, now=0.0) == []  # not this stream's epoch: no failure
    back = DataPacket(
        MsgType.GM_DATA, FragFlags.ONLY, 9, 0, 1, 0, 0, 0, 1, 0, b"r", ack=1, ack_epoch=39
    )
    t.on_data(back, now=0.0)
    assert t.stats()["drops"]["stale_epoch"] == 3  # type: ignore[index]
    assert t.stats()["messages_completed"] == 0
    assert t.stats()["messages_failed"] == {}
    current = ControlPacket(MsgType.ACK, 1, 1, 0, 0, 0, epoch=40)
    t.on_control(current, now=0.0)
    assert t.stats()["messages_completed"] == 1
