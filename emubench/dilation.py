"""Time dilation: the papers' operating point for the skew figures (issue 17).

The papers' skews are small multiples of their operation's latency (400 us against a 16-node
broadcast of tens of microseconds); an emulated 16-node broadcast costs milliseconds, so the same
absolute skews are lost in it. As network emulators that run slower than the real thing do
(DieCast's time dilation), a dilated run scales every skew by ``D = ours / paper``: our no-skew
latency of the same operation at the same node count, measured in the same run, over the
paper's. The figures then show the paper's skew and ours (``paper x D``) on the same axis.

The paper's side: no seed states a collective's latency in its text (the figures' numbers are in
images we do not have). The one number given is seed 002 (GRIM §4.3): "most Myrinet
communication libraries provide end-to-end latencies of approximately 10-20 us". That is the
per-hop anchor ``L_paper``; a 16-node binomial (or optimal-tree) broadcast or reduce is modelled
as ``depth x L_paper`` (depth = ceil(log2 nodes) = 4 at 16 nodes). D is taken at the middle of
the range (15 us) and its range (L = 20 us .. 10 us) is stated on every figure and in the JSON.

Pure functions (`tree_depth`, `dilation`, `dilate_skews`, `spread`, `factor_spread`) are the
arithmetic; `measure` is the measurement: one emurun job at the node count and wait policy of the
skew run that times the operation without skew by the thesis's method (root to the last node,
one-way notification latency subtracted; `emubench.nicvm` ``bcast`` and `emubench.reduce_skew`'s
latency mode, run unchanged).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from emubench.common import median, run_emurun_json

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "ANCHOR",
    "OPS",
    "PAPER_HOP_US",
    "Dilation",
    "caption",
    "dilate_skews",
    "dilation",
    "factor_spread",
    "given",
    "latency_of",
    "measure",
    "spread",
    "tree_depth",
]

PAPER_HOP_US = (10.0, 20.0)
"""The papers' end-to-end (one-way, one hop) latency range, microseconds (seed 002, GRIM §4.3)."""
ANCHOR = (
    "seed 002 (GRIM 4.3): 'most Myrinet communication libraries provide end-to-end latencies "
    "of approximately 10-20 us'; no seed states a collective latency in its text, so the "
    "paper's no-skew operation latency is modelled as depth x L_paper (binomial/optimal tree, "
    "depth = ceil(log2 nodes))"
)
OPS = {"bcast": "binomial MPI Bcast", "reduce": "binomial MPI Reduce (nab)"}
"""What `measure` times for each operation name."""


def tree_depth(nodes: int) -> int:
    """Hops from the root to the deepest node of a binomial tree over ``nodes`` nodes."""
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    return math.ceil(math.log2(nodes)) if nodes > 1 else 0


@dataclass(frozen=True, slots=True)
class Dilation:
    """The dilation factor of one skew figure and everything it was computed from."""

    op: str
    """The operation timed (a key of `OPS`)."""
    nodes: int
    """The node count of the figure (ours and the paper's)."""
    ours_us: float
    """Our no-skew latency of the operation at ``nodes`` (median over iterations)."""
    ours_iqr_us: float
    """Interquartile range of that latency over iterations."""
    ours_one_way_us: float | None
    """Our one-way (one hop) latency measured by the same job, if any."""
    paper_hop_us: tuple[float, float]
    """The paper's one-hop latency range, low and high."""
    depth: int
    """Tree depth the paper's latency is modelled with."""
    factor: float
    """D: ``ours_us`` over the paper's latency at the middle of its range."""
    factor_range: tuple[float, float]
    """D at the high and at the low end of the paper's range (smaller, larger)."""
    source: str
    """How ``ours_us`` was obtained (a measurement, or given on the command line)."""

    @property
    def paper_us(self) -> float:
        """The paper's modelled latency at the middle of its range."""
        return self.depth * sum(self.paper_hop_us) / 2

    def skew(self, paper_skew_us: float) -> float:
        """Our skew for the paper's ``paper_skew_us``."""
        return paper_skew_us * self.factor

    def caption(self) -> str:
        """One line for a figure: D, both latencies and the range (`caption`)."""
        return caption(self.to_json())

    def to_json(self) -> dict[str, Any]:
        """The JSON record: every field, the paper's latency and the anchor's source."""
        return asdict(self) | {"paper_us": self.paper_us, "anchor": ANCHOR}


