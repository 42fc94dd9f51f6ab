"""NicCore's multicast wiring (seed 001) on netsim's virtual network: host records in,
datagrams between cores, host events out. No sockets: the link delivers Transmit actions,
drops what a test's ``drop`` hook says, and time only moves to the next arrival or deadline."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from emucluster.offload.nic_mcast.trees import binomial_tree, flat_tree
from nicd import hostlink as hl
from nicd.config import NicConfig
from nicd.link.wire import ControlPacket, DataPacket, MsgType
from tests.unit.netsim import NicNet, Transit, perfect, sent_handles

CONN = 1  # every core's host connection id
PORT = 2
GROUP = 0x8001

Drop = Callable[[int, int, DataPacket | ControlPacket], bool]


class Cluster(NicNet):
    """N NicCores, one host port each, on netsim's virtual link (lossless unless the ``drop``
    hook says otherwise)."""

    def __init__(self, n: int, *, forward_first: bool = False, tokens: int = 16) -> None:
        configs = [NicConfig(i, "/tmp", mcast_forward_first=forward_first) for i in range(n)]
        super().__init__(configs, self._route, conn=CONN)
        self.host = self.hosts
        self.drop: Drop = lambda src, dst, packet: False
        for i in range(n):
            self.request(i, hl.OpenReq(PORT))
            self.request(i, hl.ProvideReq(tokens))

    def _route(self, t: Transit) -> list[tuple[float, bytes]]:
        return [] if self.drop(t.src, t.dst, t.packet) else perfect(t)

    def post(self, node: int, parent: int | None, kids: tuple[int, ...], root: int = 0) -> None:
        self.request(node, hl.McastGroupReq(GROUP, root, parent, kids))
        assert self.host[node].pop() == hl.McastGroupOk(GROUP)

    def events(self, node: int, kind: type[hl.HostRecord]) -> list[hl.HostRecord]:
        return [r for r in self.host[node] if isinstance(r, kind)]

    def sent(self, node: int) -> list[int]:
        return sent_handles(self.host[node])

    def mcast_stats(self, node: int) -> dict[str, object]:
        stats = self.cores[node].stats()["mcast"]
        assert isinstance(stats, dict)
        return stats


def chain(c: Cluster) -> None:
    """0 -> 1 -> 2 (node 1 forwards)."""
    c.post(0, None, (1,))
    c.post(1, 0, (2,))
    c.post(2, 1, ())


def test_multicast_is_delivered_down_a_chain_and_completes_once_acked() -> None:
    c = Cluster(3)
    chain(c)
    payload = bytes(range(256)) * 40  # 10 KiB: three packets at the 4 KiB MTU
    c.request(0, hl.McastSendReq(11, GROUP, payload, 5, (1, 2, 3, 4)))
    c.run(lambda: bool(c.events(2, hl.RecvEvent)) and 11 in c.sent(0))
    for node in (1, 2):
        (event,) = c.events(node, hl.RecvEvent)
        assert event == hl.RecvEvent(0, PORT, payload, int(MsgType.MCAST_DATA), 5, (1, 2, 3, 4),
                                     GROUP)  # fmt: skip
    assert c.sent(0) == [11]
    assert c.mcast_stats(1)["forwarded"] == 3
    assert c.mcast_stats(0)["messages_sent"] == 1
    assert c.mcast_stats(0)["data_sent"] == 3


def test_lost_packet_is_resent_only_to_the_child_that_missed_it() -> None:
    c = Cluster(3)
    c.post(0, None, (1, 2))
    c.post(1, 0, ())
    c.post(2, 0, ())
    lost: list[int] = []

    def drop(src: int, dst: int, packet: DataPacket | ControlPacket) -> bool:
        if dst == 2 and packet.msg_type is MsgType.MCAST_DATA and not lost:
            lost.append(dst)
            return True
        return False

    c.drop = drop
    c.request(0, hl.McastSendReq(1, GROUP, b"once", 0, (0, 0, 0, 0)))
    c.run(lambda: 1 in c.sent(0))
    assert [e.payload for e in c.events(1, hl.RecvEvent)] == [b"once"]  # type: ignore[attr-defined]
    assert [e.payload for e in c.events(2, hl.RecvEvent)] == [b"once"]  # type: ignore[attr-defined]
    assert c.mcast_stats(0)["retransmissions_per_child"] == {"2": 1}


def test_lost_acks_of_one_child_only() -> None:
    c = Cluster(3)
    c.post(0, None, (1, 2))
    c.post(1, 0, ())
    c.post(2, 0, ())
    dropped = [0]

    def drop(src: int, dst: int, packet: DataPacket | ControlPacket) -> bool:
        if src == 2 and packet.msg_type is MsgType.MCAST_ACK and dropped[0] < 2:
            dropped[0] += 1
            return True
        return False

    c.drop = drop
    for h in range(3):
        c.request(0, hl.McastSendReq(h + 1, GROUP, b"m%d" % h, 0, (0, 0, 0, 0)))
    c.run(lambda: sorted(c.sent(0)) == [1, 2, 3])
    assert len(c.events(2, hl.RecvEvent)) == 3  # duplicates were not delivered again
    per_child = c.mcast_stats(0)["retransmissions_per_child"]
    assert isinstance(per_child, dict)
    assert set(per_child) == {"2"}


def test_dead_child_becomes_an_error_event_at_its_parent() -> None:
    c = Cluster(3)
    chain(c)
    c.dead.add(2)
    c.request(0, hl.McastSendReq(4, GROUP, b"x", 0, (0, 0, 0, 0)))
    c.run(lambda: bool(c.events(1, hl.McastErrorEvent)) and 4 in c.sent(0))
    (error,) = c.events(1, hl.McastErrorEvent)
    assert error == hl.McastErrorEvent(GROUP, 2, "retries")
    assert c.mcast_stats(1)["children_dead"] == 1
    assert c.events(0, hl.ErrorEvent) == []  # the root's own child acknowledged


def test_a_root_message_to_a_dead_child_ends_in_one_error() -> None:
    c = Cluster(2)
    c.post(0, None, (1,))
    c.post(1, 0, ())
    c.dead.add(1)
    c.request(0, hl.McastSendReq(9, GROUP, b"x", 0, (0, 0, 0, 0)))
    c.run(lambda: bool(c.events(0, hl.ErrorEvent)))
    (error,) = c.events(0, hl.ErrorEvent)
    assert error == hl.ErrorEvent(9, 1, "mcast_child_dead")
    assert c.events(0, hl.McastErrorEvent) == [hl.McastErrorEvent(GROUP, 1, "retries")]
    assert c.cores[0].ports.get(PORT).send_tokens == 64  # type: ignore[union-attr]


def test_a_member_that_posts_its_group_late_is_waited_for_not_killed() -> None:
    c = Cluster(2)
    c.post(0, None, (1,))
    c.request(0, hl.McastSendReq(1, GROUP, b"early", 0, (0, 0, 0, 0)))
    c.run(lambda: c.now > 20.0)  # far beyond the retry limit's worth of timeouts
    assert c.events(0, hl.McastErrorEvent) == []
    assert c.mcast_stats(0)["busy_holds"] > 8
    c.post(1, 0, ())
    c.run(lambda: 1 in c.sent(0))
    assert [e.payload for e in c.events(1, hl.RecvEvent)] == [b"early"]  # type: ignore[attr-defined]


def test_a_freed_group_finishes_its_sends_and_never_feeds_the_id_s_next_group() -> None:
    """Issue 17 at the NICs: 0 -> (1, 2), 2 -> 3 under epoch 0; node 2's and node 3's ACKs
    are lost, so the root's message and node 2's forward are unfinished when every member
    frees the group; then the id is posted again as 0 -> 3 under epoch 1. The root's old
    message must still end SENT (a free is no failure), node 2's forward must finish
    (node 3 re-acknowledges its resends under the old epoch: no dead child, no ERROR), and
    node 3 must get the new group's message once and nothing of the old group again."""
    c = Cluster(4)
    c.post(0, None, (1, 2))
    c.post(1, 0, ())
    c.post(2, 0, (3,))
    c.post(3, 2, ())
    lose_acks = [True]

    def drop(src: int, dst: int, packet: DataPacket | ControlPacket) -> bool:
        return lose_acks[0] and src in (2, 3) and packet.msg_type is MsgType.MCAST_ACK

    c.drop = drop
    c.request(0, hl.McastSendReq(1, GROUP, b"old", 0, (0, 0, 0, 0)))
    c.run(lambda: bool(c.events(3, hl.RecvEvent)))
    assert 1 not in c.sent(0)
    for node in range(4):
        c.request(node, hl.McastFreeReq(GROUP))
        assert c.host[node].pop() == hl.McastGroupOk(GROUP)
    for node, parent, kids in ((0, None, (3,)), (3, 0, ())):
        c.request(node, hl.McastGroupReq(GROUP, 0, parent, kids, 1))
        assert c.host[node].pop() == hl.McastGroupOk(GROUP)
    c.run(lambda: c.now > 0.5)  # old resends meet the new group at node 3
    lose_acks[0] = False
    c.request(0, hl.McastSendReq(2, GROUP, b"new", 0, (0, 0, 0, 0)))
    c.run(lambda: sorted(c.sent(0)) == [1, 2])
    c.run()  # until idle: beyond any dead-child timeout and every retired linger
    assert c.now > NicConfig(0, "/tmp").transport.dead_peer_timeout_s
    assert [e.payload for e in c.events(3, hl.RecvEvent)] == [b"old", b"new"]  # type: ignore[attr-defined]
    assert [e.payload for e in c.events(1, hl.RecvEvent)] == [b"old"]  # type: ignore[attr-defined]
    for node in range(4):
        assert c.events(node, hl.ErrorEvent) == []
        assert c.events(node, hl.McastErrorEvent) == []
        assert c.mcast_stats(node)["retired_kept"] == 0
    assert c.mcast_stats(2)["retired"] == 1  # its forward was still under way
    drops = c.mcast_stats(3)["drops"]
    assert isinstance(drops, dict)
    assert drops.get("duplicate", 0) > 0  # node 2's resends, re-acknowledged by the old side


