"""Time dilation's arithmetic (D, the paper's modelled latency, skew scaling, the spread) and the
dilated skew figure's plumbing, fed by a fake job instead of emurun."""

from __future__ import annotations

import argparse
import math
import statistics
from typing import TYPE_CHECKING, Any

import pytest

from emubench import dilation as dil
from emubench import skew_dilated
from emubench.common import read_json

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(("nodes", "depth"), [(1, 0), (2, 1), (3, 2), (8, 3), (16, 4), (17, 5)])
def test_tree_depth_is_the_binomial_trees(nodes: int, depth: int) -> None:
    assert dil.tree_depth(nodes) == depth


def test_tree_depth_refuses_no_nodes() -> None:
    with pytest.raises(ValueError, match="nodes"):
        dil.tree_depth(0)


def test_d_is_ours_over_depth_times_the_middle_of_the_papers_range() -> None:
    d = dil.dilation("bcast", 16, 600.0, ours_iqr_us=30.0, ours_one_way_us=150.0)
    assert d.depth == 4
    assert d.paper_us == 4 * 15.0
    assert d.factor == pytest.approx(10.0)
    assert d.factor_range == pytest.approx((600 / 80, 600 / 40))  # L_paper 20 us, then 10 us
    assert d.skew(400.0) == pytest.approx(4000.0)
    record = d.to_json()
    assert record["factor"] == d.factor
    assert record["paper_us"] == 60.0
    assert record["ours_one_way_us"] == 150.0
    assert "10-20" in record["anchor"]
    caption = d.caption()
    assert "D = 10.0" in caption
    assert "D 7.5-15.0" in caption
    assert "16 nodes" in caption


def test_a_given_factor_is_kept_and_says_it_was_not_measured() -> None:
    d = dil.given("reduce", 16, 120.0)
    assert d.factor == pytest.approx(120.0)
    assert d.ours_us == pytest.approx(120.0 * 60.0)
    assert "not measured" in d.source


@pytest.mark.parametrize("ours", [0.0, -5.0, math.nan, math.inf])
def test_a_latency_that_is_not_positive_and_finite_is_refused(ours: float) -> None:
    with pytest.raises(ValueError, match="latency"):
        dil.dilation("bcast", 16, ours)


def test_an_inverted_paper_range_is_refused() -> None:
    with pytest.raises(ValueError, match="range"):
        dil.dilation("bcast", 16, 100.0, paper_hop_us=(20.0, 10.0))


def test_skews_are_scaled_by_d_to_whole_microseconds() -> None:
    assert dil.dilate_skews([0.0, 100.0, 400.0], 2.5) == [0.0, 250.0, 1000.0]
    assert dil.dilate_skews([250.0], 3.3333) == [833.0]
    with pytest.raises(ValueError, match="positive"):
        dil.dilate_skews([1.0], 0.0)


def test_spread_is_over_repeats_of_rank_means_and_over_pooled_iterations() -> None:
    repeats = [[[1.0, 3.0], [5.0, 7.0]], [[2.0, 4.0], [8.0, 10.0]], [[], [3.0]]]
    s = dil.spread(repeats)
    means = [4.0, 6.0, 3.0]  # mean over ranks of rank means; an empty rank is left out
    assert s["repeat_means_us"] == means
    assert s["mean_us"] == 4.0
    assert s["sd_repeats_us"] == pytest.approx(statistics.stdev(means))
    pooled_sds = [statistics.stdev([1, 3, 5, 7]), statistics.stdev([2, 4, 8, 10]), 0.0]
    assert s["sd_iterations_us"] == pytest.approx(statistics.median(pooled_sds))
    assert s["iqr_iterations_us"] > 0
    assert s["samples"] == 9


def test_factor_spread_gives_the_median_the_range_and_the_effect_against_its_spread() -> None:
    f = dil.factor_spread([10.0, 12.0, 14.0], [5.0, 4.0, 7.0])
    assert f["factors"] == [2.0, 3.0, 2.0]
    assert (f["factor"], f["factor_min"], f["factor_max"]) == (2.0, 2.0, 3.0)
    assert f["effect_us"] == 7.0  # median of HB - NB: 5, 8, 7
    assert f["spread_over_effect"] == pytest.approx(statistics.stdev([5, 8, 7]) / 7)
    assert dil.factor_spread([5.0], [5.0])["spread_over_effect"] is None  # no effect


def test_an_unknown_operation_is_refused_before_any_job() -> None:
    with pytest.raises(ValueError, match="unknown operation"):
        dil.measure("alltoall", 4, wait="hybrid")


def _args(**kw: Any) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    skew_dilated.add_arguments(parser)
    args = parser.parse_args([])
    args.argv = ["sweep", "--dilate"]
    for key, value in kw.items():
        setattr(args, key, value)
    return args


