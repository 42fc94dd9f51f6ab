"""``REPORT.md``: one table, each seed figure with the paper's number beside ours.

Ours is read from the JSON the benchmarks wrote into the directory (nothing is measured here),
the command is the one that made it (from ``emubench all``'s runs file when there is one, else
the suite's command for that directory), and the load column is the machine's 1-minute load
average when the run started, with a warning when it exceeded `LOAD_WARN_PER_CPU` per CPU:
such a run's absolute numbers are suspect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from emubench.common import LOAD_WARN_PER_CPU, read_json
from emubench.mcast_plot import factors
from emubench.skew_dilated import spread_text
from emubench.suite import JOBS, RUNS_FILE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

__all__ = ["REPORT_FILE", "ROWS", "Row", "render", "write_report"]

REPORT_FILE = "REPORT.md"


@dataclass(frozen=True, slots=True)
class Row:
    """One seed figure of the report."""

    figure: str
    """The figure, as the paper numbers it (with the paper)."""
    paper: str
    """The paper's number or shape (or our own target, for the two figures without a paper)."""
    job: str
    """The ``emubench`` subcommand that measures it."""
    source: str
    """The JSON file ``ours`` reads."""
    ours: Callable[[dict[str, Any]], str]
    """Our number, from that JSON."""


def _span(values: Iterable[float]) -> str:
    xs = [v for v in values if v is not None]
    if not xs:
        return "n/a"
    lo, hi = min(xs), max(xs)
    if abs(hi - lo) < 0.005:
        return f"{lo:.2f}"
    return f"{lo:.2f} to {hi:.2f}" if lo < 0 else f"{lo:.2f}-{hi:.2f}"


def _by_nodes(factors: dict[str, float | None]) -> str:
    """``{"2 nodes": 1.1, ...}`` as ``1.10 / 2.31 at 2 / 16 nodes``."""
    keys = sorted((k for k in factors if factors[k] is not None), key=lambda k: int(k.split()[0]))
    if not keys:
        return "n/a"
    values = " / ".join(f"{factors[k]:.2f}" for k in keys)
    return f"{values} at {' / '.join(k.split()[0] for k in keys)} nodes"


# -- thesis ch. 3: application-bypass reduce ----------------------------------------------------


def _rs_first(d: dict[str, Any], fig: str) -> tuple[str, dict[str, float | None]]:
    factors = d["summary"]["factors"][fig]
    first = min(factors, key=lambda k: int(k.split()[0]))
    return first, factors[first]


def _rs_fig3_6(d: dict[str, Any]) -> str:
    doubles, by_skew = _rs_first(d, "fig3_6")
    best = max((v for v in by_skew.values() if v is not None), default=None)
    if best is None:
        return "n/a"
    return f"{best:.2f} (max over skews, {d['summary']['fixed_nodes']} nodes, {doubles})"


def _rs_by_nodes(fig: str) -> Callable[[dict[str, Any]], str]:
    def ours(d: dict[str, Any]) -> str:
        doubles, by_nodes = _rs_first(d, fig)
        return f"{_by_nodes(by_nodes)} ({doubles})"

    return ours


def _rs_latency(fig: str) -> Callable[[dict[str, Any]], str]:
    def ours(d: dict[str, Any]) -> str:
        ((what, values),) = d["summary"]["factors"][fig].items()
        return f"{_span(values.values())} ({what}, over {', '.join(values)})"

    return ours


# -- seed 001: NIC multicast --------------------------------------------------------------------


def _mcast_factors(d: dict[str, Any], fig: int) -> dict[str, dict[str, float]]:
    return factors(d, fig)


def _mcast_fig4(d: dict[str, Any]) -> str:
    f4 = _mcast_factors(d, 4).get("4 dests", {})
    return f"{_span(v for k, v in f4.items() if int(k) <= 128)} (4 dests, <=128 B)"


def _mcast_latency(fig: int, big: int) -> Callable[[dict[str, Any]], str]:
    def ours(d: dict[str, Any]) -> str:
        f = _mcast_factors(d, fig)
        nodes = max(f, key=lambda k: int(k.split()[0]))
        at = f[nodes]
        large = max((int(k) for k in at if int(k) <= big), default=None)
        small = _span(v for k, v in at.items() if int(k) <= 512)
        tail = f", {at[str(large)]:.2f} at {large} B" if large is not None else ""
        return f"{small} (<=512 B){tail}, {nodes}"

    return ours