@pytest.mark.parametrize("seed", range(8))
def test_group_id_reuse_over_a_lossy_link(seed: int) -> None:
    """Three lives of one id (three trees of 5 nodes, epochs 0, 1, 2), each freed by every
    member as soon as its host has the message (the root at once), with 20 % of all
    datagrams lost: every message reaches exactly its own tree's members once, and nothing
    ends in an error."""
    rng = random.Random(seed)
    print("seed", seed)
    c = Cluster(5)
    c.drop = lambda src, dst, packet: rng.random() < 0.2
    got: dict[int, list[bytes]] = {n: [] for n in range(5)}
    want: dict[int, list[bytes]] = {n: [] for n in range(5)}
    for epoch in range(3):
        members = [0, *sorted(rng.sample(range(1, 5), rng.randint(1, 4)))]
        tree = binomial_tree(0, members) if epoch % 2 else flat_tree(0, members)
        for node in members:
            c.request(node, hl.McastGroupReq(GROUP, 0, tree.parent(node), tree.children(node),
                                             epoch))  # fmt: skip
            assert c.host[node].pop() == hl.McastGroupOk(GROUP)
        body = b"life %d" % epoch
        for node in members[1:]:
            want[node].append(body)
        c.request(0, hl.McastSendReq(epoch + 1, GROUP, body, 0, (0, 0, 0, 0)))
        c.request(0, hl.McastFreeReq(GROUP))
        waiting = set(members[1:])
        while waiting:
            c.run(lambda: any(c.events(n, hl.RecvEvent) for n in waiting))  # noqa: B023
            for n in list(waiting):
                for event in c.events(n, hl.RecvEvent):
                    got[n].append(event.payload)  # type: ignore[attr-defined]
                    c.host[n].remove(event)
                    waiting.discard(n)
                    c.request(n, hl.McastFreeReq(GROUP))
    c.run(lambda: sorted(c.sent(0)) == [1, 2, 3])
    c.run()  # until idle: every retired group drained and past its linger
    for node in range(5):
        assert c.events(node, hl.ErrorEvent) == []
        assert c.events(node, hl.McastErrorEvent) == []
        assert c.events(node, hl.RecvEvent) == []  # nothing delivered twice or late
        assert c.mcast_stats(node)["retired_kept"] == 0
    assert got == want


