"""What a job cost: each process's CPU seconds, wall time and run delay (the time it waited for
a CPU, `launcher.cpugauge`), as a table and as JSON."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher import cpugauge

if TYPE_CHECKING:
    from collections.abc import Sequence

    from launcher.plan import LaunchPlan

__all__ = [
    "UNKNOWN_LINE",
    "ProcessUsage",
    "describe_status",
    "format_table",
    "gauge_verdict",
    "job_json",
    "render",
    "usage_json",
]

_HEADERS = (
    "process", "pid", "user s", "system s", "cpu s", "wall s", "wait s", "wait %", "nicd %",
    "status",
)  # fmt: skip
UNKNOWN_LINE = (
    "?: run delay unknown (no /proc/<pid>/schedstat counts: a kernel without "
    "CONFIG_SCHED_INFO, or an exit the launcher did not see)"
)
"""Said once under the table when some process's run delay is unknown."""


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
    run_delay_s: float | None = None
    """Seconds it was runnable but waiting for a CPU (its main thread's); None if unknown."""

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


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f}"


def _percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}"


def _node_nicd_shares(usages: Sequence[ProcessUsage]) -> dict[int, float | None]:
    """Node -> its nicd's share of the CPU the node used (nodes with both processes)."""
    hosts = {u.node: u.cpu_s for u in usages if u.role == "host"}
    return {
        u.node: cpugauge.nicd_cpu_share(u.cpu_s, hosts[u.node])
        for u in usages
        if u.role == "nicd" and u.node in hosts
    }


def _rows(usages: Sequence[ProcessUsage], wall_s: float) -> list[tuple[str, ...]]:
    nicd_shares = _node_nicd_shares(usages)
    rows: list[tuple[str, ...]] = [
        (
            f"{u.role} {u.node}",
            str(u.pid),
            f"{u.user_s:.3f}",
            f"{u.system_s:.3f}",
            f"{u.cpu_s:.3f}",
            f"{u.wall_s:.3f}",
            _seconds(u.run_delay_s),
            _percent(cpugauge.run_delay_share(u)),
            _percent(nicd_shares.get(u.node)) if u.role == "nicd" else "",
            describe_status(u.returncode),
        )
        for u in sorted(usages, key=lambda u: (u.role != "host", u.node))
    ]
    g = cpugauge.gauge(usages)
    for role, share in (("host", g.rank_share), ("nicd", g.nicd_share)):
        mine = [u for u in usages if u.role == role]
        if mine:
            user, system = sum(u.user_s for u in mine), sum(u.system_s for u in mine)
            delays = [u.run_delay_s for u in mine]
            delay = None if None in delays else sum(d for d in delays if d is not None)
            nicd = _percent(g.nicd_cpu_share) if role == "nicd" else ""
            rows.append((f"all {role}s", "", f"{user:.3f}", f"{system:.3f}",
                         f"{user + system:.3f}", "", _seconds(delay), _percent(share), nicd,
                         ""))  # fmt: skip
    rows.append(("job", "", "", "", "", f"{wall_s:.3f}", "", "", "", ""))
    return rows


def _footer(usages: Sequence[ProcessUsage]) -> str:
    return f"\n{UNKNOWN_LINE}" if any(u.run_delay_s is None for u in usages) else ""


def format_table(usages: Sequence[ProcessUsage], wall_s: float) -> str:
    """A plain-text table, right-aligned numbers, one process a row, totals last."""
    rows = [_HEADERS, *_rows(usages, wall_s)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADERS))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + _footer(usages)


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
    console = Console(width=120, record=True)
    with console.capture() as capture:
        console.print(table)
    return str(capture.get()).rstrip() + _footer(usages)


def usage_json(usages: Sequence[ProcessUsage], wall_s: float) -> dict[str, object]:
    """The same figures, JSON-able (for ``--stats DIR``/job.json); unknown ones are null."""
    nicd_shares = _node_nicd_shares(usages)
    g = cpugauge.gauge(usages)
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
                "run_delay_s": u.run_delay_s,
                "run_delay_share": cpugauge.run_delay_share(u),
                **({"nicd_cpu_share": nicd_shares.get(u.node)} if u.role == "nicd" else {}),
            }
            for u in usages
        ],
        "gauge": cpugauge.gauge_json(g),
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


def gauge_verdict(plan: LaunchPlan, usages: Sequence[ProcessUsage]) -> list[str]:
    """What emurun says of the job's gauge at exit (lines without ``emurun:``): the warning
    when the machine was oversubscribed (not with ``-q`` unless ``--cpu-report``), a failure to
    append the gauge to ``EMU_GAUGE_OUT``; appends it there."""
    g = cpugauge.gauge(usages)
    lines = []
    warn = cpugauge.warning(g)
    if warn is not None and (plan.cpu_report or not plan.quiet):
        lines.append(warn)
    if plan.gauge_out is not None:
        try:
            cpugauge.append_gauge(plan.gauge_out, plan.job_id, g)
        except OSError as exc:
            lines.append(f"cannot write the gauge to {plan.gauge_out}: {exc}")
    return lines
