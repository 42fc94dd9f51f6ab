"""CPU utilisation of Reduce under process skew (thesis 3.5, Figs 3.6-3.8), one run per call.

``emurun -np N python -m emucluster.bench.reduce_skew --variant ab --skew-us 1000 --out F``
runs one configuration; ``--variant`` is ``ab`` (application bypass), ``nab`` (the host-based
binomial reduce) or ``ireduce`` (``Ireduce`` before the catch-up, ``Wait`` after it). Per
iteration, after a barrier: start; busy-loop a random skew in [0, max]; the reduce; busy-loop
the catch-up (max skew + ``--bound-us``); stop. The paper's utilisation is elapsed - nominal
skew - nominal catch-up (wall clock). Because many emulated nodes share few cores, each rank
also reports the process CPU time outside its busy loops (``time.process_time``, with the CPU
of signal-driven progress that ran inside a busy loop moved back out of it), which time
slicing does not inflate. Busy loops count process CPU time, not wall time, for the same
reason. Rank 0 writes JSON: parameters, environment, per-rank means and raw samples, summary.

``python -m emucluster.bench.reduce_skew sweep --out docs/figures/reduce_skew.json`` runs the
variants over node counts and skews through emurun and draws ``reduce_skew.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

__all__ = ["main"]

PAPER = {  # thesis 3.5.1 / seed 003: the factor of improvement (nab / ab) at 1000 us skew
    "fig3.6_32_nodes_4_doubles": 5.1,
    "fig3.7_32_nodes_4_doubles": 5.1,
    "slides_16_nodes": 3.3,
    "fig3.8_no_skew_32_nodes_128_doubles": 1.5,
}


def _busy_cpu(seconds: float) -> None:
    """Spend ``seconds`` of this process's CPU time (a busy loop time slicing cannot stretch)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _async_cpu() -> float:
    from emucluster.mpi import appbypass

    bypass = appbypass.active()
    return bypass.async_cpu_s if bypass is not None else 0.0


def run_rank(args: argparse.Namespace) -> None:
    """One rank's side of one configuration."""
    from emucluster import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    rng = np.random.default_rng(args.seed * 1000 + rank)
    data = np.full(args.elements, rank + 1.0)
    out = np.zeros(args.elements)
    skew_max = args.skew_us / 1e6
    catch_up = skew_max + args.bound_us / 1e6
    algorithm = "app-bypass" if args.variant == "ab" else "binomial"
    wall: list[float] = []
    cpu: list[float] = []
    for i in range(args.warmup + args.iters):
        comm.Barrier()
        skew = float(rng.uniform(0, skew_max))
        t0, c0, a0 = time.perf_counter(), time.process_time(), _async_cpu()
        _busy_cpu(skew)
        c1 = time.process_time()
        if args.variant == "ireduce":
            request = comm.Ireduce(data, out, MPI.SUM, 0)
            c2 = time.process_time()
            _busy_cpu(catch_up)
            c3 = time.process_time()
            request.Wait()
        else:
            comm.Reduce(data, out, MPI.SUM, 0, algorithm=algorithm)
            c2 = time.process_time()
            _busy_cpu(catch_up)
            c3 = time.process_time()
        t1, c4 = time.perf_counter(), time.process_time()
        if i >= args.warmup:
            wall.append((t1 - t0 - skew - catch_up) * 1e6)
            outside = (c4 - c0) - (c1 - c0) - (c3 - c2) + (_async_cpu() - a0)
            cpu.append(outside * 1e6)
    if rank == 0:
        assert np.allclose(out, size * (size + 1) / 2)
    samples = comm.gather({"rank": rank, "wall_us": wall, "cpu_us": cpu}, 0)
    stats = comm.gather(_stats(), 0)
    if rank != 0:
        return
    assert samples is not None
    report = {
        "parameters": vars(args) | {"nodes": size},
        "environment": {k: v for k, v in os.environ.items() if k.startswith("EMU_")},
        "ranks": samples,
        "app_bypass": stats,
        "summary": {
            "utilisation_us": float(np.mean([np.mean(s["wall_us"]) for s in samples])),
            "cpu_outside_busy_us": float(np.mean([np.mean(s["cpu_us"]) for s in samples])),
        },
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f)


