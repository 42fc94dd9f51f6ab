"""Aimd alone: growth, halving at most once per round trip, the floor and the ceiling."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nicd.link.congestion import Aimd
from nicd.link.rto import Rto, RttEstimator
from tests.unit.netsim import test_config


def rto(initial_s: float = 0.05) -> Rto:
    return Rto(RttEstimator(initial_s=initial_s, min_s=0.001, max_s=1.0))


def test_the_window_starts_at_the_configured_one() -> None:
    c = Aimd(test_config(window=16, min_window=4))
    assert (c.cwnd, c.ceiling, c.floor) == (16.0, 16.0, 4.0)


def test_the_floor_is_never_above_the_window() -> None:
    assert Aimd(test_config(window=2, min_window=16)).floor == 2.0


def test_a_loss_halves_at_most_once_per_round_trip() -> None:
    c, r = Aimd(test_config(window=16, min_window=2)), rto()
    assert c.on_loss(now=1.0, rto=r)
    assert c.cwnd == 8.0
    assert not c.on_loss(now=1.0 + 0.049, rto=r)  # the same round trip (initial RTO)
    assert c.cwnd == 8.0
    assert c.on_loss(now=1.05, rto=r)
    assert c.cwnd == 4.0
    r.estimator.on_sample(0.002)  # with an SRTT, the round trip is the SRTT
    assert c.on_loss(now=1.1, rto=r)
    assert not c.on_loss(now=1.1019, rto=r)
    assert c.on_loss(now=1.102, rto=r)
    assert c.cwnd == 2.0  # the floor


def test_acknowledgements_grow_by_count_over_cwnd_up_to_the_window() -> None:
    c = Aimd(test_config(window=16, min_window=2))
    c.on_loss(now=0.0, rto=rto())
    c.on_acked(4)
    assert c.cwnd == pytest.approx(8.5)
    for _ in range(100):
        c.on_acked(16)
    assert c.cwnd == 16.0


@given(st.lists(st.one_of(st.integers(1, 64), st.floats(0.0, 10.0)), max_size=60))
def test_the_window_stays_between_floor_and_ceiling(inputs: list[int | float]) -> None:
    c, r, now = Aimd(test_config(window=32, min_window=3)), rto(), 0.0
    for x in inputs:
        if isinstance(x, int):
            c.on_acked(x)
        else:
            now += x
            c.on_loss(now=now, rto=r)
        assert c.floor <= c.cwnd <= c.ceiling
