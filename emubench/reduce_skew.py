"""Reduce under process skew and without it (thesis 3.5, Figs 3.6-3.10), three variants in one job.

One emurun job (its rank side is `emubench.reduce_skew_rank`) measures every variant
interleaved iteration by iteration, so their ratios come from the same run: ``ab``
(application bypass), ``nab`` (the host-based binomial reduce) and ``ireduce`` (``Ireduce``
before the catch-up, ``Wait`` after it)::

    emurun -np 16 python -m emubench.reduce_skew --skews 0 500 1000 --elements 4 32 \
        --latency-elements 1 128 --out run.json

CPU utilisation (Figs 3.6-3.8), per iteration after a barrier: start; busy-loop a random skew
in [0, max] (`emucluster.hosttime.spin`: this host's own-processor time, prolonged by signal
handlers that interrupt it, as a loop of fixed iterations is); the reduce; the catch-up (max
skew + ``--bound-us``, prolonged while an application-bypass reduction of this rank is still
outstanding, see `reduce_skew_rank`); stop. The paper's utilisation is elapsed - nominal skew -
nominal catch-up (``wall_us``, on the own-processor clock). ``cpu_us``, on which comparisons
are based, is the public `emucluster.hosttime.Region` measure of the same interval (process CPU
time, signal handlers included, plus the library's waits for the NIC charged as polling) minus
the busy loops. The catch-up *sleeps* (``ireduce``: busy-loops between ``Ireduce`` and
``Wait``): on a real cluster a rank's catch-up loop costs no other rank anything, but here a
busy one takes the shared cores from the ranks still in their skew loops, and the waits of the
ranks waiting for those (charged as polling) grow with it.

Latency (Figs 3.9-3.10), the thesis's method: the one-way latency between the root and the
*last node* (deepest in the tree) is measured by ping-pong; per iteration after a barrier the
last node starts timing just before its reduce, the root sends a notification when its reduce
completes, and the last node stops timing on its arrival and subtracts the one-way latency.

Each host first asks the kernel for a short time slice (``--slice-us``, `launcher.tuning.
set_slice`) so that many busy hosts on few cores share them finely (see the README). Rank 0
writes JSON: parameters, environment (wait policy, nicd scheduling, slice), per-rank raw samples
and the application-bypass counters.

``emubench reduce-skew sweep --out docs/figures/reduce_skew.json`` runs the
jobs of every figure through emurun (repeated; medians of the per-repeat means; each job's
result kept in ``--work DIR``, which a sweep given the same DIR reuses, to resume), writes one
JSON with the paper's factor beside the measured one and one PNG per figure (``plot FILE.json``
redraws them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from emubench import skew_dilated
from emubench.common import (
    command_line,
    environment,
    load_average,
    pyplot,
    read_json,
    run_emurun,
    save_figure,
    write_json,
)
from emubench.reduce_skew_rank import VARIANTS, run_rank

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["PAPER", "main", "plot", "summarise"]

PAPER: dict[str, dict[str, object]] = {
    # The factor of improvement (nab / ab CPU utilisation) the thesis (32 nodes, Figs 3.6-3.8)
    # and the slides (seed 003, 16 nodes) report; latency: the text of 3.5.2.
    "fig3_6": {"what": "max factor nab/ab over skews 0-1000 us, 4 doubles",
               "thesis_32_nodes": 5.1, "slides_16_nodes": 3.3},
    "fig3_7": {"what": "factor nab/ab at 1000 us skew, grows with nodes (max at most nodes)",
               "thesis_32_nodes": 5.1, "slides_16_nodes": 3.3},
    "fig3_8": {"what": "factor nab/ab without skew, max at most nodes",
               "thesis_32_nodes": 1.5, "slides_16_nodes": 1.18},
    "fig3_9": {"what": "latency ab vs nab, 1 double: nearly equal up to 4 nodes, signal "
                       "overhead visible from 8 nodes (no number given; target ab/nab <= 1.5)"},
    "fig3_10": {"what": "latency ab vs nab over 1-128 doubles: the ab penalty stays about "
                        "constant (no number given; target ab/nab <= 1.5)"},
}  # fmt: skip


# -- the sweep ------------------------------------------------------------------------------


ATTEMPTS = 3
"""A job that fails (a loaded machine can delay a host's start past the peers' patience) is
run again, up to this many times."""


def _job(nodes: int, args: argparse.Namespace, skews: list[float], elements: list[int],
         latency_elements: list[int], name: str) -> dict[str, Any]:  # fmt: skip
    """One emurun job; its result is kept in ``args.work`` so an interrupted sweep resumes."""
    os.makedirs(args.work, exist_ok=True)
    path = os.path.join(args.work, f"{name}.json")
    if os.path.exists(path):
        cached: dict[str, Any] = read_json(path)
        return cached
    rank_args = ["--iters", str(args.iters), "--warmup", str(args.warmup),
                 "--bound-us", str(args.bound_us), "--slice-us", str(args.slice_us),
                 "--seed", str(args.seed), "--out", path + ".part",
                 "--skews", *map(str, skews), "--elements", *map(str, elements),
                 "--latency-elements", *map(str, latency_elements)]  # fmt: skip
    for attempt in range(1, ATTEMPTS + 1):
        started = time.monotonic()
        done = run_emurun(nodes, "emubench.reduce_skew", rank_args, {"EMU_WAIT": args.wait},
                          emurun_args=["--nicd-args", "--dead-peer-s 30"], timeout_s=3600,
                          check=False)  # fmt: skip
        if done.returncode == 0:
            break
        print(f"{name}: attempt {attempt} failed ({done.returncode})", flush=True)
    else:
        raise RuntimeError(f"{name}: {ATTEMPTS} attempts failed")
    result: dict[str, Any] = read_json(path + ".part")
    result["job_seconds"] = round(time.monotonic() - started, 1)
    result["attempts"] = attempt
    write_json(path, result)
    os.unlink(path + ".part")
    return result


def sweep(args: argparse.Namespace) -> None:
    """Every figure's jobs, ``--repeats`` times; JSON with the summary, one PNG per figure."""
    load_before = load_average()
    jobs: list[dict[str, Any]] = []
    big = max(args.nodes)
    for repeat in range(args.repeats):
        for nodes in args.nodes:
            skews = sorted({0.0, args.skew_us, *(args.skews if nodes == big else [])})
            latency = args.latency_elements if nodes == big else [1]
            result = _job(nodes, args, skews, args.elements, latency, f"n{nodes}_r{repeat}")
            result["repeat"] = repeat
            jobs.append(result)
            print(f"repeat {repeat} nodes {nodes}: {result['job_seconds']} s", flush=True)
    for nodes in args.extra_nodes:  # e.g. 32: Fig 3.7/3.8 at 4 doubles, once, if it runs
        try:
            result = _job(nodes, args, [0.0, args.skew_us], [args.elements[0]], [1], f"n{nodes}")
        except RuntimeError as exc:
            print(f"{nodes} nodes did not run: {exc}", flush=True)
            continue
        result["repeat"] = 0
        jobs.append(result)
        print(f"nodes {nodes}: {result['job_seconds']} s", flush=True)
    summary = summarise(jobs, args)
    report = {
        "command": command_line("reduce-skew", args.argv),
        "environment": environment(load_before, wait_policy=args.wait),
        "paper": PAPER,
        "summary": summary,
        "jobs": jobs,
    }
    write_json(args.out, report)
    stem = args.out.removesuffix(".json")
    plot(summary, stem)
    print(json.dumps(summary["factors"], indent=1))


