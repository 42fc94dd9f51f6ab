"""StreamSender alone: scripted control packets, hand-passed time, exact counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from nicd.core.actions import SendComplete, SendFailed, SendPacket
from nicd.core.stats import TransportStats
from nicd.link.recovery import GoBackN, LossRecovery, Selective
from nicd.link.refusal import SendState
from nicd.link.rto import Rto, RttEstimator
from nicd.link.sender import StreamSender
from nicd.link.wire import DataPacket, FragFlags, MsgType, NackReason
from tests.unit.netsim import test_config

if TYPE_CHECKING:
    from collections.abc import Sequence

CONFIG = test_config(window=4, ack_every=3)
ME, PEER = 1, 3  # sender node, receiver node


def sender(**overrides: object) -> tuple[StreamSender, TransportStats]:
    config = test_config(**{"window": 4, "ack_every": 3, **overrides})
    stats = TransportStats()
    est = RttEstimator(
        initial_s=config.rto_initial_s, min_s=config.rto_min_s, max_s=config.rto_max_s
    )
    s = StreamSender(
        node_id=ME, src_port=2, dst_node=PEER, dst_port=4,
        config=config, rto=Rto(est), stats=stats,
    )  # fmt: skip
    return s, stats


def packets(actions: Sequence[object]) -> list[DataPacket]:
    out = []
    for a in actions:
        assert isinstance(a, SendPacket)
        assert a.node == PEER
        assert isinstance(a.packet, DataPacket)
        out.append(a.packet)
    return out


def seqs(actions: Sequence[object]) -> list[int]:
    return [p.seq for p in packets([a for a in actions if isinstance(a, SendPacket)])]


def queue(s: StreamSender, size: int, handle: int) -> None:
    s.board.queue(
        msg_type=MsgType.GM_DATA, payload=bytes(i % 251 for i in range(size)), handle=handle
    )


# -- sender: fragmentation and window -----------------------------------------------------


def test_empty_message_is_one_first_last_packet() -> None:
    s, _ = sender()
    queue(s, 0, handle=9)
    [p] = packets(s.transmit(now=0.0))
    assert p.flags == FragFlags.ONLY
    assert (p.payload, p.msg_len, p.offset, p.seq, p.token) == (b"", 0, 0, 0, 0)
    assert (p.src_node, p.src_port, p.dst_node, p.dst_port) == (ME, 2, PEER, 4)


def test_message_is_cut_into_mtu_fragments() -> None:
    s, _ = sender()
    queue(s, 64 * 2 + 1, handle=9)
    ps = packets(s.transmit(now=0.0))
    assert [p.flags for p in ps] == [FragFlags.FIRST, FragFlags.NONE, FragFlags.LAST]
    assert [p.offset for p in ps] == [0, 64, 128]
    assert [len(p.payload) for p in ps] == [64, 64, 1]
    assert {p.msg_len for p in ps} == {129}
    assert b"".join(p.payload for p in ps) == bytes(i % 251 for i in range(129))


def test_exact_multiple_of_the_mtu_has_no_empty_tail() -> None:
    s, _ = sender()
    queue(s, 128, handle=1)
    assert [len(p.payload) for p in packets(s.transmit(now=0.0))] == [64, 64]


def test_window_limits_what_is_in_flight_and_acks_open_it() -> None:
    s, stats = sender()
    for h in range(10):
        queue(s, 1, handle=h)
    assert seqs(s.transmit(now=0.0)) == [0, 1, 2, 3]
    assert s.transmit(now=0.0) == []
    out = s.on_ack(2, now=0.001)
    assert [a for a in out if isinstance(a, SendComplete)] == [
        SendComplete(2, 0),
        SendComplete(2, 1),
    ]
    assert seqs(out) == [4, 5]
    assert stats.data_sent == 6
    assert stats.retransmissions == 0


def test_message_completes_only_when_its_last_fragment_is_acknowledged() -> None:
    s, stats = sender()
    queue(s, 150, handle=5)  # 3 fragments
    s.transmit(now=0.0)
    assert s.on_ack(2, now=0.001) == []
    assert s.on_ack(3, now=0.002) == [SendComplete(2, 5)]
    assert s.idle
    assert stats.completed == 1


def test_duplicate_stale_and_impossible_acks_change_nothing() -> None:
    s, stats = sender()
    for h in range(3):
        queue(s, 1, handle=h)
    s.transmit(now=0.0)
    s.on_ack(2, now=0.001)
    assert s.on_ack(2, now=0.002) == []  # duplicate
    assert s.on_ack(1, now=0.002) == []  # stale, reordered
    assert s.on_ack(9, now=0.002) == []  # beyond anything sent
    assert stats.drops["ack_beyond_sent"] == 1
    assert s.board.base == 2


def test_ack_gives_an_rtt_sample_from_a_packet_sent_once() -> None:
    s, _ = sender()
    queue(s, 1, handle=1)
    s.transmit(now=1.0)
    s.on_ack(1, now=1.004)
    assert s.rto.estimator.srtt == pytest.approx(0.004)


# -- sender: rollback ---------------------------------------------------------------------


def test_gap_nack_goes_back_to_its_seq_and_acknowledges_before_it() -> None:
    s, stats = sender()
    for h in range(4):
        queue(s, 1, handle=h)
    s.transmit(now=0.0)
    out = s.on_nack(NackReason.GAP, 1, now=0.001)
    assert [a for a in out if isinstance(a, SendComplete)] == [SendComplete(2, 0)]
    assert seqs(out) == [1, 2]  # the window was cut in half (4 -> 2) by the loss
    assert stats.retransmissions == 2
    assert stats.loss_events == 1


def test_duplicated_gap_nack_does_not_send_the_window_twice() -> None:
    s, stats = sender()
    for h in range(4):
        queue(s, 1, handle=h)
    s.transmit(now=0.0)
    s.on_nack(NackReason.GAP, 1, now=0.001)
    assert s.on_nack(NackReason.GAP, 1, now=0.0011) == []
    assert stats.loss_events == 1


def test_timeout_goes_back_n_and_backs_off() -> None:
    s, stats = sender()
    for h in range(4):
        queue(s, 1, handle=h)
    s.transmit(now=0.0)
    first = s.rto_deadline()
    assert first is not None
    assert first == pytest.approx(CONFIG.rto_initial_s)
    out = s.on_timeout(now=first)
    assert seqs(out) == [0, 1]  # go back N, within the halved window
    assert s.rto_deadline() == pytest.approx(first + 2 * CONFIG.rto_initial_s)
    assert stats.timeouts == 1
    assert stats.retransmissions == 2


def test_ack_of_a_retransmitted_packet_gives_no_sample() -> None:
    s, _ = sender()
    queue(s, 1, handle=1)
    s.transmit(now=0.0)
    s.on_timeout(now=0.005)
    s.on_ack(1, now=0.006)
    assert s.rto.estimator.srtt is None
    assert s.rto.estimator.ignored == 1
    assert s.rto.backoff == 0  # progress ends the backoff even without a sample


def test_gap_nack_acknowledging_new_data_ends_the_backoff() -> None:
    # Issue 14, seed 24 of the all-pairs liveness test: at 30 % loss go-back-N progresses
    # almost only through GAP NACKs (a window of 16 rarely arrives whole, and the NACK carries
    # the cumulative ACK instead of an ACK). If only ACKs ended the backoff, the timer would
    # ratchet up to rto_max (1 s) while the peer answers every burst, and the drain would be
    # long enough for an unlucky run of lost probes to look like a death.
    s, _ = sender()
    for h in range(4):
        queue(s, 1, handle=h)
    s.transmit(now=0.0)
    now = 0.0
    for _ in range(3):
        deadline = s.rto_deadline()
        assert deadline is not None
        now = deadline
        s.on_timeout(now=now)
    assert s.rto.backoff == 3
    s.on_nack(NackReason.GAP, 2, now=now + 0.001)  # 0 and 1 arrived, 2 was lost
    assert s.rto.backoff == 0
    assert s.rto.estimator.samples == 0  # still no sample: which copy it answers is unknown
    deadline = s.rto_deadline()
    assert deadline is not None
    assert deadline - (now + 0.001) == pytest.approx(CONFIG.rto_initial_s)


def test_nack_without_new_data_keeps_the_backoff() -> None:
    s, _ = sender()
    queue(s, 1, handle=1)
    s.transmit(now=0.0)
    s.on_timeout(now=0.005)
    s.on_nack(NackReason.GAP, 0, now=0.006)  # nothing newly acknowledged
    assert s.rto.backoff == 1


def test_packet_sent_once_before_a_rollback_gives_no_sample() -> None:
    # Its ACK may have been lost and the one that covers it triggered by a retransmission.
    s, _ = sender()
    queue(s, 1, handle=1)
    queue(s, 1, handle=2)
    s.transmit(now=0.0)
    s.on_timeout(now=0.005)  # resends both
    s.on_ack(2, now=0.0051)
    assert s.rto.estimator.samples == 0
    queue(s, 1, handle=3)
    s.transmit(now=0.006)
    s.on_ack(3, now=0.0062)  # sent once, after the rollback: a valid sample
    assert s.rto.estimator.srtt == pytest.approx(0.0002)


def test_timeouts_without_progress_keep_backing_off() -> None:
    s, _ = sender()
    queue(s, 1, handle=1)
    s.transmit(now=0.0)
    now, gaps = 0.0, []
    for _ in range(8):
        deadline = s.rto_deadline()
        assert deadline is not None
        gaps.append(round(deadline - now, 6))
        now = deadline
        s.on_timeout(now=now)
    assert gaps == [0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.2, 0.2]


def test_window_cut_at_most_once_per_rtt_floor_and_growth() -> None:
    s, stats = sender(window=16)
    for h in range(200):
        queue(s, 1, handle=h)
    s.transmit(now=0.0)
    s.on_ack(1, now=0.001)  # srtt = 1 ms
    s.on_nack(NackReason.GAP, 3, now=0.002)
    assert s.congestion.cwnd == pytest.approx(8.0)
    s.on_timeout(now=0.0025)  # same round trip: no second cut
    assert s.congestion.cwnd == pytest.approx(8.0)
    for t in range(10):
        s.on_timeout(now=1.0 + t)
    assert s.congestion.cwnd == s.config.min_window
    assert stats.timeouts == 11
    assert stats.loss_events == 11  # the NACK and the 10 spaced timeouts, not the early one
    before = s.congestion.cwnd
    s.on_ack(s.board.send_next, now=20.0)
    assert s.congestion.cwnd > before
    for _ in range(300):
        if s.idle:
            break
        s.on_ack(s.board.send_next, now=20.0)
    assert s.congestion.cwnd == 16.0  # growth stops at the configured window


# -- sender: refusals ---------------------------------------------------------------------


def test_no_buffer_pauses_then_retries_one_probe_then_resume_opens_the_window() -> None:
    s, stats = sender()
    for h in range(3):
        queue(s, 1, handle=h)
    s.transmit(now=0.0)
    out = s.on_nack(NackReason.NO_BUFFER, 1, now=0.001)
    assert out == [SendComplete(2, 0)]
    assert s.rto_deadline() is None
    assert s.next_deadline() == pytest.approx(0.001 + CONFIG.no_buffer_retry_s)
    assert s.on_timer(now=0.002) == []  # not yet
    probe = s.on_timer(now=0.001 + CONFIG.no_buffer_retry_s)
    assert seqs(probe) == [1]
    assert stats.refusal_retries == 1
    again = s.on_nack(NackReason.NO_BUFFER, 1, now=0.006)  # still no buffer: retry later
    assert again == []
    assert s.next_deadline() == pytest.approx(0.006 + 2 * CONFIG.no_buffer_retry_s)
    out = s.on_nack(NackReason.RESUME, 1, now=0.007)
    assert seqs(out) == [1, 2]
    assert s.refusal.state is SendState.OPEN
    assert s.refusal.reason is None


def test_lasting_no_port_fails_the_stream_and_reuses_the_refused_seqs() -> None:
    s, stats = sender(no_port_timeout_s=2.0)
    queue(s, 1, handle=1)
    queue(s, 100, handle=2)
    s.transmit(now=0.0)
    s.on_nack(NackReason.NO_PORT, 0, now=0.001)
    now, failures, probes = 0.001, [], 0
    for _ in range(100):
        deadline = s.next_deadline()
        assert deadline is not None
        now = deadline
        out = s.on_timer(now=now)
        failures = [a for a in out if isinstance(a, SendFailed)]
        if failures:
            break
        assert seqs(out) == [0]  # one probe per retry
        probes += 1
        s.on_nack(NackReason.NO_PORT, 0, now=now)  # the port is still not open
    assert failures == [SendFailed(2, 1, PEER, "no_port"), SendFailed(2, 2, PEER, "no_port")]
    assert now == pytest.approx(0.001 + 2.0)
    assert 5 < probes < 20  # retries back off up to rto_max_s
    assert s.idle
    assert s.next_deadline() is None
    assert stats.failed["no_port"] == 2
    queue(s, 1, handle=3)
    [p] = packets(s.transmit(now=now))
    assert p.seq == 0  # the receiver still expects 0


def test_stale_and_impossible_nacks_are_dropped() -> None:
    s, stats = sender()
    for h in range(3):
        queue(s, 1, handle=h)
    s.transmit(now=0.0)
    s.on_ack(2, now=0.001)
    assert s.on_nack(NackReason.GAP, 1, now=0.002) == []
    assert s.on_nack(NackReason.GAP, 7, now=0.002) == []
    assert stats.drops["stale_nack"] == 1
    assert stats.drops["nack_beyond_sent"] == 1


# -- sender: close and failure ------------------------------------------------------------


def test_close_fails_everything_drops_unsent_and_keeps_carrying_what_was_on_the_wire() -> None:
    s, stats = sender(window=2)
    queue(s, 100, handle=1)  # 2 packets, both sent
    queue(s, 1, handle=2)  # never sent
    s.transmit(now=0.0)
    out = s.close()
    assert out == [SendFailed(2, 1, PEER, "closed"), SendFailed(2, 2, PEER, "closed")]
    assert s.board.next_seq == 2
    assert seqs(s.on_timeout(now=0.01)) == [0, 1]  # the orphan still travels
    assert s.on_ack(2, now=0.02) == []  # ...and completes without a second report
    assert s.idle
    assert stats.failed["closed"] == 2
    assert stats.completed == 0


def test_fail_all_reports_each_message_once() -> None:
    s, _ = sender()
    for h in range(3):
        queue(s, 70, handle=h)
    s.transmit(now=0.0)
    out = s.fail_all("peer_dead")
    assert [a.handle for a in out if isinstance(a, SendFailed)] == [0, 1, 2]
    assert s.idle
    assert s.next_deadline() is None


# -- composition --------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "cls"), [("gbn", GoBackN), ("selective", Selective)])
def test_the_recovery_is_looked_up_by_its_configured_name(
    name: str, cls: type[LossRecovery]
) -> None:
    s, _ = sender(recovery=name)
    assert type(s.recovery) is cls
    assert s.recovery.board is s.board


def test_a_probing_stream_sends_one_packet_until_progress_opens_the_window() -> None:
    s, _ = sender()
    for h in range(4):
        queue(s, 1, handle=h)
    s.transmit(now=0.0)
    s.on_nack(NackReason.NO_BUFFER, 0, now=0.001)
    assert s.refusal.state is SendState.PAUSED
    assert s.transmit(now=0.002) == []
    assert seqs(s.on_timer(now=s.refusal.retry_at)) == [0]
    assert s.refusal.state is SendState.PROBING
    assert s.transmit(now=0.01) == []  # one packet at a time
    out = s.on_ack(1, now=0.011)  # progress: open again, the window refills
    assert s.refusal.state is SendState.OPEN
    assert seqs(out) == [1, 2, 3]
