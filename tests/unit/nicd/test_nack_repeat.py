"""A go-back-N receiver repeats its GAP NACK while the gap persists (issue 30): a lost NACK
costs about ``nack_repeat_s``, not a whole RTO. Scripted loss on the virtual clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from nicd.core.stats import TransportStats
from nicd.link.reliable import NACK_REPEATS, Admission, GbnReceiver, Verdict
from nicd.link.wire import ControlPacket, DataPacket, MsgType, NackReason
from tests.unit.factories import data_packet
from tests.unit.netsim import Net, Transit, perfect, test_config

if TYPE_CHECKING:
    from nicd.core.actions import SendPacket

REPEAT = 0.005
SLOW_RTO = {"rto_initial_s": 1.0, "rto_min_s": 0.5, "rto_max_s": 2.0}


def _ok(first: DataPacket) -> Verdict:
    return Admission.OK, []


def _receiver() -> tuple[GbnReceiver, TransportStats]:
    stats = TransportStats()
    config = test_config(nack_repeat_s=REPEAT)
    r = GbnReceiver(node_id=3, src_node=1, src_port=2, dst_port=4, config=config, stats=stats)
    return r, stats


def _gap_nack(action: SendPacket | None) -> int:
    assert action is not None
    packet = action.packet
    assert isinstance(packet, ControlPacket)
    assert (packet.msg_type, packet.reason) == (MsgType.NACK, NackReason.GAP)
    return packet.seq


def test_a_persisting_gap_is_nacked_again_with_a_doubling_wait_then_left_to_the_rto() -> None:
    r, stats = _receiver()
    r.on_data(data_packet(seq=0), now=0.0, admit=_ok)
    [first] = r.on_data(data_packet(seq=2), now=0.0, admit=_ok)
    assert _gap_nack(first) == 1  # type: ignore[arg-type]
    assert r.repeat_nack(REPEAT / 2) is None  # rate-limited: not yet
    now = 0.0
    repeats = 0
    while r.gap_due is not None:
        due = r.gap_due
        assert due > now
        now = due
        assert _gap_nack(r.repeat_nack(now)) == 1
        repeats += 1
    assert repeats == NACK_REPEATS
    assert now == pytest.approx(REPEAT * (2**NACK_REPEATS - 1))  # waits 1, 2, 4, 8 x the repeat
    assert r.repeat_nack(now + 100.0) is None
    assert stats.nacks_sent["gap"] == 1 + NACK_REPEATS
    assert stats.recovery["nacks_repeated"] == NACK_REPEATS


def test_a_closed_gap_is_not_nacked_again() -> None:
    r, stats = _receiver()
    r.on_data(data_packet(seq=0), now=0.0, admit=_ok)
    r.on_data(data_packet(seq=2), now=0.0, admit=_ok)
    r.on_data(data_packet(seq=1), now=0.001, admit=_ok)  # the retransmission came
    assert r.gap_due is None
    assert r.repeat_nack(1.0) is None
    assert stats.nacks_sent["gap"] == 1


def _lose(predicate: object) -> object:
    def route(t: Transit) -> list[tuple[float, bytes]]:
        return [] if predicate(t) else perfect(t)  # type: ignore[operator]

    return route


def test_a_lost_gap_nack_is_recovered_well_before_the_rto() -> None:
    lost: set[str] = set()

    def lose_seq1_and_the_first_nack(t: Transit) -> bool:
        p = t.packet
        if isinstance(p, DataPacket) and p.seq == 1 and "data" not in lost:
            lost.add("data")
            return True
        if isinstance(p, ControlPacket) and p.msg_type is MsgType.NACK and "nack" not in lost:
            lost.add("nack")
            return True
        return False

    config = test_config(nack_repeat_s=REPEAT, ack_every=1, **SLOW_RTO)
    net = Net(2, config, _lose(lose_seq1_and_the_first_nack))  # type: ignore[arg-type]
    for i in range(4):
        net.send(0, 1, bytes([i]))
    net.run()
    assert lost == {"data", "nack"}
    assert [d.payload for d in net.nodes[1].delivered] == [b"\0", b"\1", b"\2", b"\3"]
    assert len(net.nodes[0].completed) == 4
    stats = net.nodes[0].transport.stats()
    assert stats["timeouts"] == 0  # the repeated NACK did it, not the timer
    assert net.now < config.rto_initial_s / 10
    nacks = [c for c in net.controls(src=1) if c.msg_type is MsgType.NACK]
    assert [(c.reason, c.seq) for c in nacks] == [(NackReason.GAP, 1), (NackReason.GAP, 1)]


def test_without_the_repeat_the_same_loss_waits_for_the_rto() -> None:
    """The counterpart: a NACK that is lost every time leaves the recovery to the RTO, so the
    test above measures the repeat and not something else."""

    def lose_seq1_once_and_every_nack(t: Transit) -> bool:
        p = t.packet
        if isinstance(p, DataPacket) and p.seq == 1 and p.offset == 0:
            seen = getattr(lose_seq1_once_and_every_nack, "seen", False)
            lose_seq1_once_and_every_nack.seen = True  # type: ignore[attr-defined]
            return not seen
        return isinstance(p, ControlPacket) and p.msg_type is MsgType.NACK

    config = test_config(nack_repeat_s=REPEAT, ack_every=1, **SLOW_RTO)
    net = Net(2, config, _lose(lose_seq1_once_and_every_nack))  # type: ignore[arg-type]
    for i in range(4):
        net.send(0, 1, bytes([i]))
    net.run()
    assert [d.payload for d in net.nodes[1].delivered] == [b"\0", b"\1", b"\2", b"\3"]
    assert net.nodes[0].transport.stats()["timeouts"] >= 1
    assert net.nodes[1].transport.stats()["recovery"]["nacks_repeated"] == NACK_REPEATS  # type: ignore[index]