def _stats() -> dict[str, object]:
    import emucluster.mpi

    stats = emucluster.mpi.stats().get("app_bypass", {})
    return dict(stats) if isinstance(stats, dict) else {}


def sweep(args: argparse.Namespace) -> None:
    """Run the variants over node counts (Fig 3.7) and skews (Fig 3.6); write JSON and PNG."""
    runs: list[dict[str, Any]] = []
    configs = [(n, args.skew_us) for n in args.nodes] + [
        (args.nodes[-1], s) for s in args.skews if s != args.skew_us
    ]
    for nodes, skew in configs:
        for variant in ("nab", "ab", "ireduce"):
            with tempfile.NamedTemporaryFile(suffix=".json", dir="/tmp") as tmp:
                cmd = [sys.executable, "-m", "launcher.cli", "-np", str(nodes), "-q",
                       "--timeout", "600", sys.executable, "-m", "emucluster.bench.reduce_skew",
                       "--variant", variant, "--skew-us", str(skew), "--iters", str(args.iters),
                       "--elements", str(args.elements), "--out", tmp.name]  # fmt: skip
                subprocess.run(cmd, check=True, env={**os.environ, "EMU_WAIT": args.wait})
                with open(tmp.name, encoding="utf-8") as f:
                    result = json.load(f)
            summary = result["summary"]
            print(f"nodes={nodes} skew={skew} {variant}: utilisation "
                  f"{summary['utilisation_us']:.0f} us, CPU outside busy loops "
                  f"{summary['cpu_outside_busy_us']:.0f} us", flush=True)  # fmt: skip
            runs.append({"nodes": nodes, "skew_us": skew, "variant": variant, **result})
    report = {"paper_factors": PAPER, "wait_policy": args.wait, "runs": runs,
              "command": " ".join(sys.argv)}  # fmt: skip
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f)
    _plot(report, args.out.removesuffix(".json") + ".png", args.skew_us, args.nodes[-1])


def _plot(report: dict[str, Any], path: str, skew: float, nodes: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, key, fixed, label in (
        (axes[0], "skew_us", ("nodes", nodes), f"max skew (us), {nodes} nodes"),
        (axes[1], "nodes", ("skew_us", skew), f"nodes, {skew:.0f} us max skew"),
    ):
        for variant, style in (("nab", "o-"), ("ab", "s-"), ("ireduce", "^--")):
            rows = sorted((r[key], r["summary"]["cpu_outside_busy_us"]) for r in report["runs"]
                          if r["variant"] == variant and r[fixed[0]] == fixed[1])  # fmt: skip
            if rows:
                xs, ys = zip(*rows, strict=True)
                ax.plot(xs, ys, style, label=variant)
        ax.set_xlabel(label)
        ax.set_ylabel("CPU outside busy loops per reduce (us)")
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_title("like Fig 3.6 (paper: factor 5.1 at 32 nodes, 3.3 at 16)")
    axes[1].set_title("like Fig 3.7 (paper: factor grows with nodes)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> None:
    """Entry point: one configuration under emurun, or ``sweep``."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m emucluster.bench.reduce_skew")
    parser.add_argument("--variant", choices=("ab", "nab", "ireduce"), default="ab")
    parser.add_argument("--skew-us", type=float, default=1000.0)
    parser.add_argument("--bound-us", type=float, default=2000.0, help="latency bound")
    parser.add_argument("--elements", type=int, default=4, help="doubles per reduce")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="reduce_skew.json")
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--skews", type=float, nargs="+", default=[0, 250, 500, 1000])
    parser.add_argument("--wait", default="spin", choices=("spin", "block", "hybrid"))
    if argv and argv[0] == "sweep":
        sweep(parser.parse_args(argv[1:]))
    else:
        run_rank(parser.parse_args(argv))


if __name__ == "__main__":
    main()
