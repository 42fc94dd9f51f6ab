"""The reduce-skew benchmark's pure parts: the thesis's last node, the summary's medians and
factors, the figures drawn from a summary; and the host time-slice request it makes."""

from __future__ import annotations

import argparse
import ctypes
import os
import struct
from typing import TYPE_CHECKING

import pytest

from emubench.reduce_skew import plot, summarise
from emubench.reduce_skew_rank import last_node
from emucluster.coll.trees import binomial_parent
from launcher.tuning import set_slice

if TYPE_CHECKING:
    from pathlib import Path


def depth(rank: int, size: int) -> int:
    hops, parent = 0, binomial_parent(rank, 0, size)
    while parent is not None:
        hops, parent = hops + 1, binomial_parent(parent, 0, size)
    return hops


@pytest.mark.parametrize("size", [2, 3, 4, 5, 8, 13, 16, 32])
def test_last_node_is_deepest_in_the_tree(size: int) -> None:
    last = last_node(size)
    assert depth(last, size) == max(depth(r, size) for r in range(size))
    if size & (size - 1) == 0:
        assert last == size - 1  # a power of two: the highest rank, log2(size) hops away


def job(nodes: int, nab: float, ab: float, latency: dict[str, float]) -> dict[str, object]:
    """A job result as reduce_skew writes it: two ranks with constant samples."""
    ranks = [{"nab": {"cpu_us": [nab, nab], "wall_us": [nab + 5]},
              "ab": {"cpu_us": [ab], "wall_us": [ab + 5]}} for _ in range(2)]  # fmt: skip
    return {
        "parameters": {"nodes": nodes, "variants": ["nab", "ab"]},
        "utilisation": [{"skew_us": s, "elements": 4, "ranks": ranks} for s in (0.0, 1000.0)],
        "latency": [
            {
                "elements": 1,
                "one_way_us": 1.0,
                "last_node_samples": {v: [t, t] for v, t in latency.items()},
            }
        ],
    }


def test_summary_takes_medians_over_repeats_and_divides_nab_by_ab() -> None:
    args = argparse.Namespace(nodes=[2, 4], skew_us=1000.0, elements=[4], latency_elements=[1])
    jobs = [
        job(2, 300, 100, {"nab": 50, "ab": 60}),
        job(2, 600, 100, {"nab": 50, "ab": 70}),
        job(2, 900, 100, {"nab": 50, "ab": 80}),
        job(4, 800, 200, {"nab": 100, "ab": 100}),
    ]
    summary = summarise(jobs, args)  # type: ignore[arg-type]
    assert summary["factors"]["fig3_7"]["4 doubles"] == {"2 nodes": 6.0, "4 nodes": 4.0}
    assert summary["factors"]["fig3_6"]["4 doubles"] == {"0 us": 4.0, "1000 us": 4.0}
    assert summary["factors"]["fig3_9"]["ab/nab latency, 1 double"] == {
        "2 nodes": 1.4, "4 nodes": 1.0}  # fmt: skip
    row = next(r for r in summary["utilisation"] if r["nodes"] == 2 and r["variant"] == "nab")
    assert row["repeats"] == [300, 600, 900]
    assert row["utilisation_us"] == 605.0


def test_one_png_per_figure(tmp_path: Path) -> None:
    args = argparse.Namespace(nodes=[2, 4], skew_us=1000.0, elements=[4], latency_elements=[1])
    summary = summarise([job(2, 300, 100, {"nab": 5, "ab": 6}),
                         job(4, 800, 200, {"nab": 9, "ab": 9})], args)  # type: ignore[arg-type]  # fmt: skip
    plot(summary, str(tmp_path / "r"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"r_fig3_{n}.png" for n in (10, 6, 7, 8, 9)
    ]


def test_slice_request_takes_effect_or_says_why() -> None:
    problem = set_slice(0, 200e-6)
    try:
        if problem is not None:
            assert "sched_setattr" in problem
            return
        buf = ctypes.create_string_buffer(56)
        libc = ctypes.CDLL(None, use_errno=True)
        number = {"x86_64": 315, "aarch64": 275}[os.uname().machine]  # sched_getattr
        assert libc.syscall(number, 0, buf, 56, 0) == 0
        assert struct.unpack_from("=IIQiIQ", buf.raw)[5] == 200_000
    finally:
        set_slice(0, 0.0)  # 0: back to the kernel's default