def caption(record: dict[str, Any]) -> str:
    """One line for a figure from a `Dilation` 's JSON record: D, both latencies, the range."""
    lo, hi = record["paper_hop_us"]
    d_lo, d_hi = record["factor_range"]
    op = OPS.get(record["op"], record["op"])
    return (
        f"time dilation D = {record['factor']:.1f} = our {op} at {record['nodes']} nodes, "
        f"{record['ours_us']:,.0f} us (IQR {record['ours_iqr_us']:,.0f}), / paper "
        f"{record['depth']} hops x {(lo + hi) / 2:g} us; L_paper {lo:g}-{hi:g} us gives "
        f"D {d_lo:.1f}-{d_hi:.1f}"
    )


def dilation(
    op: str,
    nodes: int,
    ours_us: float,
    *,
    ours_iqr_us: float = 0.0,
    ours_one_way_us: float | None = None,
    paper_hop_us: tuple[float, float] = PAPER_HOP_US,
    source: str = "measured",
) -> Dilation:
    """D for ``op`` at ``nodes`` from our no-skew latency ``ours_us`` (pure)."""
    lo, hi = paper_hop_us
    if not (0 < lo <= hi):
        raise ValueError(f"paper hop latency range must be 0 < low <= high, got {paper_hop_us}")
    if not ours_us > 0 or not math.isfinite(ours_us):
        raise ValueError(f"our latency must be a positive number, got {ours_us}")
    depth = max(1, tree_depth(nodes))
    mid = depth * (lo + hi) / 2
    return Dilation(
        op=op,
        nodes=nodes,
        ours_us=ours_us,
        ours_iqr_us=ours_iqr_us,
        ours_one_way_us=ours_one_way_us,
        paper_hop_us=(lo, hi),
        depth=depth,
        factor=ours_us / mid,
        factor_range=(ours_us / (depth * hi), ours_us / (depth * lo)),
        source=source,
    )


def given(
    op: str, nodes: int, factor: float, *, paper_hop_us: tuple[float, float] = PAPER_HOP_US
) -> Dilation:
    """A `Dilation` for a factor given on the command line (no measurement): our latency is
    taken to be ``factor`` x the paper's, and the record says so."""
    if not factor > 0:
        raise ValueError(f"dilation factor must be positive, got {factor}")
    depth = max(1, tree_depth(nodes))
    ours = factor * depth * sum(paper_hop_us) / 2
    return dilation(
        op,
        nodes,
        ours,
        paper_hop_us=paper_hop_us,
        source=f"given: --dilation {factor:g} (not measured)",
    )


def dilate_skews(paper_skews_us: Sequence[float], factor: float) -> list[float]:
    """Our skews (us, rounded to whole microseconds) for the paper's, at dilation ``factor``."""
    if not factor > 0:
        raise ValueError(f"dilation factor must be positive, got {factor}")
    return [float(round(s * factor)) for s in paper_skews_us]


