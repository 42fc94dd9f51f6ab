"""A hand-written check of the Chrome trace event format: the fields each phase requires."""

from __future__ import annotations

from typing import Any

__all__ = ["REQUIRED", "check_trace"]

_COMMON = ("ph", "pid", "tid")
REQUIRED: dict[str, tuple[str, ...]] = {
    "X": (*_COMMON, "name", "ts", "dur"),
    "B": (*_COMMON, "name", "ts"),
    "E": (*_COMMON, "ts"),
    "i": (*_COMMON, "name", "ts"),
    "s": (*_COMMON, "name", "cat", "id", "ts"),
    "f": (*_COMMON, "name", "cat", "id", "ts"),
    "M": ("ph", "pid", "name", "args"),
}
"""Phase -> the fields an event of that phase must carry."""
_NUMBERS = ("ts", "dur", "pid", "tid")


def check_trace(trace: Any) -> list[str]:
    """Every problem found in ``trace`` (a parsed JSON value); empty when it is valid."""
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not an object with a traceEvents list"]
    problems: list[str] = []
    flows: dict[object, set[str]] = {}
    for i, ev in enumerate(trace["traceEvents"]):
        if not isinstance(ev, dict):
            problems.append(f"event {i}: not an object")
            continue
        ph = ev.get("ph")
        if ph not in REQUIRED:
            problems.append(f"event {i}: unknown phase {ph!r}")
            continue
        problems += [f"event {i} ({ph}): no {k}" for k in REQUIRED[ph] if k not in ev]
        for k in _NUMBERS:
            if k in ev and (not isinstance(ev[k], int | float) or isinstance(ev[k], bool)):
                problems.append(f"event {i} ({ph}): {k} is not a number")
        if ph == "X" and isinstance(ev.get("dur"), int | float) and ev["dur"] < 0:
            problems.append(f"event {i} (X): negative dur")
        if ph == "i" and ev.get("s", "t") not in ("g", "p", "t"):
            problems.append(f"event {i} (i): bad scope {ev.get('s')!r}")
        if ph == "M" and not isinstance(ev.get("args"), dict):
            problems.append(f"event {i} (M): args is not an object")
        if ph in ("s", "f"):
            flows.setdefault(ev.get("id"), set()).add(ph)
    problems += [f"flow {fid!r}: {sorted(p)} only" for fid, p in flows.items() if p != {"s", "f"}]
    return problems
