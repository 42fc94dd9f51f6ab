"""Transport over the virtual network: any-to-any streams, loss schedules, refusals, liveness."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, event, given, settings, target
from hypothesis import strategies as st

from nicd.config import TransportConfig
from nicd.core.actions import PeerDead, SendFailed, SendPacket
from nicd.errors import UsageError
from nicd.link.channels import Admission, StreamKey, Transport
from nicd.link.liveness import PeerState
from nicd.link.wire import ControlPacket, DataPacket, MsgType, NackReason
from tests.unit.netsim import BadNetwork, Net, Transit, perfect, test_config

MTU = 64
Stream = tuple[int, int, int, int]  # src node, src port, dst node, dst port


def payload_of(rng: random.Random, size: int) -> bytes:
    return bytes(rng.randrange(256) for _ in range(size))


def delivered_by_stream(net: Net) -> dict[Stream, list[bytes]]:
    got: dict[Stream, list[bytes]] = defaultdict(list)
    for dst, node in enumerate(net.nodes):
        for d in node.delivered:
            got[(d.src_node, d.src_port, dst, d.port)].append(d.payload)
    return got


def outcomes(net: Net) -> int:
    return sum(len(n.completed) + len(n.failed) for n in net.nodes)


def drop_where(predicate: object) -> object:
    """A route that drops what ``predicate(transit)`` selects and delivers the rest."""

    def route(t: Transit) -> list[tuple[float, bytes]]:
        return [] if predicate(t) else perfect(t)  # type: ignore[operator]

    return route


# -- any loss schedule ----------------------------------------------------------------------

messages = st.lists(
    st.tuples(
        st.floats(0, 0.01),  # pause before the send, seconds
        st.integers(0, 3),  # source node (mod n)
        st.integers(0, 3),  # destination node (mod n)
        st.integers(0, 1),  # source port
        st.integers(0, 1),  # destination port
        st.integers(0, 3 * MTU + 5),  # size
    ),
    min_size=1,
    max_size=30,
)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    n=st.integers(2, 4),
    loss=st.floats(0, 0.5),
    dup=st.floats(0, 0.2),
    reorder=st.floats(0, 0.3),
    corrupt=st.floats(0, 0.1),
    seed=st.integers(0, 2**32 - 1),
    plan=messages,
    ack_delay=st.sampled_from([0.0, 0.0005]),
)
def test_any_loss_schedule_delivers_each_message_once_in_order(
    n: int,
    loss: float,
    dup: float,
    reorder: float,
    corrupt: float,
    seed: int,
    plan: list[tuple[float, int, int, int, int, int]],
    ack_delay: float,
) -> None:
    bad = BadNetwork(seed, loss=loss, dup=dup, reorder=reorder, corrupt=corrupt)
    net = Net(n, test_config(ack_delay_s=ack_delay), bad)
    rng = random.Random(seed)
    sent: dict[Stream, list[bytes]] = defaultdict(list)
    handles: dict[int, set[int]] = defaultdict(set)
    for pause, src, dst, sport, dport, size in plan:
        net.advance(pause)
        src, dst = src % n, dst % n
        data = payload_of(rng, size)
        handles[src].add(net.send(src, dst, data, src_port=sport, dst_port=dport))
        sent[(src, sport, dst, dport)].append(data)
    net.run(lambda: outcomes(net) == len(plan))
    net.run()  # let the last ACKs settle; the network must go idle
    retransmissions = sum(n.transport.stats()["retransmissions"] for n in net.nodes)  # type: ignore[misc]
    target(float(retransmissions), label="retransmissions")
    event(f"loss >= 0.3: {loss >= 0.3}, messages >= 10: {len(plan) >= 10}")
    assert delivered_by_stream(net) == sent  # exactly once, in order, byte-identical
    for node_id, node in enumerate(net.nodes):
        assert node.failed == []
        assert node.dead == []
        completed = [c.handle for c in node.completed]
        assert sorted(completed) == sorted(handles[node_id])  # each once
        assert node.transport.next_deadline() is None
        json.dumps(node.transport.stats())
    if corrupt > 0.05 and len(net.log) > 200:
        assert net.bad["crc"] > 0 or bad.counts["corrupted"] == 0


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    loss=st.floats(0, 0.2),
    seed=st.integers(0, 2**32 - 1),
    cut_at=st.floats(0, 0.05),
    plan=messages,
)
def test_unreachable_peer_fails_its_sends_and_the_others_complete(
    loss: float, seed: int, cut_at: float, plan: list[tuple[float, int, int, int, int, int]]
) -> None:
    n, lost = 3, 2
    config = test_config(dead_peer_timeout_s=3.0, dead_peer_probes=20)
    bad = BadNetwork(seed, loss=loss, dup=0.05, reorder=0.05)
    bad.cut_off(lost, at=cut_at)
    net = Net(n, config, bad)
    rng = random.Random(seed)
    sent: dict[Stream, list[bytes]] = defaultdict(list)
    stream_of: dict[tuple[int, int], Stream] = {}
    for pause, src, dst, sport, dport, size in plan:
        net.advance(pause)
        src, dst = src % n, dst % n
        data = payload_of(rng, size)
        handle = net.send(src, dst, data, src_port=sport, dst_port=dport)
        sent[(src, sport, dst, dport)].append(data)
        stream_of[(src, handle)] = (src, sport, dst, dport)
    net.run(lambda: outcomes(net) == len(plan))
    failures = sum(len(node.failed) for node in net.nodes)
    target(float(failures), label="failures")
    event(f"some sends failed: {failures > 0}")
    got = delivered_by_stream(net)
    for stream, payloads in sent.items():
        src, _, dst, _ = stream
        if lost not in (src, dst):
            assert got.get(stream, []) == payloads
        else:
            # in order, no gaps: what arrived is a prefix of what was sent
            assert got.get(stream, []) == payloads[: len(got.get(stream, []))]
    for node_id, node in enumerate(net.nodes):
        for failure in node.failed:
            assert failure.reason == "peer_dead"
            assert lost in (node_id, failure.dst_node)  # (the cut node loses even itself)
        assert {f.dst_node for f in node.failed} <= {d.node for d in node.dead}
        assert len(node.dead) == len({d.node for d in node.dead})  # PeerDead once per peer
        for c in node.completed:  # a completed send was delivered
            stream = stream_of[(node_id, c.handle)]
            assert got.get(stream)
    for node_id in (0, 1):
        node = net.nodes[node_id]
        if node.failed:
            assert node.dead == [PeerDead(lost)]
            assert node.transport.peer_state(lost) is PeerState.DEAD
            assert net.now >= cut_at + config.dead_peer_timeout_s
        assert node.transport.peer_state(1 - node_id) is not PeerState.DEAD


# -- any-to-any: one stream's rollback leaves the others alone -------------------------------


def test_nack_rolls_back_only_its_own_stream() -> None:
    seen: set[tuple[int, int]] = set()

    def lose_first_copy_of_a1(t: Transit) -> bool:
        p = t.packet
        if isinstance(p, DataPacket) and (p.src_port, p.seq) == (0, 1):
            first = (p.src_port, p.seq) not in seen
            seen.add((p.src_port, p.seq))
            return first
        return False

    net = Net(2, test_config(), drop_where(lose_first_copy_of_a1))  # type: ignore[arg-type]
    for i in range(4):
        net.send(0, 1, bytes([i]), src_port=0, dst_port=0)  # stream A
        net.send(0, 1, bytes([i]), src_port=1, dst_port=0)  # stream B, same nodes
    net.run()
    a = [p.seq for p in net.data_sent(src=0) if p.src_port == 0]
    b = [p.seq for p in net.data_sent(src=0) if p.src_port == 1]
    assert a == [0, 1, 2, 3, 1, 2, 3]  # go back N on A
    assert b == [0, 1, 2, 3]  # B never rolled back
    nacks = [c for c in net.controls(src=1) if c.msg_type is MsgType.NACK]
    assert [(c.reason, c.seq, c.src_port) for c in nacks] == [(NackReason.GAP, 1, 0)]
    assert net.now < test_config().rto_initial_s  # recovered by the NACK, not the timer
    assert delivered_by_stream(net) == {
        (0, 0, 1, 0): [b"\0", b"\1", b"\2", b"\3"],
        (0, 1, 1, 0): [b"\0", b"\1", b"\2", b"\3"],
    }


def test_streams_into_different_ports_are_sequenced_apart() -> None:
    net = Net(2)
    net.send(0, 1, b"x", src_port=0, dst_port=0)
    net.send(0, 1, b"y", src_port=0, dst_port=1)
    net.run()
    assert {(p.dst_port, p.seq) for p in net.data_sent()} == {(0, 0), (1, 0)}


# -- receive tokens: NO_BUFFER, RESUME, retries ----------------------------------------------


def starve(net: Net, node: int, port: int = 0) -> None:
    net.nodes[node].ports.open(port, tokens=0)


def test_no_buffer_then_resume_port_delivers_in_order() -> None:
    net = Net(2)
    starve(net, 1)
    for i in range(3):
        net.send(0, 1, bytes([i]) * 100)
    net.advance(0.003)
    receiver = net.nodes[1]
    assert receiver.delivered == []
    assert receiver.transport.stats()["nacks_sent"] == {"no_buffer": 1}
    receiver.ports.tokens[0] = 10
    net.apply(1, receiver.transport.resume_port(0, now=net.now))
    resumes = [c for c in net.controls(src=1) if c.reason is NackReason.RESUME]
    assert [c.seq for c in resumes] == [0]
    net.run()
    assert [d.payload for d in receiver.delivered] == [bytes([i]) * 100 for i in range(3)]
    assert len(net.nodes[0].completed) == 3
    assert receiver.ports.tokens[0] == 7  # one token per message, none for refusals
    assert net.nodes[0].failed == []


def test_no_buffer_recovers_by_the_retry_timer_when_the_resume_is_lost() -> None:
    def lose_resume(t: Transit) -> bool:
        return isinstance(t.packet, ControlPacket) and t.packet.reason is NackReason.RESUME

    net = Net(2, route=drop_where(lose_resume))  # type: ignore[arg-type]
    starve(net, 1)
    net.send(0, 1, b"a" * 200)
    net.send(0, 1, b"b")
    net.advance(0.003)
    receiver = net.nodes[1]
    receiver.ports.tokens[0] = 5
    net.apply(1, receiver.transport.resume_port(0, now=net.now))
    net.run()
    assert [d.payload for d in receiver.delivered] == [b"a" * 200, b"b"]
    stats = net.nodes[0].transport.stats()
    assert stats["refusal_retries"] >= 1  # type: ignore[operator]
    assert stats["nacks_received"].get("resume", 0) == 0  # type: ignore[attr-defined]


def test_refused_stream_does_not_block_another_stream_to_the_same_node() -> None:
    net = Net(2)
    starve(net, 1, port=0)
    net.send(0, 1, b"stuck", dst_port=0)
    net.send(0, 1, b"flows", dst_port=1)
    net.advance(0.05)
    assert [d.payload for d in net.nodes[1].delivered] == [b"flows"]
    assert len(net.nodes[0].completed) == 1


def test_resume_port_without_refusals_sends_nothing() -> None:
    net = Net(2)
    assert net.nodes[1].transport.resume_port(0, now=0.0) == []


# -- NO_PORT: start-up race and lasting absence ----------------------------------------------


def test_port_opened_late_gets_its_messages() -> None:
    net = Net(2, open_ports=())
    net.send(0, 1, b"early", dst_port=3)
    net.advance(0.02)
    nacks = net.nodes[1].transport.stats()["nacks_sent"]
    # Production admission (gm.PortTable): a never-opened port is not ready yet, not gone.
    assert list(nacks) == ["no_buffer"]  # type: ignore[call-overload]
    assert 1 <= nacks["no_buffer"] <= 4  # type: ignore[index]  # once, then once per retry
    net.nodes[1].ports.open(3)
    net.apply(1, net.nodes[1].transport.resume_port(3, now=net.now))
    net.run()
    assert [d.payload for d in net.nodes[1].delivered] == [b"early"]
    assert net.nodes[0].failed == []


def test_a_never_opened_port_is_refused_no_buffer_until_that_times_out() -> None:
    config = test_config(no_port_timeout_s=0.1, no_buffer_timeout_s=0.5)
    net = Net(2, config, open_ports=())
    handles = [net.send(0, 1, bytes([i]) * 70, dst_port=3) for i in range(2)]
    net.run(lambda: len(net.nodes[0].failed) == 2)
    assert [(f.handle, f.reason) for f in net.nodes[0].failed] == [
        (h, "no_buffer") for h in handles
    ]
    assert net.now >= config.no_buffer_timeout_s  # not the shorter NO_PORT limit
    assert net.nodes[1].transport.stats()["nacks_sent"].get("no_port", 0) == 0  # type: ignore[attr-defined]
    assert net.nodes[0].dead == []


def test_port_closed_fails_the_stream_with_no_port_then_the_stream_works_again() -> None:
    config = test_config(no_port_timeout_s=0.5)
    net = Net(2, config, open_ports=())
    net.nodes[1].ports.open(3)
    net.nodes[1].ports.close(3)  # it was open, now it is gone: NO_PORT
    handles = [net.send(0, 1, bytes([i]) * 70, dst_port=3) for i in range(3)]
    net.run(lambda: len(net.nodes[0].failed) == 3)
    assert [(f.handle, f.reason) for f in net.nodes[0].failed] == [(h, "no_port") for h in handles]
    assert net.now >= config.no_port_timeout_s
    assert net.nodes[0].transport.peer_state(1) is PeerState.ALIVE  # it answered all along
    assert net.nodes[0].dead == []
    net.run()
    net.nodes[1].ports.open(3)
    net.send(0, 1, b"later", dst_port=3)
    net.run()
    assert [d.payload for d in net.nodes[1].delivered] == [b"later"]


# -- liveness -------------------------------------------------------------------------------


def test_silent_peer_goes_suspect_then_dead_and_its_sends_fail() -> None:
    config = test_config(dead_peer_timeout_s=1.0, dead_peer_probes=4)
    net = Net(3, config, drop_where(lambda t: t.dst == 2))  # type: ignore[arg-type]
    a = net.send(0, 2, b"x" * 150)
    b = net.send(0, 2, b"y", src_port=1)
    ok = net.send(0, 1, b"fine")
    net.run(lambda: net.nodes[0].transport.peer_state(2) is PeerState.SUSPECT)
    assert net.nodes[0].failed == []
    net.run(lambda: bool(net.nodes[0].failed))
    assert net.now >= config.dead_peer_timeout_s
    node = net.nodes[0]
    assert sorted(f.handle for f in node.failed) == sorted([a, b])
    assert {f.reason for f in node.failed} == {"peer_dead"}
    assert node.dead == [PeerDead(2)]
    assert [c.handle for c in node.completed] == [ok]
    assert node.transport.peer_state(2) is PeerState.DEAD
    assert node.transport.peer_state(1) is PeerState.ALIVE
    later = node.transport.send(
        now=net.now, src_port=0, dst_node=2, dst_port=0, msg_type=MsgType.GM_DATA,
        payload=b"z", handle=99,
    )  # fmt: skip
    assert later == [SendFailed(0, 99, 2, "peer_dead")]
    net.run()  # nothing left to do: no timer towards the dead peer
    assert node.transport.next_deadline() is None
    assert node.dead == [PeerDead(2)]  # once


def test_death_needs_the_minimum_number_of_unanswered_probes_too() -> None:
    config = test_config(dead_peer_timeout_s=0.001, dead_peer_probes=6, probe_interval_s=0.01)
    net = Net(2, config, drop_where(lambda t: t.dst == 1))  # type: ignore[arg-type]
    net.send(0, 1, b"x")
    net.run(lambda: bool(net.nodes[0].failed))
    assert net.nodes[0].transport.stats()["probes_sent"] == 6  # the 7th round declares it dead
    assert len(net.controls(src=0)) == 6  # all PINGs, at a fixed interval
    assert {c.msg_type for c in net.controls(src=0)} == {MsgType.PING}


def test_a_silent_peer_with_data_outstanding_is_probed_and_its_answers_keep_it_alive() -> None:
    def drop_data(t: Transit) -> bool:  # only data is lost: PING and PONG get through
        return isinstance(t.packet, DataPacket)

    net = Net(2, test_config(dead_peer_timeout_s=0.5, dead_peer_probes=3), drop_where(drop_data))  # type: ignore[arg-type]
    net.send(0, 1, b"x")
    net.advance(5.0)
    node = net.nodes[0]
    assert node.dead == []
    assert node.failed == []
    assert node.transport.stats()["probes_sent"] >= 40
    assert net.nodes[1].transport.stats()["probes_answered"] >= 40


def test_a_dead_peer_that_comes_back_is_usable_again_and_failed_sends_stay_failed() -> None:
    bad = BadNetwork(1)
    bad.cut_off(1, at=0.0)
    net = Net(2, test_config(dead_peer_timeout_s=0.5, dead_peer_probes=3), bad)
    lost = net.send(0, 1, b"a" * 100)
    net.run(lambda: bool(net.nodes[0].dead))
    node = net.nodes[0]
    assert [(f.handle, f.reason) for f in node.failed] == [(lost, "peer_dead")]
    refused = net.send(0, 1, b"b")
    assert node.failed[-1].handle == refused  # still DEAD: fails at once
    del bad.cut[1]
    net.send(1, 0, b"hello")  # anything from it is life
    net.run(lambda: node.transport.peer_state(1) is PeerState.ALIVE)
    later = net.send(0, 1, b"c")
    net.run()
    assert [c.handle for c in node.completed] == [later]
    assert [f.handle for f in node.failed] == [lost, refused]
    assert net.nodes[1].delivered[-1].payload == b"c"
    assert node.transport.stats()["peers_revived"] == 1


def test_a_refusal_that_lasts_ends_no_buffer_never_peer_dead() -> None:
    config = test_config(no_buffer_timeout_s=2.0, dead_peer_timeout_s=0.5, dead_peer_probes=3)
    net = Net(2, config, BadNetwork(3, loss=0.3), open_ports=())
    net.nodes[1].ports.open(0, tokens=0)
    handle = net.send(0, 1, b"x" * 100)
    net.run(lambda: bool(net.nodes[0].failed))
    assert [(f.handle, f.reason) for f in net.nodes[0].failed] == [(handle, "no_buffer")]
    assert net.now >= config.no_buffer_timeout_s
    assert net.nodes[0].dead == []


def test_control_from_a_suspect_peer_makes_it_alive_again() -> None:
    blocked = {"on": True}
    net = Net(2, route=drop_where(lambda t: blocked["on"]))  # type: ignore[arg-type]
    net.send(0, 1, b"x")
    net.run(lambda: net.nodes[0].transport.peer_state(1) is PeerState.SUSPECT)
    blocked["on"] = False
    net.run()
    assert net.nodes[0].transport.peer_state(1) is PeerState.ALIVE
    assert len(net.nodes[0].completed) == 1


# -- ACK batching ---------------------------------------------------------------------------


def test_acks_wait_for_flush_unless_ack_every_is_reached() -> None:
    net = Net(2, test_config(ack_every=4))
    src = net.nodes[0].transport
    dst = net.nodes[1].transport
    sent = src.send(
        now=0.0, src_port=0, dst_node=1, dst_port=0, msg_type=MsgType.GM_DATA,
        payload=b"x" * (MTU * 5), handle=1,
    )  # fmt: skip
    packets = [a.packet for a in sent if isinstance(a, SendPacket)]
    assert len(packets) == 5
    out = []
    for p in packets[:3]:
        assert isinstance(p, DataPacket)
        out += dst.on_data(p, now=0.0)
    assert out == []  # three packets, no ACK yet
    out = dst.on_data(packets[3], now=0.0)  # type: ignore[arg-type]
    [ack] = [a.packet for a in out if isinstance(a, SendPacket)]
    assert (ack.msg_type, ack.seq) == (MsgType.ACK, 4)
    assert dst.flush(now=0.0) == []
    out = dst.on_data(packets[4], now=0.0)  # type: ignore[arg-type]
    assert [type(a).__name__ for a in out] == ["Deliver"]
    [flushed] = dst.flush(now=0.0)
    assert isinstance(flushed, SendPacket)
    assert flushed.packet.seq == 5
    assert dst.flush(now=0.0) == []
    dst.on_data(packets[0], now=0.0)  # type: ignore[arg-type]  # a duplicate: re-ACK at flush
    [again] = dst.flush(now=0.0)
    assert again.packet.seq == 5  # type: ignore[union-attr]
    stats = dst.stats()
    assert stats["acks_sent"] == 3
    assert stats["drops"] == {"duplicate": 1}


def test_delayed_ack_waits_for_its_deadline_and_covers_what_came_meanwhile() -> None:
    net = Net(2, test_config(ack_every=16, ack_delay_s=0.002))
    src, dst = net.nodes[0].transport, net.nodes[1].transport
    sent = src.send(
        now=0.0, src_port=0, dst_node=1, dst_port=0, msg_type=MsgType.GM_DATA,
        payload=b"x" * (MTU * 3), handle=1,
    )  # fmt: skip
    packets = [a.packet for a in sent if isinstance(a, SendPacket)]
    dst.on_data(packets[0], now=0.0)  # type: ignore[arg-type]
    assert dst.next_deadline() == 0.002
    assert dst.flush(now=0.001) == []  # the end of a burst does not force it
    dst.on_data(packets[1], now=0.0015)  # type: ignore[arg-type]
    assert dst.next_deadline() == 0.002  # the first packet's deadline holds
    [ack] = dst.on_timer(now=0.002)
    assert isinstance(ack, SendPacket)
    assert (ack.packet.msg_type, ack.packet.seq) == (MsgType.ACK, 2)
    assert dst.next_deadline() is None
    dst.on_data(packets[0], now=0.003)  # type: ignore[arg-type]  # duplicate: re-ACK at once
    [again] = dst.flush(now=0.003)
    assert again.packet.seq == 2  # type: ignore[union-attr]


# -- closing ports --------------------------------------------------------------------------


def test_close_port_fails_pending_sends_and_the_stream_stays_usable() -> None:
    blocked = {"on": True}
    net = Net(2, test_config(window=2), drop_where(lambda t: blocked["on"]))  # type: ignore[arg-type]
    handles = [net.send(0, 1, bytes([i])) for i in range(3)]
    net.advance(0.001)
    net.apply(0, net.nodes[0].transport.close_port(0, now=net.now))
    assert [(f.handle, f.reason) for f in net.nodes[0].failed] == [(h, "closed") for h in handles]
    blocked["on"] = False
    net.send(0, 1, b"new")  # the port was opened again by another host
    net.run()
    # the two already on the wire still travel (the sequence must stay whole); the third
    # never left and is gone; the new message follows without a gap
    assert [d.payload for d in net.nodes[1].delivered] == [b"\0", b"\1", b"new"]
    assert [c.handle for c in net.nodes[0].completed] == [4]
    assert len(net.nodes[0].failed) == 3


def test_receiver_close_port_aborts_the_partial_message_and_the_stream_goes_on() -> None:
    held = {"on": False}

    def hold_later_fragments(t: Transit) -> bool:
        p = t.packet
        return held["on"] and isinstance(p, DataPacket) and p.seq > 0

    net = Net(2, test_config(ack_every=1), drop_where(hold_later_fragments))  # type: ignore[arg-type]
    held["on"] = True
    net.send(0, 1, b"p" * (MTU * 3))
    net.advance(0.001)
    receiver = net.nodes[1]
    receiver.ports.close(0)
    net.apply(1, receiver.transport.close_port(0, now=net.now))
    held["on"] = False
    net.run()
    assert receiver.delivered == []
    # never SENT: the receiver gave up on it and said so (NACK ABORTED), naming the peer
    assert net.nodes[0].completed == []
    assert [(f.dst_node, f.reason) for f in net.nodes[0].failed] == [(1, "aborted")]
    assert receiver.transport.stats()["drops"]["port_closed"] == 1  # type: ignore[index]
    receiver.ports.open(0)
    net.send(0, 1, b"next")
    net.run()
    assert [d.payload for d in receiver.delivered] == [b"next"]


# -- odd input ------------------------------------------------------------------------------


def test_unexpected_unknown_and_dead_peer_controls_are_counted_drops() -> None:
    t = Transport(0, test_config(), lambda *_: (Admission.OK, []))
    mcast = ControlPacket(MsgType.MCAST_ACK, 0, 1, 0, 0, 0)
    unknown = ControlPacket(MsgType.ACK, 0, 1, 0, 0, 0)
    elsewhere = ControlPacket(MsgType.ACK, 0, 1, 7, 0, 0)
    no_reason = ControlPacket(MsgType.NACK, 0, 1, 0, 0, 0)
    for p in (mcast, unknown, elsewhere):
        assert t.on_control(p, now=0.0) == []
    t.send(now=0.0, src_port=0, dst_node=1, dst_port=0, msg_type=MsgType.GM_DATA, payload=b"",
           handle=1)  # fmt: skip
    assert t.on_control(no_reason, now=0.0) == []
    assert t.stats()["drops"] == {
        "unexpected_control": 1,
        "unknown_stream": 1,
        "misrouted": 1,
        "nack_without_reason": 1,
    }


def test_empty_message_and_stats_shape() -> None:
    net = Net(2)
    net.send(0, 1, b"")
    net.run()
    [d] = net.nodes[1].delivered
    assert (d.payload, d.msg_type, d.src_node, d.port) == (b"", MsgType.GM_DATA, 0, 0)
    stats = net.nodes[0].transport.stats()
    assert stats["packets_sent"] == 1
    assert stats["retransmissions"] == 0
    assert stats["messages_completed"] == 1
    peer = stats["peers"]["1"]  # type: ignore[index]
    assert peer["state"] == "alive"
    assert math.isclose(peer["srtt"], 2 * 50e-6)
    assert json.loads(json.dumps(stats)) == stats


@pytest.mark.parametrize(
    "bad",
    [
        {"src_port": -1},
        {"dst_port": 0x10000},
        {"dst_node": 0x10000},
        {"payload": b"x" * ((1 << 16) + 1)},
        {"am_handler": 0x10000},
        {"args": (0, 0, 0, 1 << 32)},
    ],
)
def test_send_misuse_raises_usage_error(bad: dict[str, object]) -> None:
    t = Transport(0, test_config(), lambda *_: (Admission.OK, []))
    fields: dict[str, object] = {
        "now": 0.0, "src_port": 0, "dst_node": 1, "dst_port": 0,
        "msg_type": MsgType.GM_DATA, "payload": b"", "handle": 1,
    }  # fmt: skip
    fields.update(bad)
    with pytest.raises(UsageError):
        t.send(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [{"mtu": 0}, {"mtu": 70000}, {"window": 0}, {"ack_every": 0}, {"rto_min_s": 0.0},
     {"no_buffer_retry_s": 0.0}, {"max_message": -1}],
)  # fmt: skip
def test_bad_config_raises_usage_error(bad: dict[str, object]) -> None:
    config = dataclasses.replace(TransportConfig(), **bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        Transport(0, config, lambda *_: (Admission.OK, []))


def test_stream_key_names_its_fields() -> None:
    # A plain tuple since issue 29 (a NamedTuple's __new__ is interpreted code when compiled):
    # its fields are (src_port, dst_node, dst_port), the order the transport keys streams by
    assert StreamKey == tuple[int, int, int]
    transport = Transport(0, test_config(), lambda *_: (Admission.OK, []))
    transport.send(now=0.0, src_port=1, dst_node=2, dst_port=3, msg_type=MsgType.GM_DATA,
                   payload=b"x", handle=7)  # fmt: skip
    assert list(transport._senders) == [(1, 2, 3)]
