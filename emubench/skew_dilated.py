"""The skew figures at the papers' operating point: ``--dilate`` on the three skew sweeps.

``emubench mcast sweep --dilate``, ``emubench nicvm sweep --dilate`` and ``emubench reduce-skew
sweep --dilate`` each measure D first (`emubench.dilation.measure`: our no-skew latency of the
operation at the figure's node count, under ``--dilate-wait``, default hybrid, the latency
figures' policy), then run their own
skew jobs, unchanged, with every paper skew multiplied by D, ``--dilate-repeats`` times (fresh
seeds), and write ``<figure>_dilated.json`` and ``.png``: CPU per operation against the paper's
skew (bottom axis) and ours (top axis), error bars the standard deviation over repeats, the
HB / NB factor with its range over repeats and the paper's number, D and its inputs in the
title. ``--dilation D`` skips the measurement (a re-run at a known D; the JSON says so).

This module is plumbing: the measurements are the benchmarks' own rank programs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from emubench import dilation as dil
from emubench.common import (
    command_line,
    environment,
    load_average,
    pyplot,
    read_json,
    run_emurun_json,
    save_figure,
    write_json,
)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

__all__ = ["FIGURES", "Figure", "add_arguments", "draw", "run", "summarise"]

JOB_TIMEOUT_S = 3600
"""emurun's ``--timeout`` for one dilated skew job: its busy loops grow with D (the benchmarks'
900 s default ended a 16-node Fig 7 job at D = 795 on a loaded VM)."""
Samples = dict[tuple[str, float, str], list[list[list[float]]]]
"""(series, paper skew, variant) -> per repeat, per rank, per-iteration CPU (us)."""


@dataclass(frozen=True, slots=True)
class Figure:
    """What differs between the three dilated skew figures."""

    name: str
    """File stem, ``<name>_dilated.json``."""
    title: str
    """The paper's figure."""
    op: str
    """The operation D is measured with (`emubench.dilation.OPS`)."""
    skew_kind: str
    """``average`` or ``maximum``: what the paper's skew axis means."""
    paper_skews: tuple[float, ...]
    """The paper's skews (us) unless ``--paper-skews`` says otherwise."""
    variants: tuple[str, str]
    """Host-based and offloaded variant names as the rank program keys them."""
    labels: tuple[str, str]
    """Their names on the figure."""
    series_unit: str
    """What a series is (``B`` for message bytes, ``doubles``)."""
    paper: tuple[tuple[str, float, float], ...]
    """The paper's numbers drawn on the factor panel: (label, paper skew, factor)."""


FIGURES: dict[str, Figure] = {
    "mcast": Figure(
        "mcast_fig7",
        "seed 001 Fig 7: host CPU time in MPI_Bcast under skew",
        "bcast",
        "average",
        (0.0, 100.0, 200.0, 400.0),
        ("binomial", "nic-mcast"),
        ("HB", "NB"),
        "B",
        (
            ("paper 2-8 B", 400.0, 5.82),
            ("paper 2 KiB", 400.0, 2.9),
            ("paper 4 KiB", 400.0, 2.22),
            ("paper 8 KiB", 400.0, 2.01),
        ),
    ),
    "nicvm": Figure(
        "nicvm_skew",
        "thesis Figs 4.16-4.18: NICVM broadcast CPU under skew",
        "bcast",
        "maximum",
        (0.0, 250.0, 1000.0),
        ("binomial", "nicvm"),
        ("binomial", "nicvm"),
        "B",
        (("paper, 16 nodes", 1000.0, 2.2),),
    ),
    "reduce": Figure(
        "reduce_skew_fig3_6",
        "thesis Fig 3.6: reduce CPU utilisation under skew",
        "reduce",
        "maximum",
        (0.0, 250.0, 500.0, 1000.0),
        ("nab", "ab"),
        ("nab", "ab"),
        "doubles",
        (("paper 16 nodes (slides)", 1000.0, 3.3), ("paper 32 nodes (thesis)", 1000.0, 5.1)),
    ),
}
"""Benchmark -> its dilated figure."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--dilate`` options every skew sweep takes."""
    group = parser.add_argument_group("the paper's operating point (time dilation)")
    group.add_argument(
        "--dilate",
        "--operating-point",
        action="store_true",
        help="run only the skew figure, every paper skew x D (our no-skew latency"
        " / the paper's, measured first); writes <figure>_dilated.json/png",
    )
    group.add_argument(
        "--dilation",
        type=float,
        metavar="D",
        help="use this D instead of measuring it (implies --dilate)",
    )
    group.add_argument(
        "--dilate-repeats",
        type=int,
        default=3,
        metavar="N",
        help="jobs per point with fresh seeds (the spread over repeats)",
    )
    group.add_argument(
        "--paper-skews",
        type=float,
        nargs="+",
        metavar="US",
        help="the paper's skews to dilate (default: the paper figure's)",
    )
    group.add_argument(
        "--dilate-iters",
        type=int,
        default=30,
        metavar="N",
        help="iterations of the job that measures D",
    )
    group.add_argument(
        "--dilate-wait",
        default="hybrid",
        choices=("spin", "block", "hybrid"),
        help="wait policy of the job that measures D (default hybrid, the policy of every "
        "latency figure: with more spinning hosts than cores, a spin latency measures the "
        "scheduler)",
    )
    group.add_argument(
        "--dilate-warmup",
        type=int,
        default=2,
        metavar="N",
        help="warm-up iterations of each dilated skew job",
    )
    group.add_argument(
        "--dilate-sizes",
        type=int,
        nargs="+",
        metavar="N",
        help="message bytes (reduce: doubles) of the dilated skew jobs "
        "(default: mcast 4 4096, nicvm 32 4096, reduce --elements)",
    )


