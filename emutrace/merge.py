"""Merge a trace directory: per-process recordings -> DIR/trace.json (+ DIR/timeline.png).

``python -m emutrace.merge DIR [--window START:END]``; ``emurun --trace DIR`` calls
``merge_dir`` at job end. Recordings lie in DIR (one machine) or in ``DIR/<host>/`` (shipped
by the agents of a multi-host job); ``DIR/clocks.json`` then gives each host's clock offset
from emurun's clock, subtracted from that host's timestamps and stated in the merged file.
The PNG needs matplotlib (the ``bench`` extra); without it the merge says so and writes only
the JSON.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import TYPE_CHECKING, Any

import msgpack

from emutrace.chrome import HOST_TID, to_chrome
from emutrace.recorder import FILE_SUFFIX

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CLOCKS_FILE",
    "draw_axes",
    "draw_timeline",
    "load_dir",
    "main",
    "merge_dir",
    "parse_window",
]

DEFAULT_WINDOW_MS = (0.0, 5.0)
CLOCKS_FILE = "clocks.json"
"""``{"reference": ..., "hosts": {name: {"offset_ns": int, "rtt_ns": int, ...}}}``."""


def load_dir(directory: str) -> list[dict[str, Any]]:
    """Every readable recording in ``directory`` and its host folders, on emurun's clock
    (``host`` set to the folder's name); unreadable files are reported and skipped."""
    clocks = _clocks(directory)
    out = _load_files(os.path.join(directory, "*" + FILE_SUFFIX))
    for folder in sorted(glob.glob(os.path.join(directory, "*", ""))):
        host = os.path.basename(os.path.dirname(folder))
        clock = clocks.get(host)
        offset = clock.get("offset_ns", 0) if isinstance(clock, dict) else 0
        offset = offset if isinstance(offset, int) else 0
        for rec in _load_files(os.path.join(folder, "*" + FILE_SUFFIX)):
            rec["host"] = host
            rec["events"] = [[e[0] - offset, *e[1:]] for e in rec["events"]]
            out.append(rec)
    return out


def _clocks(directory: str) -> dict[str, dict[str, Any]]:
    try:
        with open(os.path.join(directory, CLOCKS_FILE), encoding="utf-8") as f:
            hosts = json.load(f).get("hosts", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return hosts if isinstance(hosts, dict) else {}


def _load_files(pattern: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted(glob.glob(pattern)):
        try:
            with open(path, "rb") as f:
                rec = msgpack.unpackb(f.read())
            if not isinstance(rec, dict) or not isinstance(rec.get("events"), list):
                raise ValueError("not a recording")
            if not all(isinstance(e, list) and e and isinstance(e[0], int) for e in rec["events"]):
                raise ValueError("an event without a timestamp")
        except (OSError, ValueError, msgpack.UnpackException) as exc:
            print(f"trace: skipping {path}: {exc}", file=sys.stderr)
            continue
        out.append(rec)
    return out


def merge_dir(
    directory: str, window_ms: tuple[float, float] = DEFAULT_WINDOW_MS, png: bool = True
) -> dict[str, Any]:
    """Write ``trace.json`` (and ``timeline.png``) into ``directory``; return the trace."""
    trace = to_chrome(load_dir(directory))
    clocks = _clocks(directory)
    if clocks:
        trace["otherData"]["clock"] = "CLOCK_MONOTONIC of emurun's host"
        trace["otherData"]["host_clocks"] = clocks
    tmp = os.path.join(directory, "trace.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(trace, f)
    os.replace(tmp, os.path.join(directory, "trace.json"))
    if png:
        draw_timeline(trace, os.path.join(directory, "timeline.png"), window_ms)
    return trace


def draw_timeline(trace: dict[str, Any], path: str, window_ms: tuple[float, float]) -> bool:
    """Draw MPI calls and packets of ``window_ms`` to ``path``; False without matplotlib."""
    try:
        import matplotlib  # optional: the bench extra

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "trace: matplotlib is absent; no timeline.png (pip install '.[bench]')", file=sys.stderr
        )
        return False
    fig, ax = plt.subplots(figsize=(12, 1 + 1.2 * len(_nodes(trace))))
    draw_axes(ax, trace, window_ms)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def draw_axes(ax: Any, trace: dict[str, Any], window_ms: tuple[float, float]) -> None:
    """Draw ``trace``'s window on matplotlib axes: a row per host and NIC, MPI calls and
    sleeps as bars, packets as ticks (sends red), flows as grey lines."""
    lo, hi = window_ms[0] * 1000.0, window_ms[1] * 1000.0
    events = [e for e in trace["traceEvents"] if "ts" in e and lo <= e["ts"] <= hi]
    nodes = _nodes(trace)
    row = {(n, tid): 2 * i + (tid == HOST_TID) for i, n in enumerate(nodes) for tid in (1, 2)}
    starts: dict[object, tuple[float, int]] = {}
    for e in events:
        y = row.get((e["pid"], e["tid"]))
        if y is None:
            continue
        if e["ph"] == "X" and e["tid"] == HOST_TID:
            color = "lightgray" if e["name"] == "wait sleep" else "tab:blue"
            ax.broken_barh([(e["ts"] / 1000, e["dur"] / 1000)], (y - 0.3, 0.6), color=color)
        elif e["ph"] == "X":
            ax.plot(e["ts"] / 1000, y, "|", color="tab:red" if e["name"] == "pkt send" else "k")
        elif e["ph"] == "s":
            starts[e["id"]] = (e["ts"], y)
        elif e["ph"] == "f" and e["id"] in starts:
            ts, y0 = starts[e["id"]]
            ax.plot([ts / 1000, e["ts"] / 1000], [y0, y], color="tab:gray", lw=0.5)
    ax.set_yticks(sorted(row.values()))
    ax.set_yticklabels(
        [
            f"node {n} {'host' if t == HOST_TID else 'nic'}"
            for (n, t), _ in sorted(row.items(), key=lambda kv: kv[1])
        ]
    )
    ax.set_xlabel("ms")
    ax.set_xlim(window_ms)


def _nodes(trace: dict[str, Any]) -> list[int]:
    return sorted({e["pid"] for e in trace["traceEvents"] if e.get("ph") == "M"})


def parse_window(text: str) -> tuple[float, float]:
    """``START:END`` in ms -> (start, end); raises ValueError on a bad or empty window."""
    start, sep, end = text.partition(":")
    if not sep:
        raise ValueError(f"window {text!r}: want START:END in ms")
    try:
        lo, hi = float(start), float(end)
    except ValueError:
        raise ValueError(f"window {text!r}: START and END must be numbers") from None
    if not hi > lo >= 0:
        raise ValueError(f"window {text!r}: want 0 <= START < END")
    return lo, hi


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m emutrace.merge DIR [--window START:END] [--no-png]``."""
    p = argparse.ArgumentParser(prog="python -m emutrace.merge")
    p.add_argument("directory")
    p.add_argument("--window", default="0:5", help="timeline window START:END in ms (%(default)s)")
    p.add_argument("--no-png", action="store_true", help="write only trace.json")
    args = p.parse_args(argv)
    try:
        window = parse_window(args.window)
    except ValueError as exc:
        p.error(str(exc))
    trace = merge_dir(args.directory, window, png=not args.no_png)
    print(f"{args.directory}/trace.json: {len(trace['traceEvents'])} events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