def test_operating_point_is_another_name_for_dilate() -> None:
    parser = argparse.ArgumentParser()
    skew_dilated.add_arguments(parser)
    assert skew_dilated.wanted(parser.parse_args(["--operating-point"]))
    assert skew_dilated.wanted(parser.parse_args(["--dilation", "4"]))
    assert not skew_dilated.wanted(parser.parse_args([]))


def test_a_dilated_run_scales_the_skews_and_writes_d_the_spread_and_a_figure(
    tmp_path: Path,
) -> None:
    asked: list[tuple[list[float], int]] = []

    def jobs(skews: list[float], repeat: int) -> dict[float, dict[str, dict[str, Any]]]:
        asked.append((skews, repeat))
        # HB costs 100 + skew/10 and NB 50 per rank and iteration; repeat r adds r to HB
        return {
            s: {
                "4 B": {
                    "binomial": [[100 + s / 10 + repeat] * 3] * 2,
                    "nic-mcast": [[50.0] * 3] * 2,
                }
            }
            for s in skews
        }

    out = tmp_path / "mcast_fig7_dilated.json"
    args = _args(dilation=3.0, dilate_repeats=2, paper_skews=[0.0, 400.0])
    report = skew_dilated.run(
        "mcast", args, nodes=16, wait="spin", calib_size=4, series=[4], jobs=jobs, out=str(out)
    )
    assert asked == [([0.0, 1200.0], 0), ([0.0, 1200.0], 1)]
    written = read_json(out)
    assert written["skews_us"] == [0.0, 1200.0]
    assert written["paper_skews_us"] == [0.0, 400.0]
    assert written["dilation"]["factor"] == pytest.approx(3.0)
    assert "not measured" in written["dilation"]["source"]
    assert (written["repeats"], written["repeats_asked"]) == (2, 2)
    at = {(p["paper_skew_us"], p["variant"]): p for p in written["points"]}
    assert at[(400.0, "binomial")]["repeat_means_us"] == [220.0, 221.0]
    assert at[(400.0, "binomial")]["sd_repeats_us"] == pytest.approx(statistics.stdev([220, 221]))
    assert at[(0.0, "nic-mcast")]["mean_us"] == 50.0
    factor = {f["paper_skew_us"]: f for f in written["factors"]}
    assert factor[400.0]["factor"] == pytest.approx(220.5 / 50)
    assert factor[0.0]["factor_min"] == 2.0
    assert factor[0.0]["factor_max"] == pytest.approx(101 / 50)
    spread = written["spread_over_effect_at_max_skew"]["4 B"]
    assert spread == pytest.approx(statistics.stdev([170, 171]) / 170.5)  # HB - NB per repeat
    assert skew_dilated.spread_text(written) == f"{spread:.2f} (4 B)"
    skew_dilated.from_json("mcast", str(out))  # summarised again from the raw samples
    assert read_json(out)["factors"] == written["factors"]
    assert report["figure"].startswith("seed 001 Fig 7")
    assert (tmp_path / "mcast_fig7_dilated.png").stat().st_size > 10_000


def test_latency_of_adds_the_notification_back_when_subtracting_it_left_nothing() -> None:
    assert dil.latency_of([10.0, 20.0, 30.0], 5.0) == (20.0, 10.0, "")
    ours, _, note = dil.latency_of([-3.0, -1.0, 4.0], 5.0)  # median -1: noise ate it
    assert ours == 4.0
    assert "includes one notification" in note
    with pytest.raises(ValueError, match="no positive latency"):
        dil.latency_of([-9.0, -8.0], 5.0)


def test_a_run_stopped_after_one_repeat_leaves_that_repeats_figure(tmp_path: Path) -> None:
    def jobs(skews: list[float], repeat: int) -> dict[float, dict[str, dict[str, Any]]]:
        if repeat == 1:
            raise KeyboardInterrupt  # the run is stopped during its second repeat
        return {s: {"4 doubles": {"nab": [[9.0, 11.0]], "ab": [[5.0]]}} for s in skews}

    out = tmp_path / "reduce_skew_dilated.json"
    with pytest.raises(KeyboardInterrupt):
        skew_dilated.run(
            "reduce",
            _args(dilation=10.0, dilate_repeats=3),
            nodes=16,
            wait="spin",
            calib_size=1,
            series=[4],
            jobs=jobs,
            out=str(out),
        )
    written = read_json(out)
    assert (written["repeats"], written["repeats_asked"]) == (1, 3)
    assert written["skews_us"] == [0.0, 2500.0, 5000.0, 10000.0]  # Fig 3.6's skews x 10
    assert {f["factor"] for f in written["factors"]} == {2.0}
    assert (tmp_path / "reduce_skew_dilated.png").exists()
