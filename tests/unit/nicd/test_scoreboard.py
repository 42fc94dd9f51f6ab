"""Scoreboard alone: fragmentation, the window, freeing, orphans, rollbacks, exact counts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nicd.core.actions import SendComplete, SendPacket
from nicd.core.stats import TransportStats
from nicd.link.rto import Rto, RttEstimator
from nicd.link.scoreboard import TOKEN_MASK, Scoreboard
from nicd.link.wire import DataPacket, FragFlags, MsgType

MTU = 64
DST = 3


def board() -> tuple[Scoreboard, TransportStats]:
    stats = TransportStats()
    b = Scoreboard(node_id=1, src_port=2, dst_node=DST, dst_port=4, mtu=MTU, stats=stats)
    return b, stats


def queue(b: Scoreboard, size: int, handle: int) -> None:
    b.queue(msg_type=MsgType.GM_DATA, payload=bytes(size), handle=handle)


def seqs(actions: list[object]) -> list[int]:
    out = []
    for a in actions:
        assert isinstance(a, SendPacket)
        assert a.node == DST
        assert isinstance(a.packet, DataPacket)
        out.append(a.packet.seq)
    return out


def rto() -> Rto:
    return Rto(RttEstimator(initial_s=0.05, min_s=0.001, max_s=1.0))


# -- filling ------------------------------------------------------------------------------


def test_a_message_takes_consecutive_seqs_one_per_mtu_at_least_one() -> None:
    b, _ = board()
    queue(b, 0, handle=1)
    queue(b, MTU * 2 + 1, handle=2)
    assert (b.base, b.next_seq, b.send_next, b.high_sent, len(b)) == (0, 4, 0, 0, 4)
    assert [m.handle for m in b.messages] == [1, 2]
    assert [(m.first_seq, m.last_seq) for m in b.messages] == [(0, 0), (1, 3)]
    assert b[0].packet.flags == FragFlags.ONLY
    assert [b[s].packet.flags for s in (1, 2, 3)] == [
        FragFlags.FIRST, FragFlags.NONE, FragFlags.LAST,
    ]  # fmt: skip
    assert [b[s].packet.offset for s in (1, 2, 3)] == [0, MTU, 2 * MTU]


def test_every_packet_carries_the_streams_epoch_in_the_token_half_word() -> None:
    b, _ = board()
    b.epoch = TOKEN_MASK - 1
    b.base = b.next_seq = b.send_next = b.high_sent = TOKEN_MASK + 5
    queue(b, 1, handle=1)
    queue(b, 3 * MTU, handle=2)
    assert {p.packet.token for p in b.packets} == {TOKEN_MASK - 1}
    assert b[TOKEN_MASK + 5].packet.seq == TOKEN_MASK + 5


# -- the window ---------------------------------------------------------------------------


def test_send_fills_the_window_stamps_each_packet_and_counts() -> None:
    b, stats = board()
    for h in range(5):
        queue(b, 1, handle=h)
    assert seqs(b.send(3, now=1.0)) == [0, 1, 2]
    assert b.send(3, now=1.0) == []  # the window is full
    assert (b.send_next, b.high_sent, b.sent_order) == (3, 3, 3)
    assert [(b[s].sends, b[s].first_sent, b[s].last_sent, b[s].order) for s in range(3)] == [
        (1, 1.0, 1.0, 1), (1, 1.0, 1.0, 2), (1, 1.0, 1.0, 3),
    ]  # fmt: skip
    assert stats.data_sent == 3
    b.go_back(1, now=2.0)
    assert seqs(b.send(3, now=2.0)) == [1, 2]
    assert (b[1].sends, b[1].first_sent, b[1].last_sent, b[1].order) == (2, 1.0, 2.0, 4)
    assert stats.retransmissions == 2
    assert b.high_sent == 3


def test_send_skips_what_the_receiver_holds() -> None:
    b, _ = board()
    for h in range(4):
        queue(b, 1, handle=h)
    b.send(4, now=0.0)
    b[2].sacked = True
    b.go_back(0, now=1.0)
    assert seqs(b.send(4, now=1.0)) == [0, 1, 3]
    assert b.send_next == 4
    b.forget_sacks()
    assert not b[2].sacked


def test_resend_goes_out_of_order_and_takes_a_new_order() -> None:
    b, stats = board()
    queue(b, 1, handle=1)
    queue(b, 1, handle=2)
    b.send(2, now=0.0)
    action = b.resend(b[0], now=0.5)
    assert action == SendPacket(DST, b[0].packet)
    assert (b[0].sends, b[0].last_sent, b[0].order) == (2, 0.5, 3)
    assert stats.retransmissions == 1
    assert b.send_next == 2


# -- emptying -----------------------------------------------------------------------------


def test_free_completes_a_message_at_its_last_packet_only() -> None:
    b, stats = board()
    queue(b, MTU * 2, handle=7)  # seqs 0, 1
    queue(b, 1, handle=8)  # seq 2
    b.send(3, now=0.0)
    assert b.free(1) == []
    assert b.free(3) == [SendComplete(2, 7), SendComplete(2, 8)]
    assert (b.base, b.send_next, len(b), len(b.messages)) == (3, 3, 0, 0)
    assert stats.completed == 2


def test_free_past_send_next_moves_send_next_to_base() -> None:
    b, _ = board()
    for h in range(3):
        queue(b, 1, handle=h)
    b.send(3, now=0.0)
    b.go_back(0, now=0.1)
    b.free(2)
    assert (b.base, b.send_next) == (2, 2)


def test_orphans_fail_once_keep_what_was_on_the_wire_and_complete_silently() -> None:
    b, stats = board()
    queue(b, MTU * 2, handle=1)  # seqs 0, 1: on the wire
    queue(b, 1, handle=2)  # seq 2: never sent
    b.send(2, now=0.0)
    assert [m.handle for m in b.orphan_all()] == [1, 2]
    assert b.orphan_all() == []  # each message is reported once
    assert (b.next_seq, len(b)) == (2, 2)
    assert b.free(2) == []
    assert stats.completed == 0


def test_clear_empties_the_stream_and_reuses_its_seqs() -> None:
    b, _ = board()
    queue(b, 1, handle=1)
    queue(b, 1, handle=2)
    b.send(2, now=0.0)
    b.free(1)
    assert [m.handle for m in b.clear()] == [2]
    assert (b.base, b.next_seq, b.send_next, b.high_sent, len(b)) == (1, 1, 1, 1, 0)
    queue(b, 1, handle=3)
    assert seqs(b.send(4, now=1.0)) == [1]


# -- rollbacks ----------------------------------------------------------------------------


def test_a_rollback_to_the_same_seq_within_a_round_trip_is_recent() -> None:
    b, _ = board()
    for h in range(4):
        queue(b, 1, handle=h)
    b.send(4, now=0.0)
    r = rto()
    assert not b.recent_rollback(1, now=0.0, rto=r)
    b.go_back(1, now=1.0)
    assert (b.send_next, b.rolled_back_at) == (1, 1.0)
    assert b.recent_rollback(1, now=1.0 + 0.04, rto=r)  # within the initial RTO (no SRTT yet)
    assert not b.recent_rollback(1, now=1.0 + 0.05, rto=r)
    assert not b.recent_rollback(2, now=1.0, rto=r)


def test_a_refusal_rewinds_without_counting_as_a_rollback() -> None:
    b, _ = board()
    for h in range(3):
        queue(b, 1, handle=h)
    b.send(3, now=0.0)
    b.rewind(1, now=0.5)
    assert (b.send_next, b.rolled_back_at, b.rollback) == (1, 0.5, None)


# -- invariants ---------------------------------------------------------------------------

_op = st.one_of(
    st.tuples(st.just("queue"), st.integers(0, 3 * MTU)),
    st.tuples(st.just("send"), st.integers(1, 8)),
    st.tuples(st.just("free"), st.integers(0, 10)),
    st.tuples(st.just("back"), st.integers(0, 10)),
    st.tuples(st.just("orphan"), st.just(0)),
    st.tuples(st.just("clear"), st.just(0)),
)


@given(st.lists(_op, max_size=40))
def test_window_invariants_and_each_message_ends_once(ops: list[tuple[str, int]]) -> None:
    b, stats = board()
    queued: set[int] = set()
    completed: list[int] = []
    failed: list[int] = []
    for i, (op, n) in enumerate(ops):
        if op == "queue":
            queue(b, n, handle=i)
            queued.add(i)
        elif op == "send":
            b.send(n, now=float(i))
        elif op == "free" and b.high_sent > b.base:
            upto = b.base + 1 + n % (b.high_sent - b.base)
            completed += [a.handle for a in b.free(upto) if isinstance(a, SendComplete)]
        elif op == "back" and b.send_next > b.base:
            b.go_back(b.base + n % (b.send_next - b.base), now=float(i))
        elif op == "orphan":
            failed += [m.handle for m in b.orphan_all()]
        elif op == "clear":
            failed += [m.handle for m in b.clear()]
        assert b.base <= b.send_next <= b.next_seq
        assert b.base <= b.high_sent <= b.next_seq
        assert len(b) == b.next_seq - b.base
        ended = completed + failed
        assert len(ended) == len(set(ended))  # no message ends twice
    assert set(completed) | set(failed) <= queued
    assert stats.completed == len(completed)


@pytest.mark.parametrize("size", [0, 1, MTU - 1, MTU, MTU + 1, 5 * MTU])
def test_fragments_cover_the_payload_exactly(size: int) -> None:
    b, _ = board()
    queue(b, size, handle=1)
    parts = [b[s].packet for s in range(b.next_seq)]
    assert len(parts) == max(1, -(-size // MTU))
    assert sum(len(p.payload) for p in parts) == size
    assert all(p.msg_len == size for p in parts)
