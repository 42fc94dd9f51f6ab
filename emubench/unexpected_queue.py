"""``emubench unexpected-queue``: unexpected-queue search cost per entry vs
depth (seed 004 Fig. 4) for the three envelope stores of `emucluster.p2p.envelope`.

Method, as seed 004 §4.2: the queue holds ``depth`` unexpected messages and the one a receive
wants is the last; the same search (the store's ``find``, exactly as `Matcher.post_receive`
calls it, non-destructive) runs many times; the time per search is divided by the depth.
The other messages come round-robin from ``--sources`` ranks with a few tags; the wanted one
has a tag no other has and comes from the next rank in the rotation. Grouping by source
(``lhs-grouped``) scans only that rank's messages, so its per-entry cost is still divided by
the whole depth, as the paper's x-axis is the depth of the queue.

Every figure comes from one run on this machine; compare the ratios, not the absolutes.
``--json FILE`` writes the environment, parameters, raw samples and summary; ``--png FILE``
draws the figure on the paper's axes.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
from typing import Any

from emubench.common import (
    command_line,
    environment,
    load_average,
    print_table,
    pyplot,
    save_figure,
    write_json,
)
from emucluster.p2p.envelope import ENTRY_BYTES, Envelope, EnvelopeStore, make_store

__all__ = ["main"]

STORES = ("list", "lhs", "lhs-grouped")
LABELS = {"list": "object list", "lhs": "LHS", "lhs-grouped": "LHS+group"}
CONTEXT = 0
FILLER_TAGS = 4  # tags 0..3 on the messages nobody asks for
WANTED_TAG = FILLER_TAGS  # the wanted message's tag, unique in the queue
REPORT_DEPTH = 1024  # seed 004's LH buffer size; the target ratio is read here
TARGET_RATIO = 5.0  # LHS per-entry search at least 5x cheaper than the object list
PAPER_RATIO = 14.3  # seed 004 §4.2: DIMMnet-2 with LHS vs without


def _fill(kind: str, depth: int, sources: int) -> tuple[EnvelopeStore[int], tuple[int, int, int]]:
    """A store holding ``depth`` messages, the wanted one last; and the receive's pattern."""
    store: EnvelopeStore[int] = make_store(kind)
    for n in range(depth - 1):
        store.append(Envelope(CONTEXT, n % sources, n % FILLER_TAGS), n)
    wanted = Envelope(CONTEXT, (depth - 1) % sources, WANTED_TAG)
    store.append(wanted, depth - 1)
    slot, found_depth = store.find(wanted.context, wanted.source, wanted.tag)
    assert slot is not None, "the wanted message must be found"
    assert slot.item == depth - 1, "the wanted message must be the last"
    assert kind == "lhs-grouped" or found_depth == depth, "every entry must be examined"
    return store, (wanted.context, wanted.source, wanted.tag)


def _time_searches(store: EnvelopeStore[int], query: tuple[int, int, int], count: int) -> float:
    """Seconds for ``count`` searches of ``store`` for ``query``."""
    find = store.find
    context, source, tag = query
    loop = range(count)
    start = time.perf_counter()
    for _ in loop:
        find(context, source, tag)
    return time.perf_counter() - start


def _measure(kind: str, depth: int, sources: int, samples: int, min_time: float) -> dict[str, Any]:
    """Per-entry nanoseconds for each sample, with the searches per sample and the depth seen."""
    store, query = _fill(kind, depth, sources)
    count = 1
    while _time_searches(store, query, count) < min_time / 4:  # calibrate, warm caches
        count *= 2
    count = max(1, int(count * 4 * min_time / max(_time_searches(store, query, count), 1e-9)))
    per_entry: list[float] = []
    for _ in range(samples):
        elapsed = _time_searches(store, query, count)
        per_entry.append(elapsed / count / depth * 1e9)
    _, examined = store.find(*query)
    return {"searches_per_sample": count, "examined": examined, "ns_per_entry": per_entry}


