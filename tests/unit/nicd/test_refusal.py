"""Refusal alone: the state table, the retry backoff, the give-up limits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nicd.errors import UsageError
from nicd.link.refusal import (
    RETRY_BACKOFF_CAP,
    SEND_TRANSITIONS,
    Refusal,
    SendEvent,
    SendState,
)
from nicd.link.wire import NackReason
from tests.unit.netsim import test_config

CONFIG = test_config(no_buffer_retry_s=0.004, rto_max_s=0.2)


@pytest.mark.parametrize("state", list(SendState))
@pytest.mark.parametrize("event", list(SendEvent))
def test_every_state_and_input_moves_legally_or_is_refused(
    state: SendState, event: SendEvent
) -> None:
    r = Refusal(CONFIG)
    r.state = state
    legal = SEND_TRANSITIONS.get((state, event))
    if legal is None:
        with pytest.raises(UsageError):
            r.move(event)
        assert r.state is state  # a refused move changes nothing
    else:
        assert r.move(event) is legal
        assert r.state is legal


def test_the_table_refuses_only_a_retry_that_was_never_armed() -> None:
    missing = {(s, e) for s in SendState for e in SendEvent} - set(SEND_TRANSITIONS)
    assert missing == {(SendState.OPEN, SendEvent.RETRY), (SendState.PROBING, SendEvent.RETRY)}
    assert all(SEND_TRANSITIONS[(s, SendEvent.CLEARED)] is SendState.OPEN for s in SendState)
    assert all(SEND_TRANSITIONS[(s, SendEvent.REFUSED)] is SendState.PAUSED for s in SendState)


def test_a_refusal_pauses_and_arms_the_retry_a_repeat_keeps_it() -> None:
    r = Refusal(CONFIG)
    r.on_refused(NackReason.NO_BUFFER, now=1.0)
    assert (r.state, r.reason, r.since) == (SendState.PAUSED, NackReason.NO_BUFFER, 1.0)
    assert r.retry_at == pytest.approx(1.004)
    r.on_refused(NackReason.NO_BUFFER, now=1.002)
    assert (r.since, r.retry_at) == (1.0, pytest.approx(1.004))
    r.on_refused(NackReason.NO_PORT, now=1.003)  # another reason: another refusal
    assert (r.reason, r.since, r.retry_at) == (NackReason.NO_PORT, 1.003, pytest.approx(1.004))


def test_each_retry_in_a_row_doubles_the_delay_up_to_the_cap() -> None:
    r, now, delays = Refusal(CONFIG), 0.0, []
    for _ in range(10):
        r.on_refused(NackReason.NO_BUFFER, now=now)
        delays.append(round(r.retry_at - now, 6))
        now = r.retry_at
        r.on_retry()
        assert r.state is SendState.PROBING
    assert delays == [0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.2, 0.2, 0.2, 0.2]
    assert r.retries == 10
    r.clear()
    assert (r.state, r.reason, r.since, r.retries) == (SendState.OPEN, None, None, 0)


def test_the_backoff_exponent_is_capped() -> None:
    config = test_config(no_buffer_retry_s=1e-9, rto_max_s=1e9)
    r = Refusal(config)
    r.retries = RETRY_BACKOFF_CAP + 5
    r.on_refused(NackReason.NO_BUFFER, now=0.0)
    assert r.retry_at == pytest.approx(1e-9 * (1 << RETRY_BACKOFF_CAP))


LIMITS = [
    (NackReason.NO_PORT, CONFIG.no_port_timeout_s),
    (NackReason.NO_BUFFER, CONFIG.no_buffer_timeout_s),
]


@pytest.mark.parametrize(("reason", "limit"), LIMITS)
def test_a_lasting_refusal_gives_up_at_its_own_limit(reason: NackReason, limit: float) -> None:
    r = Refusal(CONFIG)
    assert r.limit() is None
    r.on_refused(reason, now=2.0)
    assert r.limit() == pytest.approx(2.0 + limit)
    assert r.deadline() == pytest.approx(min(2.0 + limit, r.retry_at))
    r.since = 2.0 + 0.001 - limit  # as if it started long ago: the give-up comes first
    assert r.deadline() == pytest.approx(2.001)


@given(st.lists(st.sampled_from(list(SendEvent)), max_size=30))
def test_any_input_sequence_keeps_the_state_invariants(events: list[SendEvent]) -> None:
    r, now = Refusal(CONFIG), 0.0
    for event in events:
        now += 0.001
        state = r.state
        if event is SendEvent.REFUSED:
            r.on_refused(NackReason.NO_BUFFER, now=now)
        elif event is SendEvent.CLEARED:
            r.clear()
        elif (state, event) in SEND_TRANSITIONS:
            r.on_retry()
        else:
            with pytest.raises(UsageError):
                r.on_retry()
        assert r.state is SEND_TRANSITIONS.get((state, event), state)
        if r.state is SendState.OPEN:
            assert (r.reason, r.since, r.retries) == (None, None, 0)
        else:
            assert r.reason is not None
            assert r.since is not None