def _mcast_fig7(d: dict[str, Any]) -> str:
    f7 = _mcast_factors(d, 7)
    nodes = max(int(k.split()[0]) for k in f7)
    skew = max(float(s) for v in f7.values() for s in v)
    parts = []
    for name, by_skew in sorted(f7.items(), key=lambda kv: int(kv[0].split()[2])):
        if int(name.split()[0]) == nodes:
            value = next((v for s, v in by_skew.items() if float(s) == skew), None)
            if value is not None:
                parts.append(f"{value:.2f} at {name.split()[2]} B")
    return f"{', '.join(parts)} ({nodes} nodes, {skew:g} us average skew)"


def _mcast_fig8(d: dict[str, Any]) -> str:
    f7 = _mcast_factors(d, 7)
    skew = max(float(s) for v in f7.values() for s in v)
    parts = []
    for size in ("4", "4096"):
        by_nodes = {
            f"{name.split()[0]} nodes": next((v for s, v in by.items() if float(s) == skew), None)
            for name, by in f7.items()
            if name.split()[2] == size
        }
        if by_nodes:
            parts.append(f"{size} B: {_by_nodes(by_nodes)}")
    return f"{'; '.join(parts)} ({skew:g} us average skew)"


# -- seed 002: GRIM -----------------------------------------------------------------------------


def _grim_fig4_6(d: dict[str, Any]) -> str:
    s = d["summary"]
    knees = ", ".join(
        f"limit {k}: {v or 'none'}"
        for k, v in s["injection_knee_burst"].items()
        if k != "unbounded"
    )
    unbounded = s["injection_cpu_median_us"]["unbounded"]
    values = [unbounded[k] for k in sorted(unbounded, key=int)]
    return (
        f"CPU per message doubles at burst ({knees}); unbounded {values[0]:.0f} -> "
        f"{values[-1]:.0f} us up to {max(int(k) for k in unbounded)} messages"
    )


def _grim_fig4_10(d: dict[str, Any]) -> str:
    f = d["summary"]["scan_factor_32_vs_1"]
    return ", ".join(f"{k} {v:.1f}x" for k, v in f.items()) + " (32 vs 1 channel)"


# -- thesis ch. 4: NICVM ------------------------------------------------------------------------


def _nicvm_fig4_9(d: dict[str, Any]) -> str:
    core = d["fig4.9_core"]["8"]
    pp = d["fig4.9"]
    extra = (core["nicvm"]["min_ns"] - core["disabled"]["min_ns"]) / core["disabled"]["min_ns"]
    diff = pp["nicvm"]["8"] - pp["disabled"]["8"]
    return f"NicCore CPU {extra:+.1%} per round trip at 8 B; MPI ping-pong {diff:+.0f} us (8 B)"


def _nicvm_fig4_10_12(d: dict[str, Any]) -> str:
    e = d["fig4.10_12"]
    sizes = sorted(e["host"], key=int)
    noop = _span(e["noop"][s] - e["host"][s] for s in sizes)
    factor = _span(e["host"][s] / e["nic"][s] for s in sizes)
    return f"no-op module adds {noop} us; host / NIC echo {factor}"


def _nicvm_fig4_13_15(d: dict[str, Any]) -> str:
    bc = d["fig4.13_15"]
    last = max(bc, key=int)
    at = bc[last]
    at_4096 = at["binomial"]["4096"] / at["nicvm"]["4096"]
    best = max(r["binomial"][s] / r["nicvm"][s] for r in bc.values() for s in r["nicvm"])
    return f"{at_4096:.2f} at 4096 B, {last} nodes; max {best:.2f}"


def _nicvm_fig4_16_18(d: dict[str, Any]) -> str:
    runs = [r for r in d["fig4.16_18"] if r["skew_us"] == 1000.0]
    top = max(runs, key=lambda r: r["nodes"])
    s = top["summary"]
    parts = [
        f"{s[f'binomial_{size}']['cpu_us'] / s[f'nicvm_{size}']['cpu_us']:.2f} at {size} B"
        for size in ("32", "4096")
    ]
    return f"{', '.join(parts)} ({top['nodes']} nodes, 1000 us)"


# -- the skew figures at the papers' operating point (emubench.skew_dilated) -------------------


def _dilated(d: dict[str, Any]) -> str:
    """The factor at the largest paper skew per series, its range over repeats, D, and the
    spread of HB - NB over repeats against HB - NB."""
    top = max(d["paper_skews_us"])
    ours = d["skews_us"][d["paper_skews_us"].index(top)]
    parts = [
        f"{f['factor']:.2f} ({f['factor_min']:.2f}-{f['factor_max']:.2f}) at {f['series']}"
        for f in d["factors"]
        if f["paper_skew_us"] == top
    ]
    return (
        f"{', '.join(parts)}; paper skew {top:g} us x D {d['dilation']['factor']:.0f} = "
        f"{ours:,.0f} us ours, {d['nodes']} nodes, {d['repeats']} repeats; "
        f"sd(HB-NB)/(HB-NB) over repeats {spread_text(d)}"
    )