def _run(args: argparse.Namespace) -> dict[str, Any]:
    depths = [1 << k for k in range(args.max_depth.bit_length()) if 1 << k <= args.max_depth]
    load_before = load_average()
    results: dict[str, Any] = {
        "benchmark": "unexpected_queue (seed 004 Fig. 4)",
        "command": command_line("unexpected-queue", args.argv),
        "parameters": {
            "depths": depths,
            "sources": args.sources,
            "filler_tags": FILLER_TAGS,
            "samples": args.samples,
            "min_time_s": args.min_time,
            "entry_bytes": ENTRY_BYTES,
            "gc_disabled_while_timing": True,
        },
        "raw": {kind: {} for kind in STORES},
    }
    gc.collect()
    gc.disable()
    try:
        for depth in depths:
            for kind in STORES:
                results["raw"][kind][str(depth)] = _measure(
                    kind, depth, args.sources, args.samples, args.min_time
                )
    finally:
        gc.enable()
    results["environment"] = environment(load_before, processor=platform.processor(), numpy=False)
    median = {
        kind: {d: statistics.median(r["ns_per_entry"]) for d, r in results["raw"][kind].items()}
        for kind in STORES
    }
    ratio_lhs = {d: median["list"][d] / median["lhs"][d] for d in median["list"]}
    ratio_group = {d: median["list"][d] / median["lhs-grouped"][d] for d in median["list"]}
    report = str(REPORT_DEPTH) if str(REPORT_DEPTH) in median["list"] else str(depths[-1])
    results["summary"] = {
        "ns_per_entry_median": median,
        "ratio_list_over_lhs": ratio_lhs,
        "ratio_list_over_grouped": ratio_group,
        "report_depth": int(report),
        "list_over_lhs_at_report_depth": ratio_lhs[report],
        "list_over_grouped_at_report_depth": ratio_group[report],
        "target_list_over_lhs": TARGET_RATIO,
        "target_met": ratio_lhs[report] >= TARGET_RATIO,
        "paper_ratio": PAPER_RATIO,
    }
    return results


def _print(results: dict[str, Any]) -> None:
    params = results["parameters"]
    summary = results["summary"]
    median = summary["ns_per_entry_median"]
    rows = []
    for depth in params["depths"]:
        d = str(depth)
        rows.append((
            depth,
            *(f"{median[kind][d]:.2f}" for kind in STORES),
            f"{summary['ratio_list_over_lhs'][d]:.1f}",
            f"{summary['ratio_list_over_grouped'][d]:.1f}",
            f"{median['lhs'][d] * depth / 1000:.2f}",
        ))  # fmt: skip
    print_table(
        f"unexpected-queue search cost per entry (ns), wanted message last; "
        f"{params['sources']} sources, {params['filler_tags']} filler tags, "
        f"median of {params['samples']}; Python {results['environment']['python']}",
        ("depth", *(LABELS[kind] for kind in STORES), "list/LHS", "list/group", "search us"),
        rows,
    )
    depth = summary["report_depth"]
    verdict = "met" if summary["target_met"] else "NOT met"
    print(
        f"at depth {depth:,}: list/LHS = {summary['list_over_lhs_at_report_depth']:.1f}x "
        f"(target >= {TARGET_RATIO:g}x: {verdict}); "
        f"list/LHS+grouping = {summary['list_over_grouped_at_report_depth']:.1f}x "
        f"(seed 004: {PAPER_RATIO}x)"
    )
    print("search us: one LHS search of the whole queue, in microseconds")


def _plot(results: dict[str, Any], path: str) -> None:
    """Seed 004 Fig. 4's axes: search cost per entry against queue depth, one line per store."""
    plt = pyplot()  # the bench extra, only for --png

    summary = results["summary"]
    depths = results["parameters"]["depths"]
    fig, ax = plt.subplots(figsize=(7, 4.8))
    for kind, marker in zip(STORES, "os^", strict=True):
        ns = [summary["ns_per_entry_median"][kind][str(d)] for d in depths]
        ax.plot(depths, ns, marker + "-", label=LABELS[kind])
    depth = summary["report_depth"]
    ax.axvline(depth, color="grey", lw=0.8, ls=":")
    ax.text(
        0.45,
        0.64,
        f"  at {depth}: list/LHS {summary['list_over_lhs_at_report_depth']:.1f}x,\n"
        f"  list/LHS+group {summary['list_over_grouped_at_report_depth']:.1f}x\n"
        f"  (paper, DIMMnet-2: {PAPER_RATIO}x; target LHS >= {TARGET_RATIO:g}x)",
        fontsize=8,
        va="top",
        transform=ax.transAxes,
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("unexpected-queue depth (messages)")
    ax.set_ylabel("search cost per entry (ns)")
    ax.set_title(
        f"Unexpected-queue search (seed 004 Fig. 4), Python {results['environment']['python']}, "
        f"{results['parameters']['sources']} sources",
        fontsize=10,
    )
    ax.legend()
    save_figure(fig, path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print a table, optionally write JSON and a PNG."""
    p = argparse.ArgumentParser(
        prog="emubench unexpected-queue",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--sources", type=int, default=16, help="ranks the messages come from")
    p.add_argument("--max-depth", type=int, default=4096, help="deepest queue (powers of 2)")
    p.add_argument("--samples", type=int, default=5, help="timed samples per point")
    p.add_argument("--min-time", type=float, default=0.02, help="seconds per sample")
    p.add_argument("--json", metavar="FILE", help="write all results here")
    p.add_argument("--png", metavar="FILE", help="draw the figure here (needs matplotlib)")
    args = p.parse_args(argv)
    if args.sources < 1 or args.max_depth < 1 or args.samples < 1:
        p.error("--sources, --max-depth and --samples must be positive")
    args.argv = sys.argv[1:] if argv is None else argv
    results = _run(args)
    _print(results)
    if args.json:
        write_json(args.json, results, indent=1)
    if args.png:
        _plot(results, args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
