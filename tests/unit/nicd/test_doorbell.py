"""Doorbell coalescing (nicd.core.doorbell) on a fake clock: a streaming host makes the shell hold
off; a ping-pong, a blocking-send loop and a collective's few sends never do."""

from __future__ import annotations

from nicd.config import CoalesceConfig
from nicd.core.doorbell import DoorbellCoalescer

US = 1e-6
CONFIG = CoalesceConfig(hold_s=100 * US, gap_s=50 * US, streak=8)


class _Host:
    """A fake clock and a coalescer: batches that each take ``work_us``, the host's next
    record ``gap`` after nicd went back to waiting (after any hold)."""

    def __init__(self, config: CoalesceConfig = CONFIG) -> None:
        self.coalescer = DoorbellCoalescer(config)
        self.now = 0.0

    def drive(self, gaps_us: list[float], work_us: float = 60) -> list[float]:
        """The holds told, one a batch."""
        holds = []
        for gap in gaps_us:
            started = self.now + gap * US
            finished = started + work_us * US
            hold = self.coalescer.on_batch(started, finished)
            holds.append(hold)
            self.now = finished + hold
        return holds


def test_a_streaming_host_holds_after_the_streak_and_keeps_holding() -> None:
    h = _Host()
    holds = h.drive([1000] + [15] * 20)
    assert holds[:8] == [0.0] * 8  # the first batch, then seven quick ones: no stream yet
    assert holds[8:] == [CONFIG.hold_s] * 13  # the eighth quick one; then after each hold
    assert h.coalescer.holds == 13  # the next batch is waiting at once
    assert abs(h.coalescer.held_s - 13 * CONFIG.hold_s) < 1e-12


def test_a_ping_pong_a_send_loop_and_short_bursts_never_hold() -> None:
    h = _Host()
    assert set(h.drive([300] * 50)) == {0.0}  # ping-pong: the host waits for the answer
    assert set(h.drive([120] * 50)) == {0.0}  # blocking sends: it waits for each SENT
    assert set(h.drive(([300] + [15] * 7) * 10)) == {0.0}  # a binomial root's 8 sends
    assert h.coalescer.holds == 0


def test_the_streak_restarts_after_a_pause() -> None:
    h = _Host()
    assert h.drive([1000] + [15] * 8)[-1] == CONFIG.hold_s
    assert h.drive([500] + [15] * 7) == [0.0] * 8


def test_zero_hold_turns_it_off() -> None:
    h = _Host(CoalesceConfig(hold_s=0.0))
    assert set(h.drive([1] * 100)) == {0.0}
    assert h.coalescer.stats() == {"holds": 0, "held_s": 0.0}