def wanted(args: argparse.Namespace) -> bool:
    """Whether the command line asks for the dilated figure."""
    return bool(args.dilate or args.dilation is not None)


def run(
    bench: str,
    args: argparse.Namespace,
    *,
    nodes: int,
    wait: str,
    calib_size: int,
    series: Sequence[int],
    jobs: Callable[[list[float], int], dict[float, dict[str, dict[str, list[list[float]]]]]],
    out: str,
) -> dict[str, Any]:
    """Measure (or take) D, run ``jobs(our_skews, repeat)`` ``--dilate-repeats`` times, write
    ``out`` (JSON) and the PNG beside it; return the report. ``jobs`` returns, per our skew,
    per series (str), per variant: per rank, the per-iteration CPU samples."""
    figure = FIGURES[bench]
    load_before = load_average()
    if args.dilation is not None:
        d = dil.given(figure.op, nodes, args.dilation)
    else:
        d = dil.measure(
            figure.op, nodes, wait=args.dilate_wait, iters=args.dilate_iters, size=calib_size
        )
    print(d.caption(), flush=True)
    paper_skews = list(args.paper_skews or figure.paper_skews)
    ours = dil.dilate_skews(paper_skews, d.factor)
    to_paper = dict(zip(ours, paper_skews, strict=True))
    report: dict[str, Any] = {
        "figure": figure.title,
        "command": command_line(
            {"mcast": "mcast", "nicvm": "nicvm", "reduce": "reduce-skew"}[bench], args.argv
        ),
        "nodes": nodes,
        "wait_policy": {"skew_jobs": wait, "dilation_measurement": args.dilate_wait},
        "dilation": d.to_json(),
        "skew_kind": figure.skew_kind,
        "paper_skews_us": paper_skews,
        "skews_us": ours,
        "series": [f"{s} {figure.series_unit}" for s in series],
        "repeats_asked": args.dilate_repeats,
        "paper": [{"what": w, "paper_skew_us": s, "factor": f} for w, s, f in figure.paper],
    }
    samples: Samples = {}
    raw: list[Any] = []
    for repeat in range(args.dilate_repeats):
        got = jobs(ours, repeat)
        raw.append({f"{s:g}": v for s, v in got.items()})
        for skew, by_series in got.items():
            for name, by_variant in by_series.items():
                for variant, ranks in by_variant.items():
                    key = (name, to_paper[skew], variant)
                    samples.setdefault(key, []).append(ranks)
        # written after every repeat: a run stopped early leaves the repeats it finished
        report |= {"repeats": repeat + 1, "raw_cpu_us": raw} | summarise(figure, samples)
        report["environment"] = environment(load_before, wait_policy=f"skew jobs {wait}")
        write_json(out, report)
        draw(figure, report, out.removesuffix(".json") + ".png")
        print(f"{figure.name} dilated: repeat {repeat} done, wrote {out}", flush=True)
    return report


