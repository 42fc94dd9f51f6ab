"""What a job cost: each process's CPU seconds and wall time, as a table and as JSON."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from launcher.plan import LaunchPlan

__all__ = [
    "ProcessUsage",
    "describe_status",
    "format_table",
    "job_json",
    "render",
    "usage_json",
]

_HEADERS = ("process", "pid", "user s", "system s", "cpu s", "wall s", "status")


@dataclass(frozen=True, slots=True)
class ProcessUsage:
    """CPU and wall time of one process (children it waited for included)."""

    role: str
    """``host`` or ``nicd``."""
    node: int
    """Its node (the host's rank)."""
    pid: int
    user_s: float
    """User CPU seconds, its own plus its waited-for children's."""
    system_s: float
    """System CPU seconds, likewise."""
    wall_s: float
    """From start to exit."""
    returncode: int | None
    """As subprocess reports it (negative: killed by that signal); None if unknown."""

    @property
    def cpu_s(self) -> float:
        """User plus system seconds."""
        return self.user_s + self.system_s


def describe_status(returncode: int | None) -> str:
    """``0``, ``3``, ``SIGKILL`` or ``?``."""
    if returncode is None:
        return "?"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return str(returncode)


def _rows(usages: Sequence[ProcessUsage], wall_s: float) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [
        (
            f"{u.role} {u.node}",
            str(u.pid),
            f"{u.user_s:.3f}",
            f"{u.system_s:.3f}",
            f"{u.cpu_s:.3f}",
            f"{u.wall_s:.3f}",
            describe_status(u.returncode),
        )
        for u in sorted(usages, key=lambda u: (u.role != "host", u.node))
    ]
    for role in ("host", "nicd"):
        mine = [u for u in usages if u.role == role]
        if mine:
            user, system = sum(u.user_s for u in mine), sum(u.system_s for u in mine)
            rows.append((f"all {role}s", "", f"{user:.3f}", f"{system:.3f}",
                         f"{user + system:.3f}", "", ""))  # fmt: skip
    rows.append(("job", "", "", "", "", f"{wall_s:.3f}", ""))
    return rows


def format_table(usages: Sequence[ProcessUsage], wall_s: float) -> str:
    """A plain-text table, right-aligned numbers, one process a row, totals last."""
    rows = [_HEADERS, *_rows(usages, wall_s)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADERS))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def render(usages: Sequence[ProcessUsage], wall_s: float) -> str:
    """The table drawn by rich when it is installed, else :func:`format_table`."""
    try:  # optional (plain text without it), and ~40 ms emurun pays only for --cpu-report
        from rich.console import Console  # type: ignore[import-not-found,unused-ignore]
        from rich.table import Table  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return format_table(usages, wall_s)
    table = Table(title="emurun: CPU and wall time")
    for i, header in enumerate(_HEADERS):
        table.add_column(header, justify="left" if i == 0 else "right")
    for row in _rows(usages, wall_s):
        table.add_row(*row)
    console = Console(width=100, record=True)
    with console.capture() as capture:
        console.print(table)
    return str(capture.get()).rstrip()


def usage_json(usages: Sequence[ProcessUsage], wall_s: float) -> dict[str, object]:
    """The same figures, JSON-able (for ``--stats DIR``/job.json)."""
    return {
        "wall_s": wall_s,
        "processes": [
            {
                "role": u.role,
                "node": u.node,
                "pid": u.pid,
                "user_s": u.user_s,
                "system_s": u.system_s,
                "wall_s": u.wall_s,
                "returncode": u.returncode,
            }
            for u in usages
        ],
    }


def job_json(
    plan: LaunchPlan,
    code: int,
    outcome: str | None,
    priority: str,
    usages: Sequence[ProcessUsage],
    wall_s: float,
) -> dict[str, object]:
    """The job's summary (``--stats DIR``/job.json): what ran, how, how it ended, its cost."""
    f = plan.faults
    return {
        "job_id": plan.job_id,
        "np": plan.np,
        "program": list(plan.program.argv),
        "exit_code": code,
        "outcome": outcome,
        "faults": {
            "loss": f.loss,
            "dup": f.dup,
            "reorder": f.reorder,
            "corrupt": f.corrupt,
            "delay_ms": f.delay_ms,
            "seed": f.seed,
        },
        "bind_to": plan.bind_to,
        "nic_priority": priority,
        "usage": usage_json(usages, wall_s),
    }
