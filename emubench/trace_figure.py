"""``emubench trace``: the README timeline and the cost of tracing.

``picture``: one skewed broadcast on N nodes, traced, once with ``--bcast nic-mcast`` and once
with ``--bcast binomial``; both timelines side by side in ``timeline_bcast.png`` (and each
job's ``trace.json`` under the output directory, to open in ui.perfetto.dev).
``overhead``: the 8-byte ping-pong untraced then traced, alternating ``--rounds`` times; prints
the median one-way latency of each and the overhead of tracing in percent.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from emubench.common import run_emurun_json

__all__ = ["main"]

ALGORITHMS = ("nic-mcast", "binomial")


def picture(args: argparse.Namespace) -> None:
    """Trace one skewed broadcast per algorithm and draw the pair."""
    from emutrace.merge import draw_axes, parse_window

    out = Path(args.out_dir)
    traces = {}
    for algorithm in ALGORITHMS:
        trace_dir = out / f"trace-{algorithm}"
        rank_args = ["bcast", "--size", str(args.size), "--skew-us", str(args.skew_us)]
        run_emurun_json(args.nodes, "emubench.trace_ranks", rank_args,
                        emurun_args=("--trace", str(trace_dir), "--bcast", algorithm))  # fmt: skip
        traces[algorithm] = json.loads((trace_dir / "trace.json").read_text())
        print(f"{algorithm}: {trace_dir}/trace.json")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is absent: no picture (pip install '.[bench]')", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 2, figsize=(16, 1 + 0.5 * args.nodes))
    for ax, algorithm in zip(axes, ALGORITHMS, strict=True):
        trace = traces[algorithm]  # each job has its own t0: a window per panel
        window = parse_window(args.window) if args.window else _bcast_window(trace)
        draw_axes(ax, trace, window)
        ax.set_title(
            f"Bcast {args.size} B, {args.nodes} nodes, skew {args.skew_us} us: {algorithm}"
        )
    fig.tight_layout()
    fig.savefig(out / "timeline_bcast.png", dpi=120)
    print(f"picture: {out / 'timeline_bcast.png'}")


def _bcast_window(trace: dict[str, Any]) -> tuple[float, float]:
    """From just before the first Bcast to the end of the last."""
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"]
             if e.get("ph") == "X" and e.get("name") == "Bcast"]  # fmt: skip
    if not spans:
        return (0.0, 5.0)
    lo = min(s for s, _ in spans) / 1000
    hi = max(e for _, e in spans) / 1000
    return (max(0.0, lo - 0.1), hi + 0.1)


def overhead(args: argparse.Namespace) -> None:
    """Median 8-byte ping-pong latency untraced and traced, same job settings, alternating."""
    rank_args = ["pingpong", "--iters", str(args.iters), "--warmup", str(args.warmup)]
    off, on = [], []
    for i in range(args.rounds):
        r, _ = run_emurun_json(2, "emubench.trace_ranks", rank_args)
        off.append(r["latency_us"])
        trace_dir = Path(args.out_dir) / f"overhead-{i}"
        r, _ = run_emurun_json(2, "emubench.trace_ranks", rank_args,
                               emurun_args=("--trace", str(trace_dir)))  # fmt: skip
        on.append(r["latency_us"])
    off_us, on_us = statistics.median(off), statistics.median(on)
    result = {"off_us": off_us, "on_us": on_us, "overhead_pct": 100 * (on_us / off_us - 1),
              "rounds": args.rounds, "iters": args.iters}  # fmt: skip
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    (Path(args.out_dir) / "trace_overhead.json").write_text(json.dumps(result, indent=1))
    print(f"8-byte ping-pong: off {off_us:.1f} us, on {on_us:.1f} us, "
          f"tracing costs {result['overhead_pct']:+.1f} %")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """``emubench trace picture|overhead``."""
    p = argparse.ArgumentParser(prog="emubench trace")
    p.add_argument("what", choices=("picture", "overhead"))
    p.add_argument("--out-dir", default="docs/figures/trace")
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--size", type=int, default=4)
    p.add_argument("--skew-us", type=float, default=100.0)
    p.add_argument("--window", default="", help="START:END ms (default: around the Bcasts)")
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    {"picture": picture, "overhead": overhead}[args.what](args)
