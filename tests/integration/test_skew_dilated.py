"""``--dilate`` on the three skew sweeps: real emurun jobs measure D, run the skew jobs at the
paper's skews x D and write the JSON and the figure (tiny counts: behaviour, not timing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from emubench.common import read_json

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--dilate-repeats", "2", "--dilate-iters", "3", "--dilate-warmup", "1",
        "--paper-skews", "0", "2"]  # fmt: skip


def _emubench(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "emubench", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


def _check(path: Path, variants: tuple[str, str], series: str) -> dict[str, Any]:
    report: dict[str, Any] = read_json(path)
    d = report["dilation"]
    assert d["source"].startswith("measured")
    assert d["ours_us"] > 0
    assert d["factor"] == pytest.approx(d["ours_us"] / d["paper_us"])
    assert report["skews_us"] == [0.0, float(round(2 * d["factor"]))]
    assert report["paper_skews_us"] == [0.0, 2.0]
    keys = {(p["series"], p["paper_skew_us"], p["variant"]) for p in report["points"]}
    assert keys == {(series, s, v) for s in (0.0, 2.0) for v in variants}
    assert all(len(p["repeat_means_us"]) == 2 for p in report["points"])
    assert {f["paper_skew_us"] for f in report["factors"]} == {0.0, 2.0}
    assert path.with_suffix(".png").stat().st_size > 10_000
    return report


def test_mcast_sweep_dilate(tmp_path: Path) -> None:
    _emubench("mcast", "sweep", "--dilate", "--out-dir", str(tmp_path), "--nodes", "2",
              "--dilate-sizes", "4", "--skew-iters", "2", *TINY)  # fmt: skip
    report = _check(tmp_path / "mcast_fig7_dilated.json", ("binomial", "nic-mcast"), "4 B")
    assert report["dilation"]["op"] == "bcast"
    assert not (tmp_path / "mcast_fig7.json").exists()  # only the dilated figure


def test_nicvm_sweep_dilate(tmp_path: Path) -> None:
    out = tmp_path / "nicvm_dilated.json"
    _emubench("nicvm", "sweep", "--operating-point", "--nodes", "2", "--dilate-sizes", "32",
              "--skew-iters", "2", *TINY, "--out", str(out))  # fmt: skip
    _check(out, ("binomial", "nicvm"), "32 B")


def test_reduce_skew_sweep_dilate(tmp_path: Path) -> None:
    out = tmp_path / "reduce_skew_dilated.json"
    _emubench("reduce-skew", "sweep", "--dilate", "--nodes", "2", "--elements", "4",
              "--iters", "2", *TINY, "--out", str(out))  # fmt: skip
    report = _check(out, ("ab", "nab"), "4 doubles")
    assert report["dilation"]["op"] == "reduce"
