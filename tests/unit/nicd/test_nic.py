"""NicCore: host requests, link input and the control queue, without sockets.

These tests check the exact output of each single NicCore call (the delayed ACK, the lazily
coalesced SENT, what a busy link queues), which netsim's NicNet hides by design, so they call
the cores by hand; ``pair`` only opens ports. Tests that pump messages through cores use
NicNet (tests/unit/nicd/test_nic_signals.py, test_grim_nic.py, ...)."""

from __future__ import annotations

from nicd import hostlink as hl
from nicd.config import NicConfig
from nicd.core.actions import NicAction, ToHost, Transmit
from nicd.core.nic import NicCore
from nicd.link.wire import DataPacket, decode_untrusted

A = ("127.0.0.1", 1001)
B = ("127.0.0.1", 1002)


def pair() -> tuple[NicCore, NicCore]:
    cores = (NicCore(NicConfig(0, "/tmp")), NicCore(NicConfig(1, "/tmp")))
    for core in cores:
        core.set_routes({0: A, 1: B})
        core.on_host(1, hl.OpenReq(0), now=0.0)
        core.on_host(1, hl.ProvideReq(8), now=0.0)
    return cores


def test_send_reaches_the_other_host_and_sent_comes_back_lazily() -> None:
    a, b = pair()
    [tx] = a.on_host(1, hl.SendReq(7, 1, 0, b"hi"), now=0.0)
    assert isinstance(tx, Transmit)
    assert not tx.control
    [deliver] = b.on_datagram(tx.datagram, A, now=0.0)
    assert deliver == ToHost(1, hl.RecvEvent(0, 0, b"hi"))
    assert b.flush(now=0.0) == []  # the ACK is delayed
    deadline = b.next_deadline()
    assert deadline is not None
    [ack] = b.on_timer(now=deadline)
    assert isinstance(ack, Transmit)
    assert ack.control
    assert a.on_datagram(ack.datagram, B, now=deadline) == []  # SENT waits to be coalesced
    sent_at = a.next_deadline()
    assert sent_at is not None
    assert a.on_timer(now=sent_at) == [ToHost(1, hl.SentEvent(7))]


def test_a_reply_carries_the_ack_of_the_request_so_no_ack_datagram_goes() -> None:
    # Ping-pong: each side's delayed ACK rides on its next data packet back (wire flag ACKED).
    a, b = pair()
    t = 0.0
    sent: dict[NicCore, list[hl.HostRecord]] = {a: [], b: []}

    def take(core: NicCore, out: list[NicAction]) -> list[hl.HostRecord]:
        """The deliveries in ``out``; SENT events are kept in ``sent``."""
        records = [act.record for act in out if isinstance(act, ToHost)]
        sent[core] += [r for r in records if isinstance(r, hl.SentEvent)]
        return [r for r in records if not isinstance(r, hl.SentEvent)]

    for i in range(3):
        [ping] = a.on_host(1, hl.SendReq(10 + i, 1, 0, b"ping"), now=t)
        packet = decode_untrusted(ping.datagram)
        assert isinstance(packet, DataPacket)
        assert packet.ack == (None if i == 0 else i)  # the pongs a took so far
        assert take(b, b.on_datagram(ping.datagram, A, now=t)) == [hl.RecvEvent(0, 0, b"ping")]
        assert b.flush(now=t) == []  # the ACK is delayed ...
        [pong] = b.on_host(1, hl.SendReq(20 + i, 0, 0, b"pong"), now=t)
        packet = decode_untrusted(pong.datagram)
        assert isinstance(packet, DataPacket)
        assert packet.ack == i + 1  # ... and rides on the reply
        assert take(a, a.on_datagram(pong.datagram, B, now=t)) == [hl.RecvEvent(1, 0, b"pong")]
        assert a.flush(now=t) == []
        t += 0.0001
    # Every ping completed (SENT with the reply or at a's coalescing deadline) though b never
    # sent an ACK datagram; each pong but the last was acknowledged by the next ping.
    deadline = a.next_deadline()
    assert deadline is not None
    assert take(a, a.on_timer(now=deadline)) == []
    assert sent[a] == [hl.SentEvent(10 + i) for i in range(3)]
    assert b.link.datagrams_out == 3
    assert b.stats()["transport"]["acks_piggybacked"] == 3  # type: ignore[index]
    assert a.stats()["transport"]["acks_received"] == 3  # type: ignore[index]
    assert a.stats()["transport"]["acks_piggybacked"] == 2  # type: ignore[index]


def test_unknown_sources_and_garbage_are_counted_drops() -> None:
    a, _ = pair()
    assert a.on_datagram(b"junk", ("10.9.9.9", 1), now=0.0) == []
    assert a.on_datagram(b"junk-bytes-long-enough", B, now=0.0) == []
    assert a.stats()["link"]["drops"] == {"unknown_source": 1, "crc": 1}  # type: ignore[index]


def test_host_misuse_is_refused_not_raised() -> None:
    core = NicCore(NicConfig(0, "/tmp"))
    assert core.on_host(5, hl.SendReq(1, 0, 0, b""), now=0.0) == [
        ToHost(5, hl.Refused("SEND before OPEN"))
    ]
    core.on_host(5, hl.OpenReq(0), now=0.0)
    [refused] = core.on_host(5, hl.SendReq(1, 0, 0, b"", msg_type=10), now=0.0)  # ACK type
    assert isinstance(refused, ToHost)
    assert isinstance(refused.record, hl.Refused)
    [error] = core.on_host(5, hl.SendReq(2, 9, 0, b""), now=0.0)
    assert error == ToHost(5, hl.ErrorEvent(2, 9, "no_route"))


def test_a_record_no_service_owns_is_a_counted_refusal() -> None:
    core = NicCore(NicConfig(0, "/tmp"))
    core.on_host(5, hl.OpenReq(0), now=0.0)
    assert core.on_host(5, hl.RoutesOk(), now=0.0) == [
        ToHost(5, hl.Refused("RoutesOk is not a host request"))
    ]
    assert core.link.drops["host_misuse"] == 1


def test_every_service_record_before_open_is_refused_by_name() -> None:
    core = NicCore(NicConfig(0, "/tmp"))
    assert core.on_host(5, hl.McastFreeReq(3), now=0.0) == [
        ToHost(5, hl.Refused("McastFreeReq before OPEN"))
    ]
    assert core.on_host(5, hl.NicvmListReq(), now=0.0) == [
        ToHost(5, hl.Refused("NICVM request before OPEN"))
    ]


def test_control_queue_holds_acks_the_link_refused_and_sends_them_first() -> None:
    a, b = pair()
    [tx] = a.on_host(1, hl.SendReq(1, 1, 0, b"x"), now=0.0)
    b.on_datagram(tx.datagram, A, now=0.0)
    [ack] = b.on_timer(now=1.0)
    assert isinstance(ack, Transmit)
    b.on_link_busy(ack)
    data = Transmit(A, b"data", control=False)
    b.on_link_busy(data)  # data on a busy link is dropped: go-back-N resends it
    assert list(b.control_queue) == [ack]
    assert b.on_link_writable() == [ack]
    assert not b.control_queue
    assert b.stats()["link"]["drops"] == {"control_queued": 1, "link_busy": 1}  # type: ignore[index]
