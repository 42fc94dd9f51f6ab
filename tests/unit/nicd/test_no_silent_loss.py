"""No silent loss (issue 30): a receiving NIC that gives up on a message its sender still
believes in tells the sender (NACK ABORTED), so the sender's request ends in an error naming
the peer, never SENT; the receiving port's token comes back and the stream goes on.

Covered here, on a virtual clock: a sender that freezes mid-message for longer than the
reassembly timeout (its NIC takes no datagram and fires no timer, as under SIGSTOP), also with
the first NACK lost; a receiving port that closes mid-message on a lossy link, under both
recoveries. Beside the code: the receiver's abort and a message longer than the receiver's
``max_message`` (``test_reliable.py``), a port closed mid-message on a clean link
(``test_channels.py``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nicd import hostlink as hl
from nicd.config import NicConfig, TransportConfig
from nicd.link.wire import ControlPacket, DataPacket, MsgType, NackReason
from tests.unit.netsim import BadNetwork, Net, NicNet, Transit, perfect, sent_handles, test_config

PORT = 0
TIMEOUT = 5.0
MTU = 100


def _net(route: object, *, buffers: int = 1) -> NicNet:
    config = NicConfig(0, "/tmp", transport=TransportConfig(mtu=MTU),
                       reassembly_timeout_s=TIMEOUT)  # fmt: skip
    net = NicNet([replace(config, node_id=i) for i in range(2)], route)  # type: ignore[arg-type]
    for node in (0, 1):
        net.request(node, hl.OpenReq(PORT))
    net.request(1, hl.ProvideReq(buffers))
    return net


class FreezeMidMessage:
    """The route: the sender's fragments after the first are lost while ``frozen`` (its NIC
    stopped before they left), and while frozen nothing reaches it either, unless ``hold``
    keeps what comes for it until it thaws (the kernel's socket buffer does under SIGSTOP)."""

    def __init__(self, *, hold: bool) -> None:
        self.frozen = True
        self.hold = hold
        self.held: list[Transit] = []
        self.seen: list[ControlPacket] = []

    def __call__(self, t: Transit) -> list[tuple[float, bytes]]:
        p = t.packet
        if isinstance(p, ControlPacket) and p.msg_type is MsgType.NACK:
            self.seen.append(p)
        if not self.frozen:
            return perfect(t)
        if t.src == 0 and isinstance(p, DataPacket) and p.seq > 0:
            return []
        if t.dst == 0:
            if self.hold:
                self.held.append(t)
            return []
        return perfect(t)


def _freeze_then_thaw(net: NicNet, route: FreezeMidMessage) -> None:
    net.request(0, hl.SendReq(1, 1, PORT, b"m" * (MTU * 3)))
    net.dead.add(0)  # the sender's NIC stops: no timer of its fires
    net.run()  # until the receiver has nothing left to do: it gave up at the timeout
    assert net.now >= TIMEOUT
    net.now += 1.0
    net.dead.discard(0)
    route.frozen = False
    for t in route.held:  # what waited in its socket buffer arrives first
        net.apply(0, net.cores[0].on_datagram(t.datagram, net.addrs[t.src], now=net.now))
    net.run()


def _errors(net: NicNet) -> list[hl.ErrorEvent]:
    return [r for r in net.hosts[0] if isinstance(r, hl.ErrorEvent)]


def _check_outcome(net: NicNet) -> None:
    receiver = net.cores[1]
    assert receiver.link.drops["reassembly_timeout"] == 1
    assert [(e.handle, e.dst_node, e.reason) for e in _errors(net)] == [(1, 1, "aborted")]
    assert 1 not in sent_handles(net.hosts[0])  # never SENT
    assert net.records(1, hl.RecvEvent) == []
    state = receiver.ports.get(PORT)
    assert state is not None
    assert state.receive_tokens == 1  # the receiving host's token came back
    # the stream goes on: the next message on it is delivered and SENT
    net.request(0, hl.SendReq(2, 1, PORT, b"next" * 60))
    net.run()
    assert [r.payload for r in net.records(1, hl.RecvEvent)] == [b"next" * 60]  # type: ignore[attr-defined]
    assert 2 in sent_handles(net.hosts[0])


def test_a_frozen_senders_dropped_message_ends_in_an_error_when_it_thaws() -> None:
    route = FreezeMidMessage(hold=True)
    net = _net(route)
    _freeze_then_thaw(net, route)
    _check_outcome(net)
    assert route.seen[0].reason is NackReason.ABORTED


def test_the_error_comes_even_when_the_first_aborted_nack_is_lost() -> None:
    """The NACK sent at the timeout is lost (nothing reaches the frozen NIC); the sender's
    retransmission after it thaws is refused with another one."""
    route = FreezeMidMessage(hold=False)
    net = _net(route)
    _freeze_then_thaw(net, route)
    _check_outcome(net)
    assert [p.reason for p in route.seen].count(NackReason.ABORTED) >= 2


def test_a_sender_that_keeps_sending_is_not_aborted() -> None:
    net = _net(perfect)
    net.request(0, hl.SendReq(1, 1, PORT, b"m" * (MTU * 3)))
    net.run()
    assert _errors(net) == []
    assert sent_handles(net.hosts[0]) == [1]
    assert [r.payload for r in net.records(1, hl.RecvEvent)] == [b"m" * (MTU * 3)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("recovery", ["gbn", "selective"])
@pytest.mark.parametrize("seed", range(4))
def test_a_port_closed_mid_message_under_loss_ends_in_exactly_one_outcome_each(
    recovery: str, seed: int
) -> None:
    """Transports on a lossy, duplicating, reordering link: the receiving port closes while
    the first message is partly taken and opens again. Every message ends once, and none the
    receiver did not deliver is reported SENT."""
    net = Net(2, test_config(recovery=recovery, ack_every=1), BadNetwork(seed=seed, loss=0.2,
              dup=0.05, reorder=0.1))  # fmt: skip
    handles = [net.send(0, 1, bytes([i]) * (64 * 3)) for i in range(3)]
    receiver = net.nodes[1]
    net.advance(0.0001)  # two link delays: the first fragments are in, not all
    receiver.ports.close(0)
    net.apply(1, receiver.transport.close_port(0, now=net.now))
    receiver.ports.open(0)
    net.apply(1, receiver.transport.resume_port(0, now=net.now))
    net.run()
    sender = net.nodes[0]
    completed = [c.handle for c in sender.completed]
    failed = [f.handle for f in sender.failed]
    assert sorted(completed + failed) == handles  # each exactly once
    delivered = [d.payload[0] for d in receiver.delivered]
    assert [handles[i] for i in delivered] == completed  # SENT means delivered, in order
    assert all(f.reason == "aborted" and f.dst_node == 1 for f in sender.failed)
    drops = receiver.transport.stats()["drops"]
    assert drops.get("port_closed", 0) == len(failed)  # type: ignore[attr-defined]  # one each
