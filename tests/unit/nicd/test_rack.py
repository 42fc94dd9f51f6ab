"""Rack alone over a scoreboard: deliveries, reordering, losses found by time, the tail probe."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from nicd.core.actions import SendPacket
from nicd.link.rack import TLP_RTTS, Rack
from nicd.link.rto import GRANULARITY_S
from nicd.link.wire import DataPacket, MsgType
from tests.unit.factories import sent_stream

if TYPE_CHECKING:
    from nicd.core.stats import TransportStats
    from nicd.link.scoreboard import Scoreboard

ACK_DELAY_S = 0.001
INITIAL_S = 0.05


def setup(count: int) -> tuple[Rack, Scoreboard, TransportStats]:
    """A stream with ``count`` one-packet messages, each sent once, 1 ms apart."""
    board, rto, stats = sent_stream(count, initial_s=INITIAL_S)
    return Rack(board=board, rto=rto, ack_delay_s=ACK_DELAY_S, stats=stats), board, stats


def seqs(actions: list[object]) -> list[int]:
    out = []
    for a in actions:
        assert isinstance(a, SendPacket)
        assert isinstance(a.packet, DataPacket)
        out.append(a.packet.seq)
    return out


def test_the_newest_delivery_sets_order_and_rtt() -> None:
    rack, board, _ = setup(3)
    rack.delivered(board[1], now=0.010, before=rack.order)
    assert (rack.order, rack.rtt, rack.min_rtt) == (2, pytest.approx(0.009), pytest.approx(0.009))
    rack.delivered(board[0], now=0.011, before=2)  # sent once before the newest, arrived after
    assert rack.order == 2
    assert rack.reordering  # a packet sent once arrived after a later one
    assert rack.window(0.008) == pytest.approx(0.002)


def test_no_reordering_window_until_reordering_is_seen() -> None:
    rack, board, _ = setup(2)
    rack.delivered(board[0], now=0.005, before=0)
    rack.delivered(board[1], now=0.006, before=0)
    assert not rack.reordering
    assert rack.window(0.008) == 0.0


def test_a_resend_answered_too_soon_is_spurious_and_means_reordering() -> None:
    rack, board, _ = setup(2)
    rack.delivered(board[1], now=0.005, before=0)  # min_rtt = 4 ms
    board.resend(board[0], now=0.006)
    rack.delivered(board[0], now=0.007, before=2)  # 1 ms after the resend: the first copy arrived
    assert rack.reordering
    assert rack.order == 2  # a spurious resend teaches nothing about order


def test_older_packets_than_the_newest_delivered_are_lost_once_old_enough() -> None:
    rack, board, stats = setup(4)  # sent at 0, 1, 2, 3 ms
    rack.delivered(board[3], now=0.005, before=0)  # rtt 2 ms
    out = rack.detect_losses(now=0.0035)  # 0 and 1 are 2 ms old; 2 is not yet
    assert seqs(out) == [0, 1]
    assert rack.reorder_at == pytest.approx(0.002 + 0.002 - GRANULARITY_S)
    assert rack.timer_at == rack.reorder_at
    assert stats.recovery["holes_resent"] == 2
    assert stats.retransmissions == 2
    assert seqs(rack.on_timer(now=0.004)) == [2]  # the reorder timer finds the last one
    assert rack.reorder_at is None


def test_held_unsent_and_newer_packets_are_never_called_lost() -> None:
    rack, board, _ = setup(4)
    board[0].sacked = True
    rack.delivered(board[2], now=0.01, before=0)
    assert seqs(rack.detect_losses(now=1.0)) == [1]  # 0 is held, 3 is newer than the delivered


def test_a_lost_resend_is_found_the_same_way_and_counted() -> None:
    rack, board, stats = setup(3)  # orders 1, 2, 3
    board[1].sacked = True
    rack.delivered(board[1], now=0.002, before=0)
    assert seqs(rack.detect_losses(now=0.01)) == [0]  # its resend takes order 4
    board[2].sacked = True
    rack.delivered(board[2], now=0.02, before=rack.order)
    assert rack.detect_losses(now=0.03) == []  # the resend went after 2: not known lost yet
    board.queue(msg_type=MsgType.GM_DATA, payload=b"x", handle=9)
    board.send(8, now=0.031)  # order 5
    board[3].sacked = True
    rack.delivered(board[3], now=0.032, before=rack.order)
    assert seqs(rack.detect_losses(now=0.04)) == [0]
    assert stats.recovery["resends_lost"] == 1


def test_nothing_is_lost_before_any_delivery() -> None:
    rack, _, _ = setup(3)
    assert rack.detect_losses(now=10.0) == []
    assert rack.timer_at is None


def test_the_probe_is_armed_once_and_rearmed_by_news() -> None:
    rack, _, _ = setup(1)
    pto = TLP_RTTS * INITIAL_S + ACK_DELAY_S
    assert rack.pto() == pytest.approx(pto)
    rack.arm_probe(now=1.0)
    rack.arm_probe(now=2.0)
    assert rack.tlp_at == pytest.approx(1.0 + pto)
    rack.on_news(now=3.0, in_flight=True)
    assert (rack.news_at, rack.tlp_at) == (3.0, pytest.approx(3.0 + pto))
    rack.on_news(now=4.0, in_flight=False)
    assert rack.tlp_at is None
    assert rack.timer_at is None


def test_the_tail_probe_resends_the_last_packet_not_held_once() -> None:
    rack, board, stats = setup(3)
    board[2].sacked = True
    rack.arm_probe(now=0.0)
    assert rack.tlp_at is not None
    assert rack.on_timer(now=rack.tlp_at - 1e-6) == []
    probe_at = rack.tlp_at
    assert seqs(rack.on_timer(now=probe_at)) == [1]
    assert (rack.tlp_at, rack.news_at) == (None, probe_at)
    assert stats.recovery["tail_probes"] == 1
    assert rack.on_timer(now=probe_at + 1.0) == []


def test_stop_disarms_both_timers() -> None:
    rack, board, _ = setup(3)
    rack.delivered(board[2], now=0.0025, before=0)  # rtt 0.5 ms
    assert seqs(rack.detect_losses(now=0.0012)) == [0]  # 1 is lost at 1.5 ms
    rack.arm_probe(now=0.0)
    assert rack.reorder_at is not None
    rack.stop()
    assert (rack.tlp_at, rack.reorder_at, rack.timer_at) == (None, None, None)