@pytest.mark.parametrize("forward_first", [False, True])
def test_forwarding_order_at_an_internal_nic(forward_first: bool) -> None:
    c = Cluster(3, forward_first=forward_first)
    chain(c)
    c.request(0, hl.McastSendReq(1, GROUP, b"m", 0, (0, 0, 0, 0)))
    _src, _dst, datagram = c.pop_datagram()
    actions = c.cores[1].on_datagram(datagram, c.addrs[0], now=0.0)
    kinds = [type(a).__name__ for a in actions]
    first_to_host, first_forward = kinds.index("ToHost"), kinds.index("Transmit")
    assert (first_forward < first_to_host) is forward_first


def test_multisend_to_a_list_folds_into_one_completion() -> None:
    c = Cluster(4)
    c.request(0, hl.MultiSendReq(21, (1, 2, 3), PORT, b"all", 1, 0, (9, 0, 0, 0)))
    c.run(lambda: 21 in c.sent(0))
    for node in (1, 2, 3):
        assert c.events(node, hl.RecvEvent) == [hl.RecvEvent(0, PORT, b"all", 1, 0, (9, 0, 0, 0))]
    assert c.sent(0) == [21]
    assert c.cores[0].ports.get(PORT).send_tokens == 64  # type: ignore[union-attr]
    c.request(0, hl.MultiSendReq(22, (1, 7), PORT, b"x"))
    assert c.events(0, hl.ErrorEvent) == [hl.ErrorEvent(22, 1, "no_route")]


