"""Figures 4-8 of seed 001 from the JSON of :mod:`emubench.mcast`, drawn like the paper:
(a) latency or CPU time of host-based (HB) and NIC-based (NB), (b) HB / NB improvement factor,
with the paper's factor written on the plot. ``emubench mcast-plot
docs/figures`` redraws every figure from the JSON files there."""

from __future__ import annotations

import os
import sys
from typing import Any

from emubench.common import pyplot, read_json, save_figure, write_json

__all__ = ["draw", "factors", "summarise", "table"]


def factors(report: dict[str, Any], fig: int) -> dict[str, dict[str, float]]:
    """HB / NB per series and size (fig 4: per destination count; 5, 6: per node count;
    7: per node count and size, keyed by average skew)."""
    out: dict[str, dict[str, float]] = {}
    if fig == 4:
        med = report["median_us"]
        for key, hb in med.items():
            k, size, variant = key.split()
            if variant == "host":
                out.setdefault(f"{k} dests", {})[size] = hb / med[f"{k} {size} nic"]
    elif fig in (5, 6):
        for nodes, run in report["runs"].items():
            lat = run["latency_us"]
            hb_name = "host" if fig == 5 else "binomial"
            nb_name = "nic" if fig == 5 else "nic-mcast"
            for key, hb in lat.items():
                size, variant = key.split()
                if variant == hb_name:
                    out.setdefault(f"{nodes} nodes", {})[size] = hb / lat[f"{size} {nb_name}"]
    else:
        for nodes, run in report["runs"].items():
            mean = run["run"]["mean_cpu_us"]
            for key, hb in mean.items():
                size, avg, variant = key.split()
                if variant == "binomial":
                    nb = mean[f"{size} {avg} nic-mcast"]
                    out.setdefault(f"{nodes} nodes {size} B", {})[avg] = hb / nb
    return out


def draw(fig: int, report: dict[str, Any], path: str) -> None:
    """Write ``path`` (PNG) for figure ``fig`` (7 also writes the fig 8 PNG beside it)."""
    plt = pyplot()

    fac = factors(report, fig)
    if fig == 4:
        fig_, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
        med = report["median_us"]
        for series in sorted(fac, key=lambda s: int(s.split()[0])):
            k = series.split()[0]
            sizes = sorted(fac[series], key=int)
            xs = [int(s) for s in sizes]
            a.plot(xs, [med[f"{k} {s} host"] for s in sizes], "o--", label=f"HB {k} dests")
            a.plot(xs, [med[f"{k} {s} nic"] for s in sizes], "s-", label=f"NB {k} dests")
            b.plot(xs, [fac[series][s] for s in sizes], "s-", label=series)
        _axes(a, "message size (bytes)", "latency (us)", "(a) Latency")
        _axes(b, "message size (bytes)", "improvement factor HB/NB", "(b) Improvement")
        b.axhline(2.05, color="gray", ls=":", label="paper: 2.05 (<=128 B, 4 dests)")
        b.legend(fontsize=8)
        fig_.suptitle("Fig 4: NIC multisend (NB) vs host multiple unicasts (HB)")
    elif fig in (5, 6):
        fig_, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
        hb_name, nb_name = ("host", "nic") if fig == 5 else ("binomial", "nic-mcast")
        for nodes, run in sorted(report["runs"].items(), key=lambda kv: int(kv[0])):
            lat = run["latency_us"]
            sizes = sorted({k.split()[0] for k in lat}, key=int)
            xs = [int(s) for s in sizes]
            a.plot(xs, [lat[f"{s} {hb_name}"] for s in sizes], "o--", label=f"HB {nodes} nodes")
            a.plot(xs, [lat[f"{s} {nb_name}"] for s in sizes], "s-", label=f"NB {nodes} nodes")
            by_size = fac[f"{nodes} nodes"]
            b.plot(xs, [by_size[s] for s in sizes], "s-", label=f"{nodes} nodes")
        level = "GM" if fig == 5 else "MPI"
        _axes(a, "message size (bytes)", "latency (us)", f"(a) {level}-level multicast latency")
        _axes(b, "message size (bytes)", "improvement factor HB/NB", "(b) Improvement")
        if fig == 5:
            b.axhline(1.48, color="gray", ls=":", label="paper 16 nodes: 1.48 (<=512 B)")
            b.axhline(1.86, color="k", ls=":", label="paper 16 nodes: 1.86 (16 KiB)")
        else:
            b.axhline(1.78, color="gray", ls=":", label="paper 16 nodes: 1.78 (<=512 B)")
            b.axhline(2.02, color="k", ls=":", label="paper 16 nodes: 2.02 (8 KiB)")
        b.legend(fontsize=8)
        fig_.suptitle(f"Fig {fig}: NIC-based (NB, optimal tree) vs host-based (HB, binomial)")
    else:
        _draw_skew(report, fac, path, plt)
        return
    save_figure(fig_, path)