# -- seed 004 and our own targets ---------------------------------------------------------------


def _uq(d: dict[str, Any]) -> str:
    s = d["summary"]
    return (
        f"list/LHS {s['list_over_lhs_at_report_depth']:.1f}x, list/LHS+group "
        f"{s['list_over_grouped_at_report_depth']:.1f}x at depth {s['report_depth']}"
    )


def _mpi(d: dict[str, Any]) -> str:
    parts = []
    for name, row in d["summary"].items():
        if row.get("target") is not None:
            parts.append(f"{name} {row['ratio']:.2f}x")
    return ", ".join(parts)


def _nicd(d: dict[str, Any]) -> str:
    s = d["summary"]
    selective = s.get("bandwidth_MB_per_s_loss5_selective")  # the loss sweep, when measured
    tail = "" if selective is None else f" (selective recovery: {selective:.0f} MB/s)"
    return (
        f"8 B {s['latency_ratio_8B']:.2f}x the relay; {s['bandwidth_MB_per_s']:.0f} MB/s; "
        f"{s['bandwidth_MB_per_s_loss5']:.0f} MB/s at 5 % loss{tail}"
    )


ROWS: tuple[Row, ...] = (
    Row("thesis Fig 3.6 (reduce CPU vs skew)", "3.3 (16 nodes, slides); 5.1 (32 nodes)",
        "reduce-skew", "reduce_skew.json", _rs_fig3_6),
    Row("thesis Fig 3.7 (reduce CPU vs nodes, max skew)",
        "3.3 at 16 nodes; 5.1 at 32, growing with nodes", "reduce-skew", "reduce_skew.json",
        _rs_by_nodes("fig3_7")),
    Row("thesis Fig 3.8 (reduce CPU, no skew)", "1.18 (16 nodes); 1.5 (32 nodes)",
        "reduce-skew", "reduce_skew.json", _rs_by_nodes("fig3_8")),
    Row("thesis Fig 3.9 (reduce latency vs nodes)",
        "ab = nab up to 4 nodes (target ab/nab <= 1.5)", "reduce-skew", "reduce_skew.json",
        _rs_latency("fig3_9")),
    Row("thesis Fig 3.10 (reduce latency vs size)",
        "ab penalty about constant (target ab/nab <= 1.5)", "reduce-skew", "reduce_skew.json",
        _rs_latency("fig3_10")),
    Row("thesis Fig 3.6 at the paper's operating point (skews x D)",
        "3.3 (16 nodes, slides), 1000 us", "reduce-skew-dilated", "reduce_skew_dilated.json",
        _dilated),
    Row("seed 001 Fig 4 (NIC multisend)", "2.05 (4 dests, <=128 B)", "mcast",
        "mcast_fig4.json", _mcast_fig4),
    Row("seed 001 Fig 5 (GM multicast latency)", "1.48 (<=512 B), 1.86 (16 KiB), 16 nodes",
        "mcast", "mcast_fig5.json", _mcast_latency(5, 16384)),
    Row("seed 001 Fig 6 (MPI Bcast latency)", "1.78 (<=512 B), 2.02 (8 KiB), 16 nodes",
        "mcast", "mcast_fig6.json", _mcast_latency(6, 8192)),
    Row("seed 001 Fig 7 (CPU in Bcast under skew)",
        "5.82 (2-8 B), 2.9 / 2.22 / 2.01 (2 / 4 / 8 KiB), 16 nodes, 400 us", "mcast",
        "mcast_fig7.json", _mcast_fig7),
    Row("seed 001 Fig 8 (CPU factor vs nodes)", "grows with nodes", "mcast", "mcast_fig7.json",
        _mcast_fig8),
    Row("seed 001 Fig 7 at the paper's operating point (skews x D)",
        "5.82 (2-8 B), 16 nodes, 400 us", "mcast-dilated", "mcast_fig7_dilated.json", _dilated),
    Row("seed 002 Fig 4.6 (AM injection overhead)",
        "rises past the credit limit; unbounded flat to ~5,000 messages", "grim", "grim.json",
        _grim_fig4_6),
    Row("seed 002 Fig 4.10 (channel scan)", "12x (LANai 9), 18x (LANai 4), 32 vs 1 channel",
        "grim", "grim.json", _grim_fig4_10),
    Row("thesis Fig 4.9 (NICVM support overhead)", "+0.8 us", "nicvm", "nicvm.json",
        _nicvm_fig4_9),
    Row("thesis Figs 4.10-4.12 (NICVM echo)",
        "no-op +7.6 us; NIC echo up to 1.5x, wins above 128 B", "nicvm", "nicvm.json",
        _nicvm_fig4_10_12),
    Row("thesis Figs 4.13-4.15 (NICVM bcast latency)", "1.3 at 4096 B, 16 nodes; max 1.4",
        "nicvm", "nicvm.json", _nicvm_fig4_13_15),
    Row("thesis Figs 4.16-4.18 (NICVM bcast CPU under skew)", "2.2 (16 nodes, 1000 us)",
        "nicvm", "nicvm.json", _nicvm_fig4_16_18),
    Row("thesis Fig 4.16 at the paper's operating point (skews x D)", "2.2 (16 nodes, 1000 us)",
        "nicvm-dilated", "nicvm_dilated.json", _dilated),
    Row("seed 004 Fig 4 (unexpected-queue search)",
        "14.3x (DIMMnet-2, LHS vs none); target list/LHS >= 5x", "unexpected-queue",
        "unexpected_queue.json", _uq),
    Row("MPI vs MPICH (own target)", "ping-pong <= 1.5x raw port; 16-node Bcast/Reduce <= 5x",
        "mpi-compare", "mpi_bench.json", _mpi),
    Row("nicd port-to-port (own target)",
        "8 B <= 2x relay; >= 250 MB/s; > 100 MB/s at 5 % loss", "nicd", "nicd_bench.json",
        _nicd),
)  # fmt: skip


