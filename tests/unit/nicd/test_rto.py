"""RttEstimator and Rto alone: RFC 6298 arithmetic, Karn's rule, backoff, bounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nicd.errors import UsageError
from nicd.link.rto import ALPHA, BETA, GRANULARITY_S, K, Rto, RttEstimator

INITIAL = 0.05
MIN = 0.01
MAX = 1.0


def estimator(**kw: float) -> RttEstimator:
    args = {"initial_s": INITIAL, "min_s": MIN, "max_s": MAX}
    args.update(kw)
    return RttEstimator(**args)


def test_before_any_sample_the_rto_is_the_initial_value() -> None:
    est = estimator()
    assert est.srtt is None
    assert est.rto() == INITIAL


def test_initial_value_is_clamped_into_the_bounds() -> None:
    assert estimator(initial_s=5.0).rto() == MAX
    assert estimator(initial_s=0.001).rto() == MIN


def test_first_sample_sets_srtt_and_half_rttvar() -> None:
    est = estimator()
    est.on_sample(0.02)
    assert est.srtt == 0.02
    assert est.rttvar == 0.01
    assert est.rto() == pytest.approx(0.02 + K * 0.01)


def test_later_samples_follow_rfc6298() -> None:
    est = estimator()
    est.on_sample(0.02)
    est.on_sample(0.04)
    rttvar = (1 - BETA) * 0.01 + BETA * abs(0.02 - 0.04)
    srtt = (1 - ALPHA) * 0.02 + ALPHA * 0.04
    assert est.rttvar == pytest.approx(rttvar)
    assert est.srtt == pytest.approx(srtt)
    assert est.rto() == pytest.approx(srtt + K * rttvar)
    assert est.samples == 2


def test_rto_adapts_down_to_a_steady_rtt_and_stops_at_the_lower_bound() -> None:
    est = estimator()
    for _ in range(200):
        est.on_sample(0.0001)
    assert est.srtt == pytest.approx(0.0001)
    assert est.rto() == MIN  # 0.0001 + tiny variance, clamped up


def test_rto_adapts_up_and_stops_at_the_upper_bound() -> None:
    est = estimator()
    est.on_sample(0.03)
    low = est.rto()
    est.on_sample(0.3)
    assert est.rto() > low
    for _ in range(50):
        est.on_sample(5.0)
    assert est.rto() == MAX


def test_steady_rtt_without_variance_keeps_the_granularity_term() -> None:
    est = estimator(min_s=1e-9)
    for _ in range(400):
        est.on_sample(0.5)
    assert est.rto() == pytest.approx(0.5 + max(GRANULARITY_S, K * est.rttvar))
    assert est.rto() > est.srtt  # type: ignore[operator]


def test_negative_sample_is_taken_as_zero() -> None:
    est = estimator()
    est.on_sample(-1.0)
    assert est.srtt == 0.0


def test_karn_ignores_samples_of_retransmitted_packets() -> None:
    est = estimator()
    assert est.on_ack(sent_at=1.0, now=1.02, retransmitted=False)
    before = (est.srtt, est.rttvar, est.rto())
    assert not est.on_ack(sent_at=1.0, now=1.9, retransmitted=True)
    assert (est.srtt, est.rttvar, est.rto()) == before
    assert est.samples == 1
    assert est.ignored == 1


def test_backoff_doubles_up_to_the_upper_bound() -> None:
    rto = Rto(estimator())
    values = [rto.value()]
    for _ in range(8):
        rto.on_timeout()
        values.append(rto.value())
    assert values == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0])
    assert rto.backoff == 5  # it stops counting once the cap is reached


def test_a_valid_sample_ends_the_backoff_a_retransmitted_one_does_not() -> None:
    rto = Rto(estimator())
    rto.on_timeout()
    rto.on_timeout()
    assert rto.value() == pytest.approx(0.2)
    assert not rto.on_ack(sent_at=0.0, now=0.03, retransmitted=True)
    assert rto.backoff == 2
    assert rto.value() == pytest.approx(0.2)  # Karn: keep the backed-off value
    assert rto.on_ack(sent_at=0.0, now=0.03, retransmitted=False)
    assert rto.backoff == 0
    assert rto.value() == pytest.approx(0.03 + K * 0.015)


def test_streams_share_the_estimate_but_not_the_backoff() -> None:
    est = estimator()
    a, b = Rto(est), Rto(est)
    a.on_timeout()
    assert a.value() == pytest.approx(2 * b.value())
    b.on_ack(sent_at=0.0, now=0.002, retransmitted=False)
    assert est.srtt == 0.002
    assert b.value() == MIN
    assert a.value() == pytest.approx(2 * MIN)


@pytest.mark.parametrize(
    "kw",
    [
        {"min_s": 0.0},
        {"min_s": -1.0},
        {"min_s": 2.0, "max_s": 1.0},
        {"initial_s": 0.0},
    ],
)
def test_bad_bounds_are_usage_errors(kw: dict[str, float]) -> None:
    with pytest.raises(UsageError):
        estimator(**kw)


events = st.lists(
    st.one_of(
        st.tuples(st.just("sample"), st.floats(0, 10, allow_nan=False)),
        st.tuples(st.just("karn"), st.floats(0, 10, allow_nan=False)),
        st.tuples(st.just("timeout"), st.just(0.0)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(events, st.floats(1e-4, 0.1), st.floats(0.1, 5.0))
def test_any_history_stays_within_the_bounds(
    history: list[tuple[str, float]], lo: float, hi: float
) -> None:
    est = RttEstimator(initial_s=0.05, min_s=lo, max_s=hi)
    rto = Rto(est)
    for kind, value in history:
        if kind == "timeout":
            before = rto.value()
            rto.on_timeout()
            assert rto.value() == min(hi, 2 * before) or rto.value() == hi
        else:
            srtt = est.srtt
            rto.on_ack(sent_at=0.0, now=value, retransmitted=kind == "karn")
            if kind == "karn":
                assert est.srtt == srtt
        assert lo <= est.rto() <= hi
        assert lo <= rto.value() <= hi


def test_progress_ends_the_backoff_without_touching_the_estimate() -> None:
    est = estimator()
    rto = Rto(est)
    rto.on_timeout()
    rto.on_timeout()
    rto.on_progress()
    assert rto.backoff == 0
    assert rto.value() == INITIAL
    assert est.samples == 0