def _cell(samples: list[dict[str, dict[str, list[float]]]], variant: str, key: str) -> float:
    """Mean over ranks and iterations (the paper's average over nodes)."""
    return float(np.mean([np.mean(rank[variant][key]) for rank in samples]))


def summarise(jobs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """Medians over repeats of each (nodes, skew, elements, variant) mean; factors nab/ab."""
    util: dict[tuple[int, float, int, str], dict[str, list[float]]] = {}
    lat: dict[tuple[int, int, str], list[float]] = {}
    for job in jobs:
        nodes = job["parameters"]["nodes"]
        for u in job["utilisation"]:
            for variant in job["parameters"]["variants"]:
                cell = util.setdefault((nodes, u["skew_us"], u["elements"], variant),
                                       {"cpu_us": [], "wall_us": [], "settle_us": []})  # fmt: skip
                for key in cell:
                    if key in u["ranks"][0][variant]:
                        cell[key].append(_cell(u["ranks"], variant, key))
        for x in job["latency"]:
            for variant, samples in x["last_node_samples"].items():
                lat.setdefault((nodes, x["elements"], variant), []).append(float(np.mean(samples)))
    rows = [
        {"nodes": n, "skew_us": s, "elements": e, "variant": v,
         "cpu_outside_busy_us": float(np.median(c["cpu_us"])),
         "utilisation_us": float(np.median(c["wall_us"])), "repeats": c["cpu_us"],
         "settle_us": float(np.median(c["settle_us"])) if c["settle_us"] else 0.0}
        for (n, s, e, v), c in sorted(util.items())
    ]  # fmt: skip
    lat_rows = [
        {"nodes": n, "elements": e, "variant": v, "latency_us": float(np.median(m)), "repeats": m}
        for (n, e, v), m in sorted(lat.items())
    ]

    def cpu(n: int, s: float, e: int, v: str) -> float | None:
        c = util.get((n, s, e, v))
        return float(np.median(c["cpu_us"])) if c else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a is not None and b else None

    big = max(args.nodes)
    skews = sorted({s for (_, s, _, _) in util})
    nodes = sorted({n for (n, _, _, _) in util})
    factors: dict[str, Any] = {
        "fig3_6": {f"{e} doubles": {f"{s:g} us": ratio(cpu(big, s, e, "nab"), cpu(big, s, e, "ab"))
                                     for s in skews if cpu(big, s, e, "ab") is not None}
                   for e in args.elements},
        "fig3_7": {f"{e} doubles": {f"{n} nodes": ratio(cpu(n, args.skew_us, e, "nab"),
                                                        cpu(n, args.skew_us, e, "ab"))
                                     for n in nodes if cpu(n, args.skew_us, e, "ab") is not None}
                   for e in args.elements},
        "fig3_8": {f"{e} doubles": {f"{n} nodes": ratio(cpu(n, 0.0, e, "nab"), cpu(n, 0.0, e, "ab"))
                                     for n in nodes if cpu(n, 0.0, e, "ab") is not None}
                   for e in args.elements},
    }  # fmt: skip

    def latency(n: int, e: int, v: str) -> float | None:
        m = lat.get((n, e, v))
        return float(np.median(m)) if m else None

    lat_nodes = sorted({n for (n, _, _) in lat})
    factors["fig3_9"] = {
        "ab/nab latency, 1 double": {
            f"{n} nodes": ratio(latency(n, 1, "ab"), latency(n, 1, "nab")) for n in lat_nodes
        }
    }
    factors["fig3_10"] = {f"ab/nab latency, {big} nodes": {
        f"{e} doubles": ratio(latency(big, e, "ab"), latency(big, e, "nab"))
        for e in args.latency_elements}}  # fmt: skip
    return {"utilisation": rows, "latency": lat_rows, "factors": factors, "fixed_nodes": big,
            "max_skew_us": args.skew_us}  # fmt: skip


# -- figures --------------------------------------------------------------------------------

STYLE = {"nab": ("o-", "tab:red"), "ab": ("s-", "tab:blue"), "ireduce": ("^--", "tab:gray")}
SIZE_ALPHA = {0: 1.0, 1: 0.7, 2: 0.45}


def plot(summary: dict[str, Any], stem: str) -> None:
    """One PNG per figure, drawn like the thesis's: (a) the metric, (b) the factor."""
    plt = pyplot()

    rows = summary["utilisation"]
    big, max_skew = summary["fixed_nodes"], summary["max_skew_us"]
    elements = sorted({r["elements"] for r in rows})
    figures: tuple[tuple[str, str, Callable[[dict[str, Any]], bool], str, str, str], ...] = (
        ("fig3_6", "skew_us", lambda r: r["nodes"] == big, f"maximum skew (us), {big} nodes",
         f"Fig 3.6: CPU utilisation vs skew, {big} nodes",
         "paper: max factor 3.3 (16 nodes, slides), 5.1 (32 nodes), 4 doubles at 1000 us"),
        ("fig3_7", "nodes", lambda r: r["skew_us"] == max_skew, f"nodes, {max_skew:g} us max skew",
         "Fig 3.7: CPU utilisation vs nodes at maximal skew",
         "paper: factor 3.3 at 16 nodes (slides), 5.1 at 32, growing with nodes"),
        ("fig3_8", "nodes", lambda r: r["skew_us"] == 0, "nodes, no skew",
         "Fig 3.8: CPU utilisation without skew",
         "paper: max factor 1.18 (16 nodes, slides), 1.5 (32 nodes, 128 doubles)"),
    )  # fmt: skip
    for name, x, keep, xlabel, title, paper in figures:
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.6))
        for j, e in enumerate(elements):
            cells = {(r[x], r["variant"]): r["cpu_outside_busy_us"] for r in rows
                     if keep(r) and r["elements"] == e}  # fmt: skip
            xs = sorted({k[0] for k in cells})
            for variant, (style, color) in STYLE.items():
                ys = [cells.get((v, variant)) for v in xs]
                if any(y is not None for y in ys):
                    ax.plot(xs, ys, style, color=color, alpha=SIZE_ALPHA.get(j, 0.3),
                            label=f"{variant}-{e}")  # fmt: skip
            fx = [v for v in xs if cells.get((v, "ab")) and (v, "nab") in cells]
            bx.plot(fx, [cells[(v, "nab")] / cells[(v, "ab")] for v in fx], "s-", color="tab:blue",
                    alpha=SIZE_ALPHA.get(j, 0.3), label=f"{e} doubles")  # fmt: skip
        ax.set_xlabel(xlabel)
        ax.set_ylabel("CPU outside busy loops per reduce (us)")
        ax.set_title(f"(a) {title}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=3)
        bx.axhline(1.0, color="black", linewidth=0.8)
        paper_factor = {"fig3_6": 3.3, "fig3_7": 3.3, "fig3_8": 1.18}[name]
        bx.axhline(
            paper_factor, color="tab:green", linestyle=":", label=f"paper 16 nodes: {paper_factor}"
        )
        bx.set_xlabel(xlabel)
        bx.set_ylabel("factor of improvement (nab / ab)")
        bx.set_title(f"(b) {paper}", fontsize=8)
        bx.grid(alpha=0.3)
        bx.legend(fontsize=8)
        if x == "nodes":
            for a in (ax, bx):
                a.set_xscale("log", base=2)
        save_figure(fig, f"{stem}_{name}.png")
    lat = summary["latency"]
    for name, x, keep, xlabel, title in (
        ("fig3_9", "nodes", lambda r: r["elements"] == 1, "nodes",
         "Fig 3.9: latency, 1 double, no skew"),
        ("fig3_10", "elements", lambda r: r["nodes"] == big, "doubles",
         f"Fig 3.10: latency, {big} nodes, no skew"),
    ):  # fmt: skip
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.6))
        cells = {(r[x], r["variant"]): r["latency_us"] for r in lat if keep(r)}
        xs = sorted({k[0] for k in cells})
        for variant, (style, color) in STYLE.items():
            ys = [cells.get((v, variant)) for v in xs]
            ax.plot(xs, ys, style, color=color, label=variant)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("reduce latency at the last node (us)")
        ax.set_title(f"(a) {title}", fontsize=10)
        bx.plot(xs, [cells[(v, "ab")] / cells[(v, "nab")] for v in xs], "s-", color="tab:blue",
                label="ab / nab")  # fmt: skip
        bx.axhline(1.0, color="black", linewidth=0.8)
        bx.axhline(1.5, color="tab:green", linestyle=":", label="target 1.5")
        bx.set_title("(b) paper: ab = nab up to 4 nodes, signal overhead from 8 nodes, about "
                     "constant over sizes", fontsize=8)  # fmt: skip
        bx.set_xlabel(xlabel)
        bx.set_ylabel("latency ratio ab / nab")
        for a in (ax, bx):
            a.set_xscale("log", base=2)
            a.grid(alpha=0.3)
            a.legend(fontsize=8)
        save_figure(fig, f"{stem}_{name}.png")


