"""The recovery registry and its two classes alone: the hooks where they differ, the SACK
handling they share."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from nicd.config import RECOVERY_MODES
from nicd.errors import UsageError
from nicd.link.recovery import (
    RECOVERIES,
    SACK_DOUBT_BACKOFF,
    GoBackN,
    LossRecovery,
    Selective,
    create_recovery,
    register_recovery,
)
from tests.unit.factories import sent_stream
from tests.unit.netsim import test_config

if TYPE_CHECKING:
    from nicd.config import TransportConfig
    from nicd.core.stats import TransportStats
    from nicd.link.rto import Rto
    from nicd.link.scoreboard import Scoreboard

INITIAL_S = 0.05


def make(name: str, count: int = 4) -> tuple[LossRecovery, Scoreboard, TransportStats]:
    """A recovery over a stream of ``count`` one-packet messages sent at 0, 1, 2 ... ms."""
    config = test_config(recovery=name, rto_initial_s=INITIAL_S, ack_delay_s=0.001)
    board, rto, stats = sent_stream(count, initial_s=INITIAL_S)
    return create_recovery(name, board=board, rto=rto, config=config, stats=stats), board, stats


# -- the registry -------------------------------------------------------------------------


def test_the_registry_knows_exactly_the_modes_the_flags_offer() -> None:
    assert tuple(RECOVERIES) == RECOVERY_MODES
    assert type(make("gbn")[0]) is GoBackN
    assert type(make("selective")[0]) is Selective
    assert all(RECOVERIES[name].name == name for name in RECOVERIES)  # type: ignore[attr-defined]


def test_an_unknown_name_is_a_usage_error_naming_the_known_ones() -> None:
    with pytest.raises(UsageError, match="gbn, selective"):
        make("sack-please")


def test_a_registered_factory_is_found_by_name() -> None:
    made: list[str] = []

    def factory(
        *, board: Scoreboard, rto: Rto, config: TransportConfig, stats: TransportStats
    ) -> LossRecovery:
        made.append(config.recovery)
        return GoBackN(board=board, rto=rto, config=config, stats=stats)

    register_recovery("test-only", factory)
    try:
        recovery, _, _ = make("gbn")
        made_one = create_recovery(
            "test-only", board=recovery.board, rto=recovery.rto, config=test_config(),
            stats=recovery.stats,
        )  # fmt: skip
        assert type(made_one) is GoBackN
        assert made == ["gbn"]
    finally:
        del RECOVERIES["test-only"]


# -- where they differ --------------------------------------------------------------------


def test_go_back_n_finds_nothing_by_time_and_times_out_from_the_oldest_send() -> None:
    recovery, board, _ = make("gbn")
    recovery.on_sent(now=0.0)
    assert recovery.rack.tlp_at is None
    recovery.before_free(2, now=0.01)
    board.free(2)
    assert recovery.rack.order == 0  # nothing learnt from a cumulative ACK
    assert recovery.after_ack(now=0.5) == []
    assert recovery.rto_deadline() == pytest.approx(0.002 + INITIAL_S)


def test_selective_learns_from_every_acknowledgement_and_resends_by_time() -> None:
    recovery, board, _ = make("selective")  # orders 1..4, sent at 0..3 ms
    recovery.on_sent(now=0.0)
    assert recovery.rack.tlp_at == pytest.approx(2 * INITIAL_S + 0.001)
    recovery.before_free(1, now=0.005)
    board.free(1)
    assert (recovery.rack.order, recovery.rack.news_at) == (1, 0.005)
    board.resend(board[2], now=0.006)  # order 5
    recovery.before_free(3, now=0.02)  # 1 and 2's resend delivered: 3 went before the resend
    board.free(3)
    assert recovery.rack.order == 5
    assert [a.packet.seq for a in recovery.after_ack(now=0.02)] == [3]  # type: ignore[attr-defined]


def test_selective_times_out_from_the_last_news() -> None:
    recovery, _, _ = make("selective")
    assert recovery.rto_deadline() == pytest.approx(0.0 + INITIAL_S)
    recovery.rack.on_news(now=0.03, in_flight=True)
    assert recovery.rto_deadline() == pytest.approx(0.03 + INITIAL_S)


# -- what they share ----------------------------------------------------------------------


@pytest.mark.parametrize("name", RECOVERY_MODES)
def test_a_sack_marks_the_held_packets_and_resends_the_proven_holes(name: str) -> None:
    recovery, board, stats = make(name)
    out = recovery.on_sack(0, 0b011, 0, now=0.01, paused=False)  # 1 and 2 held, 0 is a hole
    assert [board[s].sacked for s in range(4)] == [False, True, True, False]
    assert [a.packet.seq for a in out] == [0]  # type: ignore[attr-defined]
    assert stats.recovery["sacked"] == 2
    assert recovery.rack.tlp_at is not None  # the news armed the probe, in either mode
    again = recovery.on_sack(0, 0b011, recovery.rack.order, now=0.011, paused=False)
    assert again == []
    assert stats.recovery["sacked"] == 2


@pytest.mark.parametrize("name", RECOVERY_MODES)
def test_a_sack_to_a_refused_stream_marks_but_resends_nothing(name: str) -> None:
    recovery, board, _ = make(name)
    assert recovery.on_sack(0, 0b10, 0, now=0.01, paused=True) == []
    assert board[2].sacked


@pytest.mark.parametrize("name", RECOVERY_MODES)
def test_repeated_timeouts_forget_the_marks_and_stop_the_timers(name: str) -> None:
    recovery, board, _ = make(name)
    recovery.on_sack(0, 0b10, 0, now=0.01, paused=True)
    recovery.rto.backoff = SACK_DOUBT_BACKOFF - 1
    recovery.on_timeout()
    assert board[2].sacked
    assert recovery.rack.timer_at is None
    recovery.rto.backoff = SACK_DOUBT_BACKOFF
    recovery.on_timeout()
    assert not board[2].sacked
