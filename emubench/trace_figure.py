"""``emubench trace``: the broadcast timeline of docs/results.md and the cost of tracing.

``picture``: one skewed broadcast on N nodes, traced, once with ``--bcast nic-mcast`` and once
with ``--bcast binomial``, the same skews (seeded, per rank) in both. Each panel is exactly one
broadcast, the job's last ``Bcast`` (warm-up ones come before it): from the root's call to
the last rank's return with the data, drawn on one time axis (0 = the root's call) so the two
compare like with like. Writes ``trace_bcast.png`` and ``trace_bcast.json`` (the parameters,
the skews, and per algorithm the broadcast's numbers read from its trace) into ``--out-dir``;
the traces themselves stay in ``--work-dir`` (open them in ui.perfetto.dev).
``overhead``: the 8-byte ping-pong untraced then traced, alternating ``--rounds`` times; prints
the median one-way latency of each and the overhead of tracing in percent.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from pathlib import Path
from typing import Any

from emubench.common import run_emurun_json
from emutrace.merge import draw_axes

__all__ = ["broadcast_view", "main", "one_broadcast", "rank_skew_us"]

ALGORITHMS = ("nic-mcast", "binomial")


def rank_skew_us(seed: int, rank: int, mean_us: float) -> float:
    """How long rank ``rank`` sleeps before the measured Bcast: uniform in [0, 2 x mean],
    seeded per rank (the same in every job of the same seed); the root does not sleep."""
    if rank == 0:
        return 0.0
    return random.Random(seed * 1000 + rank).uniform(0.0, 2.0 * mean_us)


def one_broadcast(trace: dict[str, Any]) -> dict[str, Any]:
    """The numbers of the job's last broadcast, read from its merged trace (times in us from
    the root's call): each node's call and return, the last return (the broadcast's end:
    the last rank holds the data), the packets sent and multicast sends made in between."""
    last: dict[int, dict[str, Any]] = {}
    for e in trace["traceEvents"]:
        mine = e.get("ph") == "X" and e.get("name") == "Bcast" and e.get("tid") == 1
        if mine and (e["pid"] not in last or e["ts"] > last[e["pid"]]["ts"]):
            last[e["pid"]] = e
    if 0 not in last:
        raise ValueError("no Bcast on the root (node 0) in the trace")
    t0 = last[0]["ts"]
    calls = {n: round(e["ts"] - t0, 1) for n, e in sorted(last.items())}
    returns = {n: round(e["ts"] + e["dur"] - t0, 1) for n, e in sorted(last.items())}
    end = max(returns.values())
    inside = [e for e in trace["traceEvents"] if "ts" in e and t0 <= e["ts"] <= t0 + end]
    return {
        "t0_us": t0,
        "algorithm": sorted({str(e.get("args", {}).get("algorithm")) for e in last.values()}),
        "duration_us": end,
        "last_call_us": max(calls.values()),
        "root_us": returns[0],
        "calls_us": calls,
        "returns_us": returns,
        "packets_sent": sum(e.get("name") == "pkt send" for e in inside),
        "mcast_sends": sum(e.get("name") in ("mcast send", "mcast forward") for e in inside),
        "retransmits": sum(e.get("name") == "retransmit" for e in inside),
    }


def broadcast_view(trace: dict[str, Any], numbers: dict[str, Any]) -> dict[str, Any]:
    """Only the broadcast of ``numbers`` (``one_broadcast``), on its own clock (0 = the
    root's call): each host's Bcast and the sleeps inside it, the NIC events up to the
    broadcast's end (nothing of the calls around it)."""
    t0, end = numbers["t0_us"], numbers["duration_us"]
    calls, returns = numbers["calls_us"], numbers["returns_us"]
    lo = min(0.0, *calls.values())
    events = []
    for e in trace["traceEvents"]:
        if "ts" not in e:
            events.append(e)
            continue
        ts, node = e["ts"] - t0, e.get("pid")
        if e.get("tid") == 1:  # host: the measured Bcast and what happened inside it
            key = str(node) if str(node) in calls else node
            if key not in calls or not calls[key] - 0.5 <= ts <= returns[key] + 0.5:
                continue
            if e.get("ph") == "X" and e["name"] not in ("Bcast", "wait sleep"):
                continue
        elif not lo <= ts <= end:
            continue
        events.append({**e, "ts": ts})
    return {**trace, "traceEvents": events}


def picture(args: argparse.Namespace) -> None:
    """Trace one skewed broadcast per algorithm; draw the pair; write the numbers."""
    out, work = Path(args.out_dir), Path(args.work_dir)
    out.mkdir(parents=True, exist_ok=True)
    rank_args = ["bcast", "--size", str(args.size), "--skew-us", str(args.skew_us),
                 "--seed", str(args.seed), "--bcast-warmup", str(args.bcast_warmup)]  # fmt: skip
    traces, numbers = {}, {}
    for algorithm in ALGORITHMS:
        trace_dir = work / f"trace-{algorithm}"
        run_emurun_json(args.nodes, "emubench.trace_ranks", rank_args,
                        emurun_args=("--trace", str(trace_dir), "--bcast", algorithm))  # fmt: skip
        traces[algorithm] = json.loads((trace_dir / "trace.json").read_text())
        numbers[algorithm] = one_broadcast(traces[algorithm])
        n = numbers[algorithm]
        print(f"{algorithm}: {n['duration_us']:.0f} us from the root's call to the last return "
              f"(last call at {n['last_call_us']:.0f} us, root busy {n['root_us']:.0f} us); "
              f"{trace_dir}/trace.json")  # fmt: skip
    doc = {
        "figure": "trace_bcast.png",
        "command": f"emubench trace picture --nodes {args.nodes} --size {args.size} "
                   f"--skew-us {args.skew_us:g} --seed {args.seed} "
                   f"--bcast-warmup {args.bcast_warmup}",
        "nodes": args.nodes, "size": args.size, "skew_mean_us": args.skew_us, "seed": args.seed,
        "warmup_bcasts": args.bcast_warmup,
        "skews_us": {r: round(rank_skew_us(args.seed, r, args.skew_us), 1)
                     for r in range(args.nodes)},
        "load": os.getloadavg(), "cpus": os.cpu_count(),
        "broadcasts": numbers,
    }  # fmt: skip
    (out / "trace_bcast.json").write_text(json.dumps(doc, indent=1) + "\n")
    try:
        import matplotlib  # optional: the bench extra

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is absent: no picture (pip install '.[bench]')", file=sys.stderr)
        return
    # One axis for both: from the earliest call (a rank may call before the root, which only
    # starts the broadcast) to the later broadcast's end; the root's call is at 0.
    lo_ms = min(0.0, *(min(n["calls_us"].values()) for n in numbers.values())) / 1000
    hi_ms = max(n["duration_us"] for n in numbers.values()) / 1000
    margin = 0.03 * (hi_ms - lo_ms)
    fig, axes = plt.subplots(1, 2, figsize=(16, 1 + 0.5 * args.nodes), sharey=True)
    for ax, algorithm in zip(axes, ALGORITHMS, strict=True):
        n = numbers[algorithm]
        view = broadcast_view(traces[algorithm], n)
        draw_axes(ax, view, (lo_ms - margin, hi_ms + margin))
        ax.axvline(0.0, color="tab:green", lw=0.8)
        ax.axvline(n["duration_us"] / 1000, color="tab:green", lw=0.8, ls="--")
        ax.set_title(f"{algorithm}: Bcast {args.size} B on {args.nodes} nodes, mean skew "
                     f"{args.skew_us:g} us: {n['duration_us'] / 1000:.2f} ms")  # fmt: skip
        ax.set_xlabel("ms after the root's call")
    fig.tight_layout()
    fig.savefig(out / "trace_bcast.png", dpi=110)
    print(f"picture: {out / 'trace_bcast.png'}; numbers: {out / 'trace_bcast.json'}")


def overhead(args: argparse.Namespace) -> None:
    """Median 8-byte ping-pong latency untraced and traced, same job settings, alternating."""
    rank_args = ["pingpong", "--iters", str(args.iters), "--warmup", str(args.warmup)]
    off, on = [], []
    for i in range(args.rounds):
        r, _ = run_emurun_json(2, "emubench.trace_ranks", rank_args)
        off.append(r["latency_us"])
        trace_dir = Path(args.work_dir) / f"overhead-{i}"
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
    p.add_argument("--out-dir", default="docs/figures")
    p.add_argument("--work-dir", default="/tmp/emubench-trace", help="traces of the picture")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--size", type=int, default=4)
    p.add_argument("--skew-us", type=float, default=100.0)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200, help="overhead: warm-up ping-pongs")
    p.add_argument("--bcast-warmup", type=int, default=2, help="picture: Bcasts before it")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    {"picture": picture, "overhead": overhead}[args.what](args)