def main(argv: list[str] | None = None) -> None:
    """Entry point: one job under emurun, or ``sweep``."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="emubench reduce-skew")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--skews", type=float, nargs="*", default=[0.0, 1000.0],
                        help="maximum skews (us); a sweep: those of the most nodes")  # fmt: skip
    parser.add_argument("--skew-us", type=float, default=1000.0, help="sweep: Fig 3.7's skew")
    parser.add_argument("--bound-us", type=float, default=2000.0, help="latency bound")
    parser.add_argument("--elements", type=int, nargs="*", default=[4, 32, 128], help="doubles")
    parser.add_argument("--latency-elements", type=int, nargs="*", default=[1])
    parser.add_argument("--iters", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--slice-us", type=float, default=100.0,
                        help="host time slice asked of the kernel (0: default)")  # fmt: skip
    parser.add_argument("--out", default="reduce_skew.json")
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--extra-nodes", type=int, nargs="*", default=[])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--wait", default="spin", choices=("spin", "block", "hybrid"))
    parser.add_argument(
        "--work",
        default=None,
        help="sweep: keep each job's result here and reuse what is there (resume an "
        "interrupted sweep); default: a fresh directory, so a new sweep measures everything",
    )
    skew_dilated.add_arguments(parser)
    if argv and argv[0] == "sweep":
        args = parser.parse_args(argv[1:])
        args.argv = argv
        if skew_dilated.wanted(args):  # Fig 3.6 only, at the paper's operating point
            nodes, sizes = max(args.nodes), args.dilate_sizes or args.elements
            jobs = skew_dilated.reduce_jobs(args, nodes, sizes)
            skew_dilated.run("reduce", args, nodes=nodes, wait=args.wait, calib_size=1,
                             series=sizes, jobs=jobs, out=args.out)  # fmt: skip
            return
        if args.work is None:
            args.work = tempfile.mkdtemp(prefix="reduce_skew_jobs-")
        sweep(args)
        return
    if argv and argv[0] == "plot":  # redraw the figures of a sweep's JSON
        if "dilation" in read_json(argv[1]):
            skew_dilated.from_json("reduce", argv[1])
            return
        plot(read_json(argv[1])["summary"], argv[1].removesuffix(".json"))
        return
    run_rank(parser.parse_args(argv))


if __name__ == "__main__":
    main()