def _draw_skew(report: dict[str, Any], fac: dict[str, dict[str, float]], path: str,
               plt: Any) -> None:  # fmt: skip
    runs = report["runs"]
    top = max(runs, key=int)
    mean = runs[top]["run"]["mean_cpu_us"]
    fig_, axes = plt.subplots(2, 2, figsize=(12, 8))
    for row, (label, paper) in enumerate(
        (("small", "paper 400 us: 5.82"), ("large", "paper 400 us: 2.9 / 2.22 / 2.01"))
    ):
        sizes = sorted({int(k.split()[0]) for k in mean})
        sizes = [s for s in sizes if (s < 1024) == (label == "small")]
        a, b = axes[row]
        for size in sizes:
            avgs = sorted({float(k.split()[1]) for k in mean if int(k.split()[0]) == size})
            for variant, style, tag in (("binomial", "o--", "HB"), ("nic-mcast", "s-", "NB")):
                a.plot(avgs, [mean[f"{size} {x:g} {variant}"] for x in avgs], style,
                       label=f"{tag} {size} B")  # fmt: skip
            b.plot(avgs, [fac[f"{top} nodes {size} B"][f"{x:g}"] for x in avgs], "s-",
                   label=f"{size} B")  # fmt: skip
        marks = (5.82,) if label == "small" else (2.9, 2.22, 2.01)
        b.plot([400] * len(marks), marks, "k*", markersize=10, label="paper at 400 us")
        _axes(a, "average skew (us)", "average host CPU time in Bcast (us)",
              f"({'ac'[row]}) {label.capitalize()} messages, {top} nodes")  # fmt: skip
        _axes(b, "average skew (us)", "improvement factor HB/NB",
              f"({'bd'[row]}) Improvement, {label} ({paper})")  # fmt: skip
    fig_.suptitle("Fig 7: host CPU time in MPI_Bcast under skew (spin wait)")
    save_figure(fig_, path)
    fig8, axes8 = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, size in zip(axes8, (4, 4096), strict=True):
        for nodes in sorted(runs, key=int):
            by_skew = fac.get(f"{nodes} nodes {size} B")
            if not by_skew:
                continue
            keys = sorted(by_skew, key=float)
            ax.plot([float(x) for x in keys], [by_skew[x] for x in keys], "s-",
                    label=f"{nodes} nodes")  # fmt: skip
        _axes(ax, "average skew (us)", "improvement factor HB/NB",
              f"({'ab'[size == 4096]}) {size} B messages (paper: grows with nodes)")  # fmt: skip
    fig8.suptitle("Fig 8: improvement in host CPU time over 4, 8 and 16 nodes")
    save_figure(fig8, path.replace("fig7", "fig8"))


def _axes(ax: Any, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if "size" in xlabel:
        ax.set_xscale("log", base=2)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def table(reports: dict[int, dict[str, Any]]) -> list[tuple[str, float, str]]:
    """(what, the paper's factor, the measured factor or range) for the paper's numbers."""
    rows: list[tuple[str, float, str]] = []

    def span(values: list[float]) -> str:
        return f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"

    if 4 in reports:
        f4 = factors(reports[4], 4).get("4 dests", {})
        small = [v for k, v in f4.items() if int(k) <= 128]
        if small:
            rows.append(("Fig 4 multisend, 4 dests, <=128 B", 2.05, span(small)))
    for fig, small_paper, big, big_paper in ((5, 1.48, "16384", 1.86), (6, 1.78, "8192", 2.02)):
        if fig in reports:
            f = factors(reports[fig], fig).get("16 nodes", {})
            small = [v for k, v in f.items() if int(k) <= 512]
            level = "GM" if fig == 5 else "MPI"
            if small:
                rows.append((f"Fig {fig} {level} latency, 16 nodes, <=512 B", small_paper,
                             span(small)))  # fmt: skip
            if big in f:
                rows.append((f"Fig {fig} {level} latency, 16 nodes, {big} B", big_paper,
                             f"{f[big]:.2f}"))  # fmt: skip
    if 7 in reports:
        f7 = factors(reports[7], 7)
        small = [v[k] for name, v in f7.items() if name.startswith("16 nodes") and
                 int(name.split()[2]) < 1024 for k in v if float(k) == 400]  # fmt: skip
        if small:
            rows.append(("Fig 7 CPU in Bcast, 16 nodes, 2-8 B, 400 us", 5.82, span(small)))
        for size, paper in (("2048", 2.9), ("4096", 2.22), ("8192", 2.01)):
            at = f7.get(f"16 nodes {size} B", {})
            value = next((v for k, v in at.items() if float(k) == 400), None)
            if value is not None:
                rows.append((f"Fig 7 CPU in Bcast, 16 nodes, {size} B, 400 us", paper,
                             f"{value:.2f}"))  # fmt: skip
    return rows


def summarise(fig: int, report: dict[str, Any]) -> None:
    """Add the HB/NB factors and the paper-vs-measured rows to a figure's report."""
    report["factors_hb_over_nb"] = factors(report, fig)
    report["paper_vs_measured"] = [
        {"what": what, "paper": paper, "measured": measured}
        for what, paper, measured in table({fig: report})
    ]


def main(argv: list[str] | None = None) -> None:
    """Redraw every figure whose JSON is in the directory given; print the factor table (JSON
    files get their summary added)."""
    directory = (sys.argv[1:] if argv is None else argv)[0]
    reports: dict[int, dict[str, Any]] = {}
    for fig in (4, 5, 6, 7):
        path = os.path.join(directory, f"mcast_fig{fig}.json")
        if os.path.exists(path):
            reports[fig] = read_json(path)
            summarise(fig, reports[fig])
            write_json(path, reports[fig])
            draw(fig, reports[fig], path.removesuffix(".json") + ".png")
    for what, paper, measured in table(reports):
        print(f"| {what} | {paper:.2f} | {measured} |")


if __name__ == "__main__":
    main()