def _iqr(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[2] - q[0]


def _sd(xs: Sequence[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def spread(repeats: Sequence[Sequence[Sequence[float]]]) -> dict[str, Any]:
    """Statistics of one point of a skew figure from its samples: per repeat, per rank, per
    iteration. ``mean_us`` is the median over repeats of the mean over ranks of each rank's
    mean (the paper's average over nodes); ``sd_repeats_us`` the standard deviation of those
    repeat means (the error bar); ``sd_iterations_us`` / ``iqr_iterations_us`` the spread of
    per-iteration CPU over ranks (all ranks' iterations of a repeat pooled, median over
    repeats)."""
    means: list[float] = []
    sds: list[float] = []
    iqrs: list[float] = []
    count = 0
    for ranks in repeats:
        ranks = [r for r in ranks if r]
        if not ranks:
            continue
        means.append(statistics.fmean(statistics.fmean(r) for r in ranks))
        pooled = [x for r in ranks for x in r]
        count += len(pooled)
        sds.append(_sd(pooled))
        iqrs.append(_iqr(pooled))
    return {
        "mean_us": median(means),
        "repeat_means_us": [round(m, 1) for m in means],
        "sd_repeats_us": _sd(means),
        "sd_iterations_us": median(sds),
        "iqr_iterations_us": median(iqrs),
        "samples": count,
    }


def factor_spread(hb: Sequence[float], nb: Sequence[float]) -> dict[str, Any]:
    """The HB / NB factor per repeat (``hb`` and ``nb`` are the repeat means, in order), its
    median, minimum and maximum, and the effect against its spread: ``spread_over_effect`` is
    the standard deviation over repeats of HB - NB over the median of HB - NB (small is good;
    None when there is no effect to speak of)."""
    pairs = [(h, n) for h, n in zip(hb, nb, strict=True) if n > 0]
    factors = [h / n for h, n in pairs]
    diffs = [h - n for h, n in pairs]
    effect = median(diffs)
    return {
        "factor": median(factors),
        "factor_min": min(factors, default=float("nan")),
        "factor_max": max(factors, default=float("nan")),
        "factors": [round(f, 3) for f in factors],
        "effect_us": effect,
        "spread_over_effect": (_sd(diffs) / abs(effect)) if diffs and abs(effect) > 0 else None,
    }


def latency_of(samples: Sequence[float], one_way_us: float) -> tuple[float, float, str]:
    """Median and IQR of the thesis method's latency samples (one-way notification latency
    already subtracted) and a note. On a loaded machine the subtraction can leave no positive
    median; the samples with the notification added back are used then, and the note says so."""
    if median(samples) > 0:
        return median(samples), _iqr(samples), ""
    whole = [x + one_way_us for x in samples]
    if not median(whole) > 0:
        raise ValueError(f"no positive latency in {len(samples)} samples (one way {one_way_us})")
    return (
        median(whole),
        _iqr(whole),
        ("; the one-way subtraction left no positive median, so it includes one notification"),
    )


# -- the measurement ----------------------------------------------------------------------------


def measure(
    op: str,
    nodes: int,
    *,
    wait: str,
    iters: int = 30,
    warmup: int = 3,
    size: int = 4,
    paper_hop_us: tuple[float, float] = PAPER_HOP_US,
) -> Dilation:
    """Run one emurun job of ``nodes`` ranks under wait policy ``wait`` that times ``op``
    (``bcast``: ``size`` bytes, ``reduce``: ``size`` doubles) without skew, and return its D."""
    if op == "bcast":
        args = ["bcast", "--iters", str(iters), "--warmup", str(warmup), "--sizes", str(size)]
        result, _ = run_emurun_json(nodes, "emubench.nicvm", args, {"EMU_WAIT": wait})
        root = result["ranks"][0]
        samples = [float(x) for x in root["binomial"][str(size)]]
        one_way = float(root["one_way_us"])
    elif op == "reduce":
        result, _ = run_emurun_json(
            nodes,
            "emubench.reduce_skew",
            [
                "--variants",
                "nab",
                "--skews",
                "--elements",
                "--latency-elements",
                str(size),
                "--iters",
                str(iters),
                "--warmup",
                str(warmup),
            ],
            {"EMU_WAIT": wait},
        )
        row = result["latency"][0]
        samples = [float(x) for x in row["last_node_samples"]["nab"]]
        one_way = float(row["one_way_us"])
    else:
        raise ValueError(f"unknown operation {op!r} (one of {', '.join(OPS)})")
    ours, iqr, note = latency_of(samples, one_way)
    return dilation(
        op,
        nodes,
        ours,
        ours_iqr_us=iqr,
        ours_one_way_us=one_way,
        paper_hop_us=paper_hop_us,
        source=f"measured: {len(samples)} iterations, EMU_WAIT={wait}, {size} "
        f"{'B' if op == 'bcast' else 'doubles'}{note}",
    )