def summarise(figure: Figure, samples: Samples) -> dict[str, Any]:
    """Points (per series, paper skew, variant: `emubench.dilation.spread`) and factors (per
    series and paper skew: `emubench.dilation.factor_spread`) of a dilated figure."""
    points: list[dict[str, Any]] = [
        {"series": name, "paper_skew_us": skew, "variant": variant} | dil.spread(repeats)
        for (name, skew, variant), repeats in sorted(samples.items())
    ]
    hb, nb = figure.variants
    at = {(p["series"], p["paper_skew_us"], p["variant"]): p for p in points}
    factors: list[dict[str, Any]] = []
    for name, skew, variant in sorted(at):
        if variant != hb or (name, skew, nb) not in at:
            continue
        row = dil.factor_spread(
            at[(name, skew, hb)]["repeat_means_us"], at[(name, skew, nb)]["repeat_means_us"]
        )
        factors.append({"series": name, "paper_skew_us": skew} | row)
    top = max((f["paper_skew_us"] for f in factors), default=None)
    at_top = {f["series"]: f["spread_over_effect"] for f in factors if f["paper_skew_us"] == top}
    return {"points": points, "factors": factors, "spread_over_effect_at_max_skew": at_top}


def draw(figure: Figure, report: dict[str, Any], path: str) -> None:
    """The PNG: (a) CPU per operation with error bars against both skew axes, (b) the factor
    with its range over repeats and the paper's numbers; D and its inputs in the title."""
    plt = pyplot()
    d = report["dilation"]
    factor = float(d["factor"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5.2))
    hb, nb = figure.variants
    names = sorted({p["series"] for p in report["points"]}, key=lambda s: float(s.split()[0]))
    for i, name in enumerate(names):
        for variant, label, style in ((hb, figure.labels[0], "o--"), (nb, figure.labels[1], "s-")):
            rows = sorted(
                (p for p in report["points"] if p["series"] == name and p["variant"] == variant),
                key=lambda p: p["paper_skew_us"],
            )
            a.errorbar(
                [p["paper_skew_us"] for p in rows],
                [p["mean_us"] for p in rows],
                yerr=[p["sd_repeats_us"] for p in rows],
                fmt=style,
                color=f"C{i}",
                capsize=3,
                label=f"{label} {name}",
            )
        rows = sorted(
            (f for f in report["factors"] if f["series"] == name), key=lambda f: f["paper_skew_us"]
        )
        ys = [f["factor"] for f in rows]
        b.errorbar(
            [f["paper_skew_us"] for f in rows],
            ys,
            yerr=[
                [y - f["factor_min"] for y, f in zip(ys, rows, strict=True)],
                [f["factor_max"] - y for y, f in zip(ys, rows, strict=True)],
            ],
            fmt="s-",
            color=f"C{i}",
            capsize=3,
            label=name,
        )
    for j, (label, skew, value) in enumerate(figure.paper):
        b.plot(
            [skew],
            [value],
            "*",
            color="k" if j == 0 else "gray",
            markersize=11,
            label=f"{label}: {value:g}",
        )
    b.axhline(1.0, color="black", linewidth=0.6)
    kind = figure.skew_kind
    for ax, ylabel, panel in (
        (
            a,
            f"host CPU per operation (us), mean over ranks, +/- sd over {report['repeats']} "
            "repeats",
            "(a) CPU",
        ),
        (
            b,
            f"factor {figure.labels[0]} / {figure.labels[1]} (median; bar: range over repeats)",
            "(b) Improvement",
        ),
    ):
        ax.set_xlabel(f"paper's {kind} skew (us)")
        ax.set_ylabel(ylabel, fontsize=8)
        top = ax.secondary_xaxis("top", functions=(lambda x: x * factor, lambda x: x / factor))
        top.set_xlabel(f"our {kind} skew (us) = paper x D", fontsize=8)
        ax.set_title(f"{panel}, {report['nodes']} nodes", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    means = [p["mean_us"] for p in report["points"] if p["mean_us"] > 0]
    if means and max(means) > 20 * min(means):
        a.set_yscale("log")
    spread = spread_text(report)
    fig.suptitle(
        f"{figure.title}, at the paper's operating point (time dilation)\n"
        f"{dil.caption(d)}\n"
        f"paper latency modelled as {d['depth']} hops x L_paper (seed 002: 10-20 us end to end); "
        f"{d['source']}; sd(HB-NB)/(HB-NB) over repeats at the largest skew: {spread}",
        fontsize=8,
    )
    save_figure(fig, path)


def spread_text(report: dict[str, Any]) -> str:
    """``sd(HB - NB) / (HB - NB)`` over repeats at the largest skew, per series."""
    at = report.get("spread_over_effect_at_max_skew") or {}
    return ", ".join(f"{v:.2f} ({k})" if v is not None else f"n/a ({k})" for k, v in at.items())


def from_json(bench: str, path: str) -> None:
    """Summarise ``path`` again from its raw samples, rewrite it and redraw its PNG."""
    figure, report = FIGURES[bench], read_json(path)
    to_paper = dict(zip(report["skews_us"], report["paper_skews_us"], strict=True))
    samples: Samples = {}
    for repeat in report["raw_cpu_us"]:
        for skew, by_series in repeat.items():
            for name, by_variant in by_series.items():
                for variant, ranks in by_variant.items():
                    key = (name, to_paper[float(skew)], variant)
                    samples.setdefault(key, []).append(ranks)
    report.pop("max_spread_over_effect", None)
    report |= summarise(figure, samples)
    write_json(path, report)
    draw(figure, report, path.removesuffix(".json") + ".png")


# -- each benchmark's jobs ----------------------------------------------------------------------


def reduce_jobs(
    args: argparse.Namespace, nodes: int, series: Sequence[int]
) -> Callable[[list[float], int], dict[float, dict[str, dict[str, list[list[float]]]]]]:
    """`emubench.reduce_skew`'s rank program, nab and ab only, one job per repeat."""

    def job(skews: list[float], repeat: int) -> dict[float, dict[str, dict[str, Any]]]:
        result, _ = run_emurun_json(
            nodes,
            "emubench.reduce_skew",
            [
                "--variants",
                "nab",
                "ab",
                "--iters",
                str(args.iters),
                "--warmup",
                str(args.warmup),
                "--bound-us",
                str(args.bound_us),
                "--slice-us",
                str(args.slice_us),
                "--seed",
                str(args.seed + repeat),
                "--skews",
                *map(str, skews),
                "--elements",
                *map(str, args.elements),
                "--latency-elements",
            ],
            {"EMU_WAIT": args.wait},
            emurun_args=["--nicd-args", "--dead-peer-s 30"],
            timeout_s=JOB_TIMEOUT_S,
        )
        out: dict[float, dict[str, dict[str, Any]]] = {}
        for u in result["utilisation"]:
            out.setdefault(float(u["skew_us"]), {})[f"{u['elements']} doubles"] = {
                v: [rank[v]["cpu_us"] for rank in u["ranks"]] for v in ("nab", "ab")
            }
        return out

    return job


def mcast_jobs(
    args: argparse.Namespace, nodes: int, sizes: Sequence[int]
) -> Callable[[list[float], int], dict[float, dict[str, dict[str, list[list[float]]]]]]:
    """`emubench.mcast`'s ``skew`` rank program (average skews), one job per repeat."""

    def job(skews: list[float], repeat: int) -> dict[float, dict[str, dict[str, Any]]]:
        extra = [
            "--skews",
            *map(str, skews),
            "--iters",
            str(args.skew_iters),
            "--warmup",
            "3",
            "--sizes",
            *map(str, sizes),
            "--seed",
            str(args.seed + repeat),
        ]
        result, _ = run_emurun_json(
            nodes, "emubench.mcast", ["skew", *extra], {"EMU_WAIT": "spin"}, timeout_s=JOB_TIMEOUT_S
        )
        ranks = result["cpu_us_per_rank"]  # non-root ranks, as the paper averages
        out: dict[float, dict[str, dict[str, Any]]] = {}
        for skew in skews:
            for size in sizes:
                out.setdefault(skew, {})[f"{size} B"] = {
                    v: [r[f"{size} {skew:g} {v}"] for r in ranks] for v in ("binomial", "nic-mcast")
                }
        return out

    return job


def nicvm_jobs(
    args: argparse.Namespace, nodes: int, sizes: Sequence[int]
) -> Callable[[list[float], int], dict[float, dict[str, dict[str, list[list[float]]]]]]:
    """`emubench.nicvm`'s ``skew`` rank program (maximum skew), one job per skew and repeat."""

    def job(skews: list[float], repeat: int) -> dict[float, dict[str, dict[str, Any]]]:
        out: dict[float, dict[str, dict[str, Any]]] = {}
        for skew in skews:
            extra = [
                "--iters",
                str(args.skew_iters),
                "--skew-us",
                str(skew),
                "--bound-us",
                str(args.bound_us),
                "--seed",
                str(args.seed + repeat),
                "--sizes",
                *map(str, sizes),
            ]
            result, _ = run_emurun_json(
                nodes,
                "emubench.nicvm",
                ["skew", *extra],
                {"EMU_WAIT": args.wait},
                timeout_s=JOB_TIMEOUT_S,
            )
            ranks = result["ranks"]
            out[skew] = {
                f"{size} B": {
                    a: [r[str(size)][a]["cpu_us"] for r in ranks] for a in ("binomial", "nicvm")
                }
                for size in sizes
            }
        return out

    return job
