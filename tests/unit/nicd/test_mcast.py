"""mcast.py (+ mcast_send, mcast_recv): multisend, forwarding, per-child reliability, groups.

Unit tests drive engines by hand on a fake clock (start at 0, jump to ``next_deadline()``);
the property tests run whole trees on :mod:`tests.unit.mcastsim` over a seeded bad network.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emucluster.offload.nic_mcast.trees import binomial_tree, flat_tree, postal_tree
from nicd.core.actions import Deliver, McastAction, McastChildDead, McastDone, SendPacket
from nicd.errors import UsageError
from nicd.link.reliable import Admission
from nicd.link.wire import (
    ControlPacket,
    DataPacket,
    FragFlags,
    McastAckKind,
    MsgType,
    decode_mcast_ack_untrusted,
    mcast_ack_packet,
)
from nicd.mcast.config import McastConfig
from nicd.mcast.engine import GroupSpec, McastEngine
from tests.unit.mcastsim import GROUP, PORT, McastNet, fast_config
from tests.unit.netsim import BadNetwork

ROOT = 0
KIDS = (1, 2, 3)


def root_engine(**overrides: object) -> McastEngine:
    engine = McastEngine(node_id=ROOT, config=fast_config(ack_every=1, **overrides))
    engine.create_group(GroupSpec(GROUP, ROOT, None, KIDS, PORT))
    return engine


def data(out: list[McastAction]) -> list[SendPacket]:
    return [a for a in out if isinstance(a, SendPacket) and isinstance(a.packet, DataPacket)]


def acks(out: list[McastAction]) -> list[SendPacket]:
    return [a for a in out if isinstance(a, SendPacket) and isinstance(a.packet, ControlPacket)]


def ack(
    child: int, seq: int, kind: McastAckKind = McastAckKind.ACK, epoch: int = 0
) -> ControlPacket:
    return mcast_ack_packet(GROUP, epoch, seq, kind, child, ROOT)


def packet_to(p: DataPacket, node: int, src: int = ROOT) -> DataPacket:
    """``p`` as it arrives at ``node`` from ``src``."""
    return DataPacket(
        p.msg_type, p.flags, p.token, p.seq, src, p.src_port, node, p.dst_port, p.msg_len,
        p.offset, p.payload, p.mcast_group, p.am_handler, p.args,
    )  # fmt: skip


# -- multisend at the root ---------------------------------------------------------------------


def test_multisend_rewrites_only_the_destination_packet_by_packet() -> None:
    engine = root_engine()
    payload = bytes(range(150))  # 3 packets of <= 64 bytes
    out = engine.multicast(GROUP, payload, handle=9, now=0.0, am_handler=4, args=(1, 2, 3, 4))
    sends = data(out)
    assert [(s.node, s.packet.seq) for s in sends] == [(c, q) for q in range(3) for c in KIDS]
    for s in sends:
        p = s.packet
        assert isinstance(p, DataPacket)
        assert (p.msg_type, p.mcast_group, p.src_node, p.src_port, p.dst_node) == (
            MsgType.MCAST_DATA, GROUP, ROOT, PORT, s.node
        )  # fmt: skip
        assert (p.msg_len, p.am_handler, p.args) == (150, 4, (1, 2, 3, 4))
        assert p.payload == payload[p.offset : p.offset + 64]
    flags = [s.packet.flags for s in sends if s.node == 1 and isinstance(s.packet, DataPacket)]
    assert flags == [FragFlags.FIRST, FragFlags.NONE, FragFlags.LAST]
    assert engine.view(GROUP).records == 3  # one record per packet, shared by the 3 children
    assert engine.stats.data_sent == 9


def test_record_released_only_when_every_child_acked() -> None:
    engine = root_engine()
    engine.multicast(GROUP, bytes(150), handle=9, now=0.0)
    sender = engine.sender(GROUP)
    assert sender is not None
    assert engine.on_ack(ack(1, 3), now=0.001) == []
    assert engine.on_ack(ack(2, 2), now=0.001) == []
    assert engine.view(GROUP).records == 3
    assert sender.pending(0) == {3}
    assert sender.pending(2) == {2, 3}
    out = engine.on_ack(ack(3, 3), now=0.002)
    assert engine.view(GROUP).records == 1  # seq 2 still waits for child 2
    assert out == []
    out = engine.on_ack(ack(2, 3), now=0.002)
    assert out == [McastDone(PORT, GROUP, 9, (), "ok")]
    view = engine.view(GROUP)
    assert (view.records, view.send_seq, view.acked) == (0, 3, {1: 3, 2: 3, 3: 3})
    assert engine.next_deadline() is None


def test_timeout_retransmits_only_to_children_that_have_not_acked() -> None:
    engine = root_engine()
    engine.multicast(GROUP, bytes(150), handle=1, now=0.0)
    engine.on_ack(ack(1, 3), now=0.001)
    engine.on_ack(ack(2, 1), now=0.001)
    resent: list[tuple[int, int]] = []
    for _ in range(2):  # child 2 has an RTT sample now, child 3 the initial RTO: two timers
        deadline = engine.next_deadline()
        assert deadline is not None
        assert engine.on_timer(now=deadline - 1e-6) == []
        resent += [(s.node, s.packet.seq) for s in data(engine.on_timer(now=deadline))]
    assert sorted(resent) == [(2, 1), (2, 2), (3, 0), (3, 1), (3, 2)]
    assert engine.stats.retransmissions == 5


def test_losing_one_childs_acks_only_costs_that_child() -> None:
    engine = root_engine()
    now = 0.0
    engine.multicast(GROUP, b"x" * 10, handle=1, now=now)
    engine.on_ack(ack(1, 1), now=0.001)
    engine.on_ack(ack(2, 1), now=0.001)
    resent: list[int] = []
    for _ in range(3):  # child 3's ACKs are lost three times
        now = engine.next_deadline() or now
        resent += [s.node for s in data(engine.on_timer(now=now))]
    assert resent == [3, 3, 3]
    out = engine.on_ack(ack(3, 1), now=now + 0.001)  # the re-ACK of a duplicate gets through
    assert out == [McastDone(PORT, GROUP, 1, (), "ok")]
    assert engine.next_deadline() is None


def test_dead_child_becomes_an_error_at_its_parent_not_a_hang() -> None:
    engine = root_engine(max_retries=3, dead_child_timeout_s=0.001)
    engine.multicast(GROUP, bytes(100), handle=5, now=0.0)
    engine.on_ack(ack(1, 2), now=0.001)
    engine.on_ack(ack(2, 2), now=0.001)
    events: list[McastAction] = []
    now, rounds = 0.0, 0
    while (deadline := engine.next_deadline()) is not None:
        rounds += 1
        assert rounds < 50
        now = deadline
        events += engine.on_timer(now=now)
    errors = [a for a in events if not isinstance(a, SendPacket)]
    assert errors == [
        McastChildDead(PORT, GROUP, 3, "retries"),
        McastDone(PORT, GROUP, 5, (3,), "child_dead"),
    ]
    assert sum(1 for s in data(events) if s.node == 3) == 3 * 2  # 3 retries of 2 packets
    assert engine.view(GROUP).dead == {3}
    assert engine.view(GROUP).records == 0
    # Later messages go to the live children only and report the dead one.
    out = engine.multicast(GROUP, b"next", handle=6, now=now)
    assert {s.node for s in data(out)} == {1, 2}
    engine.on_ack(ack(1, 3), now=now)
    assert engine.on_ack(ack(2, 3), now=now) == [McastDone(PORT, GROUP, 6, (3,), "child_dead")]


def test_peer_dead_from_the_transport_kills_the_child_at_once() -> None:
    engine = root_engine()
    engine.multicast(GROUP, b"m", handle=1, now=0.0)
    out = engine.on_peer_dead(2, now=0.001)
    assert out == [McastChildDead(PORT, GROUP, 2, "peer_dead")]
    engine.on_ack(ack(1, 1), now=0.002)
    assert engine.on_ack(ack(3, 1), now=0.002) == [McastDone(PORT, GROUP, 1, (2,), "child_dead")]
    assert engine.on_peer_dead(2, now=0.003) == []


def test_gap_ack_rolls_back_that_child_once_per_round_trip() -> None:
    engine = root_engine()
    engine.multicast(GROUP, bytes(200), handle=1, now=0.0)  # seqs 0-3
    out = engine.on_ack(ack(2, 1, McastAckKind.GAP), now=0.001)
    assert [(s.node, s.packet.seq) for s in data(out)] == [(2, 1), (2, 2), (2, 3)]
    assert data(engine.on_ack(ack(2, 1, McastAckKind.GAP), now=0.0011)) == []  # duplicate GAP
    assert engine.stats.gap_rollbacks == 1


def test_busy_child_is_retried_after_a_timeout_without_dying() -> None:
    engine = root_engine(max_retries=2)
    engine.multicast(GROUP, b"hello", handle=1, now=0.0)
    engine.on_ack(ack(1, 1), now=0.0)
    engine.on_ack(ack(2, 1), now=0.0)
    now = 0.0
    for _ in range(6):  # more BUSY answers than max_retries: still alive
        out = engine.on_ack(ack(3, 0, McastAckKind.BUSY), now=now)
        assert data(out) == []
        deadline = engine.next_deadline()
        assert deadline is not None
        assert deadline > now
        now = deadline
        assert [s.node for s in data(engine.on_timer(now=now))] == [3]
    assert engine.view(GROUP).dead == frozenset()
    assert engine.on_ack(ack(3, 1), now=now) == [McastDone(PORT, GROUP, 1, (), "ok")]


def test_bad_and_foreign_acks_are_counted_drops() -> None:
    engine = root_engine()
    engine.multicast(GROUP, b"m", handle=1, now=0.0)
    bad_kind = ControlPacket(MsgType.MCAST_ACK, 1, 1, ROOT, GROUP, 0xC000)
    assert engine.on_ack(bad_kind, now=0.0) == []
    assert engine.on_ack(ack(9, 1), now=0.0) == []  # not a child
    assert engine.on_ack(ack(1, 5), now=0.0) == []  # beyond what was sent
    assert engine.on_ack(ack(1, 1, epoch=4), now=0.0) == []  # another tree
    other = mcast_ack_packet(GROUP + 1, 0, 1, McastAckKind.ACK, 1, ROOT)
    assert engine.on_ack(other, now=0.0) == []
    drops = engine.stats.drops
    assert drops["mcast_ack_kind"] == drops["ack_from_non_child"] == 1
    assert drops["ack_beyond_sent"] == drops["ack_other_epoch"] == drops["ack_unknown_group"] == 1
    assert engine.view(GROUP).records == 1


# -- receiving and forwarding at an internal node -----------------------------------------------


def internal_engine(*, forward_first: bool, admit: object = None) -> McastEngine:
    engine = McastEngine(
        node_id=1, config=fast_config(forward_first=forward_first, ack_every=1),
        admit=admit,  # type: ignore[arg-type]
    )  # fmt: skip
    engine.create_group(GroupSpec(GROUP, ROOT, ROOT, (4, 5), PORT))
    return engine


def root_packets(payload: bytes) -> list[DataPacket]:
    engine = McastEngine(node_id=ROOT, config=fast_config())
    engine.create_group(GroupSpec(GROUP, ROOT, None, (1,), PORT))
    return [s.packet for s in data(engine.multicast(GROUP, payload, handle=0, now=0.0))]  # type: ignore[misc]


@pytest.mark.parametrize("forward_first", [False, True])
def test_forwarding_order_deliver_first_or_forward_first(forward_first: bool) -> None:
    engine = internal_engine(forward_first=forward_first)
    (p,) = root_packets(b"small")
    out = engine.on_data(p, now=0.0)
    kinds = [
        "deliver" if isinstance(a, Deliver) else "ack" if a in acks(out) else f"fwd{a.node}"  # type: ignore[union-attr]
        for a in out
    ]
    if forward_first:
        assert kinds == ["fwd4", "fwd5", "deliver", "ack"]
    else:
        assert kinds == ["deliver", "fwd4", "fwd5", "ack"]
    delivery = next(a for a in out if isinstance(a, Deliver))
    assert delivery == Deliver(
        PORT, ROOT, PORT, MsgType.MCAST_DATA, b"small", 0, (0, 0, 0, 0), GROUP
    )
    for s in data(out):
        assert isinstance(s.packet, DataPacket)
        assert (s.packet.src_node, s.packet.seq, s.packet.payload) == (1, 0, b"small")
    (a,) = acks(out)
    assert a.node == ROOT
    assert isinstance(a.packet, ControlPacket)
    assert decode_mcast_ack_untrusted(a.packet).seq == 1


def test_forwarding_is_pipelined_per_packet() -> None:
    engine = internal_engine(forward_first=False)
    packets = root_packets(bytes(130))  # 3 packets
    out = engine.on_data(packets[0], now=0.0)
    assert [s.node for s in data(out)] == [4, 5]  # forwarded before the message is complete
    assert not any(isinstance(a, Deliver) for a in out)
    engine.on_data(packets[1], now=0.0)
    out = engine.on_data(packets[2], now=0.0)
    assert [type(a).__name__ for a in out][:3] == ["Deliver", "SendPacket", "SendPacket"]
    view = engine.view(GROUP)
    assert (view.recv_seq, view.send_seq, view.records) == (3, 3, 3)


def test_receiver_drops_duplicates_and_gaps_and_says_so() -> None:
    engine = internal_engine(forward_first=False)
    p0, p1, p2 = root_packets(bytes(130))
    assert data(engine.on_data(p1, now=0.0)) == []  # gap: dropped, one GAP ACK
    out = engine.on_data(p2, now=0.0)
    assert out == []  # same gap: no second GAP
    engine.on_data(p0, now=0.0)
    out = engine.on_data(p0, now=0.001)  # duplicate: re-ACK when the timer fires, at once
    assert out == []
    assert engine.next_deadline() == 0.001
    (a,) = acks(engine.on_timer(now=0.001))
    assert isinstance(a.packet, ControlPacket)
    assert decode_mcast_ack_untrusted(a.packet).seq == 1
    assert engine.stats.drops["out_of_order"] == 2
    assert engine.stats.drops["duplicate"] == 1
    assert engine.stats.acks_sent["gap"] == 1


def test_receiver_refuses_strangers_and_other_epochs() -> None:
    engine = internal_engine(forward_first=False)
    (p,) = root_packets(b"x")
    stranger = packet_to(p, 1, src=9)
    assert engine.on_data(stranger, now=0.0) == []
    old = packet_to(p, 1)
    old.token = 5
    assert engine.on_data(old, now=0.0) == []
    unknown = packet_to(p, 1)
    unknown.mcast_group = GROUP + 1
    (busy,) = engine.on_data(unknown, now=0.0)  # not posted here yet: alive, not ready
    assert isinstance(busy, SendPacket)
    assert isinstance(busy.packet, ControlPacket)
    assert busy.node == p.src_node
    answer = decode_mcast_ack_untrusted(busy.packet)
    assert (answer.group, answer.kind, answer.seq) == (GROUP + 1, McastAckKind.BUSY, 0)
    drops = engine.stats.drops
    assert drops["not_from_parent"] == drops["other_epoch"] == drops["unknown_group"] == 1
    assert engine.view(GROUP).recv_seq == 0


def test_no_receive_token_gives_busy_and_nothing_forwarded() -> None:
    answers = [Admission.NO_BUFFER, Admission.OK]
    engine = internal_engine(forward_first=False, admit=lambda spec, first: answers.pop(0))
    (p,) = root_packets(b"x")
    out = engine.on_data(p, now=0.0)
    assert data(out) == []
    (a,) = acks(out)
    assert isinstance(a.packet, ControlPacket)
    assert decode_mcast_ack_untrusted(a.packet).kind is McastAckKind.BUSY
    out = engine.on_data(p, now=0.01)
    assert [s.node for s in data(out)] == [4, 5]
    assert any(isinstance(x, Deliver) for x in out)


# -- group lifecycle ----------------------------------------------------------------------------


def test_update_and_free_end_unfinished_messages() -> None:
    engine = root_engine()
    engine.multicast(GROUP, b"a", handle=1, now=0.0)
    engine.on_ack(ack(1, 1), now=0.0)
    out = engine.update_group(GroupSpec(GROUP, ROOT, None, (1, 2), PORT, epoch=1), now=0.0)
    assert out == [McastDone(PORT, GROUP, 1, (2, 3), "updated")]
    out = engine.multicast(GROUP, b"b", handle=2, now=0.0)
    assert {(s.node, s.packet.seq, s.packet.token) for s in data(out)} == {(1, 0, 1), (2, 0, 1)}  # type: ignore[union-attr]
    assert engine.on_ack(ack(1, 1, epoch=0), now=0.0) == []  # the old tree's ACK
    assert engine.free_group(GROUP, now=0.0) == [McastDone(PORT, GROUP, 2, (1, 2), "freed")]
    assert engine.groups() == {}
    assert engine.next_deadline() is None


def test_a_retired_group_finishes_its_messages_beside_the_id_s_next_group() -> None:
    """Issue 17: the id is freed (retired) and posted again under a new epoch while a root
    message is unfinished. The old message still ends in one McastDone without failure once
    its ACKs (old epoch) arrive; ACKs never cross between the two; the retired group goes
    when drained."""
    engine = root_engine()
    engine.multicast(GROUP, b"a", handle=1, now=0.0)
    engine.on_ack(ack(1, 1), now=0.0)
    assert engine.retire_group(GROUP, now=0.0) == []  # nothing fails on a free
    assert engine.groups() == {}
    engine.create_group(GroupSpec(GROUP, ROOT, None, (2, 3), PORT, epoch=1))
    out = engine.multicast(GROUP, b"b", handle=2, now=0.0)
    assert {(s.node, s.packet.token) for s in data(out)} == {(2, 1), (3, 1)}  # type: ignore[union-attr]
    assert engine.on_ack(ack(2, 1, epoch=1), now=0.0) == []  # the new tree's: not the old one's
    assert engine.retired()[(GROUP, 0)].acked == {1: 1, 2: 0, 3: 0}
    assert engine.on_ack(ack(2, 1, epoch=0), now=0.0) == []
    assert engine.on_ack(ack(3, 1, epoch=0), now=0.0) == [McastDone(PORT, GROUP, 1, ())]
    assert engine.retired() == {}  # drained: nothing can still come for a root
    assert engine.on_ack(ack(3, 1, epoch=1), now=0.0) == [McastDone(PORT, GROUP, 2, ())]
    assert engine.stats.retired == 1


def test_a_retired_receiver_answers_its_old_parent_beside_the_id_s_next_group() -> None:
    """Node 1 forwards a 2-packet message of epoch 0 to (4, 5); its host frees the group
    after the first packet (a freed communicator's Ibcast may still wait for it) and the id
    is posted again under epoch 1. The old parent's resend of packet 0 is re-acknowledged
    under epoch 0, packet 1 completes the old message (delivered and forwarded by the old
    group), the new group sees none of it, and the retired group goes once drained and
    quiet for ``retired_linger_s``."""
    engine = internal_engine(forward_first=False)
    p0, p1 = root_packets(bytes(100))  # 2 packets
    engine.on_data(p0, now=0.0)
    engine.retire_group(GROUP, now=0.0)
    engine.create_group(GroupSpec(GROUP, ROOT, ROOT, (), PORT, epoch=1))
    assert engine.on_data(p0, now=0.1) == []  # old resend: a duplicate of the retired side
    (a,) = acks(engine.on_timer(now=0.1))
    answer = decode_mcast_ack_untrusted(a.packet)  # type: ignore[arg-type]
    assert (answer.epoch, answer.seq, answer.kind) == (0, 1, McastAckKind.ACK)
    out = engine.on_data(p1, now=0.2)
    (delivery,) = [x for x in out if isinstance(x, Deliver)]
    assert delivery.payload == bytes(100)
    assert sorted(s.node for s in data(out)) == [4, 5]
    assert engine.view(GROUP).recv_seq == 0  # the new group saw none of it
    assert engine.stats.retired_packets == 2
    for child in (4, 5):
        engine.on_ack(mcast_ack_packet(GROUP, 0, 2, McastAckKind.ACK, child, 1), now=0.2)
    assert engine.retired()[(GROUP, 0)].records == 0
    linger = engine.config.retired_linger_s
    engine.on_timer(now=0.2 + linger / 2)
    assert list(engine.retired()) == [(GROUP, 0)]  # still within its linger
    assert engine.next_deadline() == pytest.approx(0.2 + linger)
    engine.on_timer(now=0.2 + linger)
    assert engine.retired() == {}
    assert engine.next_deadline() is None


def test_retired_groups_are_bounded_and_a_reused_epoch_replaces_one() -> None:
    engine = root_engine(max_retired=1)
    engine.multicast(GROUP, b"a", handle=1, now=0.0)
    engine.retire_group(GROUP, now=0.0)
    engine.create_group(GroupSpec(GROUP, ROOT, None, KIDS, PORT, epoch=1))
    engine.multicast(GROUP, b"b", handle=2, now=0.0)
    out = engine.retire_group(GROUP, now=0.0)  # two retired: the oldest must go
    assert out == [McastDone(PORT, GROUP, 1, KIDS, "freed")]
    assert list(engine.retired()) == [(GROUP, 1)]
    out = engine.create_group(GroupSpec(GROUP, ROOT, None, KIDS, PORT, epoch=1))
    assert out == [McastDone(PORT, GROUP, 2, KIDS, "freed")]  # same (id, epoch): cannot coexist
    assert engine.retired() == {}
    assert engine.stats.retired_evicted == 2
    with pytest.raises(UsageError, match="does not exist"):
        engine.retire_group(99, now=0.0)


def test_group_misuse_raises() -> None:
    engine = root_engine()
    with pytest.raises(UsageError, match="exists"):
        engine.create_group(GroupSpec(GROUP, ROOT, None, KIDS, PORT))
    with pytest.raises(UsageError, match="new epoch"):
        engine.update_group(GroupSpec(GROUP, ROOT, None, (1,), PORT), now=0.0)
    with pytest.raises(UsageError, match="does not exist"):
        engine.free_group(99, now=0.0)
    with pytest.raises(UsageError, match="parent is None"):
        engine.create_group(GroupSpec(8, ROOT, 1, (2,), PORT))
    with pytest.raises(UsageError, match="distinct"):
        engine.create_group(GroupSpec(8, ROOT, None, (1, 1), PORT))
    with pytest.raises(UsageError, match="16 bits"):
        engine.create_group(GroupSpec(1 << 16, ROOT, None, (1,), PORT))
    leaf = McastEngine(node_id=2, config=fast_config())
    leaf.create_group(GroupSpec(GROUP, ROOT, 1, (), PORT))
    with pytest.raises(UsageError, match="not the root"):
        leaf.multicast(GROUP, b"x", handle=1, now=0.0)
    with pytest.raises(UsageError, match="max_message"):
        engine.multicast(GROUP, bytes(1 << 17), handle=1, now=0.0)


def test_single_member_group_completes_at_once() -> None:
    engine = McastEngine(node_id=ROOT, config=fast_config())
    engine.create_group(GroupSpec(GROUP, ROOT, None, (), PORT))
    assert engine.multicast(GROUP, b"alone", handle=3, now=0.0) == [McastDone(PORT, GROUP, 3, ())]


# -- whole trees over a bad network ---------------------------------------------------------------


TREES = {
    "binomial": lambda root, members: binomial_tree(root, members),
    "flat": lambda root, members: flat_tree(root, members),
    "postal": lambda root, members: postal_tree(root, members, 3.0, 1.0),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(TREES)),
    members=st.sets(st.integers(0, 30), min_size=2, max_size=8),
    root_index=st.integers(0, 7),
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=6),
    seed=st.integers(0, 2**32 - 1),
    forward_first=st.booleans(),
)
def test_every_member_gets_every_message_once_in_order(
    kind: str,
    members: set[int],
    root_index: int,
    sizes: list[int],
    seed: int,
    forward_first: bool,
) -> None:
    ordered = sorted(members)
    root = ordered[root_index % len(ordered)]
    tree = TREES[kind](root, ordered)
    rng = random.Random(seed)
    route = BadNetwork(seed, loss=0.15, dup=0.1, reorder=0.15, corrupt=0.02)
    net = McastNet(tree, config=fast_config(forward_first=forward_first), route=route)
    messages = [rng.randbytes(size) for size in sizes]
    for handle, payload in enumerate(messages):
        net.multicast(payload, handle)
        for _ in range(rng.randrange(0, 30)):  # let some traffic interleave
            net.step()
    root_log = net.logs[root]
    net.run(lambda: len(root_log.done) == len(messages))
    net.run()  # on to quiescence: forwarders may still wait for their children's ACKs
    assert [d.handle for d in root_log.done] == list(range(len(messages)))
    assert all(d.failed == () for d in root_log.done)
    for node in tree.order:
        if node != root:
            assert net.payloads(node) == messages, f"node {node}"
            assert all(
                d.src_node == root and d.mcast_group == GROUP for d in net.logs[node].delivered
            )
        assert net.engines[node].view(GROUP).records == 0
        assert net.logs[node].dead == []
    assert all(e.next_deadline() is None for e in net.engines.values())


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cut_at=st.floats(0.0, 4e-5))  # before 4 can ACK
def test_a_dead_subtree_turns_into_errors_and_the_rest_still_gets_everything(
    seed: int, cut_at: float
) -> None:
    tree = binomial_tree(0, range(8))  # 0 -> 4, 2, 1; 4 -> 6, 5; 6 -> 7; 2 -> 3
    route = BadNetwork(seed, loss=0.05)
    route.cut_off(4, at=cut_at)
    net = McastNet(tree, config=fast_config(max_retries=4), route=route)
    messages = [bytes([i]) * 100 for i in range(4)]
    for handle, payload in enumerate(messages):
        net.multicast(payload, handle)
    net.run()
    assert [c.child for c in net.logs[0].dead] == [4]
    assert [d.handle for d in net.logs[0].done] == [0, 1, 2, 3]
    for node in (1, 2, 3):
        assert net.payloads(node) == messages
    for node in (4, 5, 6, 7):  # a prefix, in order, never a duplicate
        got = net.payloads(node)
        assert got == messages[: len(got)]
    assert all(e.next_deadline() is None for e in net.engines.values())


def test_internal_host_is_not_needed_for_forwarding() -> None:
    # Node 4's NIC forwards to 5 and 6 on its own: the leaves get the message although no
    # host action at node 4 is ever taken (the net never calls into node 4's host).
    tree = binomial_tree(0, range(8))
    net = McastNet(tree)
    net.multicast(b"skewed", 1)
    net.run()
    got_at = {n: next(t for t, src, p in net.sent if isinstance(p, DataPacket) and p.dst_node == n)
              for n in (4, 5, 6)}  # fmt: skip
    assert got_at[4] < got_at[5]
    assert got_at[4] < got_at[6]
    assert all(p.src_node == 4 for p in net.data_to(5) + net.data_to(6))
    assert net.payloads(5) == net.payloads(6) == [b"skewed"]


# -- liveness of children (issue 14) ----------------------------------------------------------


def child_death_run(seed: int, *, loss: float, busy: bool, horizon: float,
                    kill_at: float | None = None, stall: tuple[float, float] | None = None,
                    every: float | None = None) -> tuple[float | None, int]:  # fmt: skip
    """Root with children 1-3 over a seeded lossy link (both ways); child 3 answers BUSY
    (no receive token) when ``busy``, and is gone from ``kill_at`` on. The root's loop is
    frozen during ``stall`` = (start, length): no timers, and the ACKs wait. With ``every``,
    the root multicasts a new message that often. Return when the root declared a child
    dead (None: never) and the rounds run."""
    rng = random.Random(seed)
    config = McastConfig(mtu=64, window=8, ack_every=1, ack_delay_s=0.0)
    engine = McastEngine(node_id=ROOT, config=config)
    engine.create_group(GroupSpec(GROUP, ROOT, None, KIDS, PORT))
    engine.multicast(GROUP, bytes(100), handle=1, now=0.0)
    expected = {1: 0, 2: 0, 3: 0}
    now, rounds, handle = 0.0, 0, 1
    next_send = every if every is not None else None
    pending: list[tuple[float, int, int, McastAckKind]] = []
    while now < horizon:
        rounds += 1
        if stall is not None and stall[0] <= now < stall[0] + stall[1]:
            now = stall[0] + stall[1]
            events = engine.on_timer(now=now)  # timers first after a stall, then the ACKs
        else:
            deadline = engine.next_deadline()
            arrival = min((p[0] for p in pending), default=None)
            if deadline is None and arrival is None and next_send is None:
                return None, rounds
            now = min(t for t in (deadline, arrival, next_send) if t is not None)
            events = engine.on_timer(now=now) if deadline is not None and deadline <= now else []
            if next_send is not None and every is not None and next_send <= now:
                handle += 1
                events += engine.multicast(GROUP, bytes(100), handle=handle, now=now)
                next_send = now + every
        for when, child, seq, kind in sorted(pending):
            if when <= now:
                pending.remove((when, child, seq, kind))
                events += engine.on_ack(ack(child, seq, kind), now=now)
        for event in events:
            if isinstance(event, McastChildDead):
                return now, rounds
            if not (isinstance(event, SendPacket) and isinstance(event.packet, DataPacket)):
                continue
            child = event.node
            if (kill_at is not None and child == 3 and now >= kill_at) or rng.random() < loss:
                continue
            packet = event.packet
            if busy and child == 3:
                kind = McastAckKind.BUSY
            elif packet.seq == expected[child]:
                expected[child] += 1
                kind = McastAckKind.ACK
            else:
                kind = McastAckKind.GAP if packet.seq > expected[child] else McastAckKind.ACK
            if rng.random() >= loss:  # the ACK's own trip
                pending.append((now + 100e-6, child, expected[child], kind))
    return None, rounds


@pytest.mark.parametrize("busy", [True, False], ids=["busy", "answering"])
def test_no_child_is_declared_dead_falsely_at_30_percent_loss(busy: bool) -> None:
    # 100 seeds x 100 s of children that are alive: one refusing (BUSY) the only message, or
    # all answering a new message every 0.5 s.
    deaths = []
    for seed in range(100):
        every = None if busy else 0.5
        died, _ = child_death_run(seed, loss=0.3, busy=busy, horizon=100.0, every=every)
        if died is not None:
            deaths.append((seed, died))
    assert deaths == [], f"{len(deaths)} of 100 live children declared dead: {deaths}"


@pytest.mark.parametrize("loss", [0.0, 0.3])
def test_killed_child_is_detected_within_5_s(loss: float) -> None:
    for seed in range(20):
        died, _ = child_death_run(seed, loss=loss, busy=True, horizon=20.0, kill_at=1.0)
        assert died is not None, f"seed {seed}: never declared dead"
        assert died - 1.0 <= 5.0, f"seed {seed}: dead only at {died} s"


def test_a_stall_of_the_roots_loop_does_not_kill_a_live_child() -> None:
    for seed in range(20):
        died, _ = child_death_run(seed, loss=0.1, busy=True, horizon=20.0, stall=(1.0, 10.0))
        assert died is None, f"seed {seed}: a stall killed a live child at {died} s"