def _load_before(data: dict[str, Any], run: dict[str, Any] | None) -> list[float] | None:
    if run is not None and run.get("load_before"):
        return list(run["load_before"])
    env = data.get("environment")
    if isinstance(env, dict):
        load = env.get("load_average")
        if isinstance(load, dict) and load.get("before"):
            return list(load["before"])
    return None


def _load_cell(data: dict[str, Any], run: dict[str, Any] | None, cpus: int | None) -> str:
    env = data.get("environment") if isinstance(data.get("environment"), dict) else {}
    assert isinstance(env, dict)
    cpus = cpus or env.get("cpus")
    before = _load_before(data, run)
    if before is None:
        after = env.get("load_average_after")  # reports written before the load was taken
        return f"not recorded (after: {after[0]:.2f})" if after else "not recorded"
    cell = f"{before[0]:.2f} at start"
    if isinstance(cpus, int) and before[0] > LOAD_WARN_PER_CPU * cpus:
        cell += f" **WARNING: not idle** (> {LOAD_WARN_PER_CPU:g} per CPU, {cpus} CPUs)"
    return cell


def render(directory: Path) -> str:
    """The report of the JSON in ``directory`` as Markdown."""
    runs_path = directory / RUNS_FILE
    runs: dict[str, Any] = read_json(runs_path) if runs_path.exists() else {"jobs": {}}
    jobs = {job.ident: job for job in JOBS}
    lines = [
        "# Reproduction report",
        "",
        f"Generated by `emubench report --dir {directory}` from the JSON in this directory "
        "(nothing re-measured); the command is the one `emubench all` runs to regenerate a "
        "figure (the JSON's own `command` says how it was made). Factors are host-based / "
        "NIC-based (or nab / ab) unless said; "
        f"the load is the 1-minute load average when the run started, flagged when above "
        f"{LOAD_WARN_PER_CPU:g} per CPU (the machine was not idle: absolute numbers suspect).",
        "",
        "| figure | paper | ours | command | load |",
        "|---|---|---|---|---|",
    ]
    cache: dict[str, dict[str, Any] | None] = {}
    for row in ROWS:
        run = runs["jobs"].get(row.job)
        if row.source not in cache:
            path = directory / row.source
            cache[row.source] = read_json(path) if path.exists() else None
        data = cache[row.source]
        if data is None:
            status = run.get("status") if run else None
            ours = f"not measured ({status or 'no ' + row.source})"
            load = "-"
        else:
            try:
                ours = row.ours(data)
            except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:
                ours = f"n/a ({type(exc).__name__}: {exc})"
            load = _load_cell(data, run, runs.get("cpus"))
        command = run["command"] if run else jobs[row.job].command(directory)
        cells = (row.figure, row.paper, ours, f"`{command}`", load)
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    lines.append("")
    return "\n".join(lines)


def write_report(directory: Path) -> Path:
    """Write ``directory / REPORT_FILE``; return its path."""
    path = directory / REPORT_FILE
    path.write_text(render(directory), encoding="utf-8")
    return path