def test_only_a_multisend_s_completions_go_to_the_multicast_service() -> None:
    # NicCore asks a service's on_done only for the sends in its owned_sends: the multisend
    # is there while its copies are in flight, a plain send never is, and both end once
    c = Cluster(3)
    owned = c.cores[0].mcast.owned_sends
    c.request(0, hl.MultiSendReq(31, (1, 2), PORT, b"both"))
    c.request(0, hl.SendReq(32, 1, PORT, b"one"))
    assert (PORT, 31) in owned
    assert (PORT, 32) not in owned
    c.run(lambda: {31, 32} <= set(c.sent(0)))
    assert sorted(c.sent(0)) == [31, 32]
    assert (PORT, 31) not in owned
    assert c.events(1, hl.RecvEvent) == [
        hl.RecvEvent(0, PORT, b"both"),
        hl.RecvEvent(0, PORT, b"one"),
    ]


def test_host_misuse_is_refused_and_gives_its_token_back() -> None:
    c = Cluster(2)
    c.request(0, hl.McastSendReq(1, GROUP, b"x", 0, (0, 0, 0, 0)))
    (refused,) = c.events(0, hl.Refused)
    assert "does not exist" in refused.reason or "not this port" in refused.reason  # type: ignore[attr-defined]
    assert c.cores[0].ports.get(PORT).send_tokens == 64  # type: ignore[union-attr]
    c.request(1, hl.McastGroupReq(GROUP, 0, None, (0,)))  # not the root, no parent
    assert len(c.events(1, hl.Refused)) == 1
    c.request(0, hl.MultiSendReq(2, (1, 1), PORT, b"x"))
    assert len(c.events(0, hl.Refused)) == 2
    c.request(0, hl.McastFreeReq(GROUP))
    assert len(c.events(0, hl.Refused)) == 3


@pytest.mark.parametrize(
    "record",
    [
        hl.McastGroupReq(0x8001, 3, 1, (4, 5, 6), 7, True),
        hl.McastGroupReq(9, 0, None, ()),
        hl.McastFreeReq(12),
        hl.McastSendReq(5, 77, b"payload" * 20_000, 3, (1, 2, 3, 4)),
        hl.MultiSendReq(6, (1, 2, 3), 2, b"z" * 70_000, 30, 4, (5, 6, 7, 8)),
        hl.MultiSendReq(7, (9,), 2, b""),
        hl.McastGroupOk(4),
        hl.McastErrorEvent(4, 2, "retries"),
    ],
)
def test_host_records_round_trip(record: hl.HostRecord) -> None:
    assembler = hl.Assembler()
    parts = hl.encode_record(record)
    decoded = [assembler.feed(p) for p in parts]
    assert decoded[:-1] == [None] * (len(parts) - 1)
    assert decoded[-1] == record


def test_malformed_multicast_records_are_protocol_violations() -> None:
    from nicd.errors import ProtocolViolation

    (good,) = hl.encode_record(hl.McastGroupReq(1, 0, None, (1, 2)))
    for bad in (good[:-1], good + b"\0", bytes([hl.HostOp.MCAST_GROUP, 2]) + good[2:]):
        with pytest.raises(ProtocolViolation):
            hl.Assembler().feed(bad)
    (multi,) = hl.encode_record(hl.MultiSendReq(1, (1, 2, 3), 2, b""))
    with pytest.raises(ProtocolViolation):
        hl.Assembler().feed(multi[:-3])
    with pytest.raises(ProtocolViolation):
        hl.Assembler().feed(bytes([69]))
