"""The fidelity gauge: how long a job's processes waited for a CPU, and whether that was enough
to distort what the job measured.

The kernel counts, per thread, the time it was runnable but not running (its *run delay*,
field 2 of ``/proc/<pid>/schedstat``, nanoseconds). The launcher reads it from each process
once it has exited and before it is reaped (`read_run_delay`; the zombie keeps its main
thread's counts; the fork server does the same for the children it reaps), next to its CPU
times. From those this module derives, per process, the share of its wall time it spent
waiting (`run_delay_share`), per node the nicd's share of the CPU its node used
(`nicd_cpu_share`), for the job the means (`Gauge`), and the one warning line emurun prints
when the ranks waited more than `WARN_SHARE` of their time (`warning`). With ``EMU_GAUGE_OUT``
emurun also appends the job's gauge to a file (`append_gauge`), and `summarise` condenses such
records (emubench puts its jobs' summary in every figure's JSON).

A kernel without these counts (no ``CONFIG_SCHED_INFO``, or not Linux) has no schedstat file
or reads ``0 0 0`` for a process that ran: the run delay is then unknown (None), never 0.

Invariants: pure except `read_run_delay` (one file read; never raises) and `append_gauge` (one
append; raises OSError).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from launcher.report import ProcessUsage

__all__ = [
    "ENV_GAUGE_OUT",
    "WARN_SHARE",
    "Gauge",
    "append_gauge",
    "gauge",
    "gauge_json",
    "nicd_cpu_share",
    "parse_schedstat",
    "read_run_delay",
    "run_delay_share",
    "summarise",
    "warning",
]

WARN_SHARE = 0.25
"""The ranks' mean run-delay share above which emurun warns. Why a quarter: the figures this
project draws compare CPU per message and factors of CPU whose differences are 20-50 % (the
NICVM factor 1.8 against the paper's 2.2, application bypass 2.2 against 3.3); a rank that
waits a quarter of its time for a CPU shares its core with at least one other runnable process
for that long, so its CPU costs include the context switches and cold caches of that
contention and its latencies the waiting (hosttime subtracts a rank's own run delay, not its
nicd's), a distortion of the size of the effects compared. An idle machine with emurun's
placement (a node's host and nicd on one core, taking turns) should stay below it; a job with
more busy processes than cores is far above it (four busy ranks on one core wait 75 %).
docs/guide/cpu-time.md says the same to users."""

ENV_GAUGE_OUT = "EMU_GAUGE_OUT"
"""A file named in emurun's environment: emurun appends the job's fidelity gauge to it as one
JSON line (job id, ranks' and nicds' run-delay shares, nicds' CPU share, the verdict)."""

_SCHEDSTAT = "/proc/{pid}/schedstat"


def parse_schedstat(text: str) -> float | None:
    """The run delay in seconds from the text of a schedstat file (``"<on-cpu ns> <run delay
    ns> <timeslices>"``); None if it is not that, or ``0 0 0`` (a kernel that keeps no counts:
    a process that ran had at least one timeslice)."""
    words = text.split()
    if len(words) != 3 or not all(w.isdigit() for w in words):
        return None
    on_cpu, delay, slices = (int(w) for w in words)
    if on_cpu == delay == slices == 0:
        return None
    return delay / 1e9


def read_run_delay(pid: int) -> float | None:
    """Process ``pid``'s run delay in seconds (its main thread's: read it from the zombie
    before reaping, when the other threads have gone), or None if unknown."""
    try:
        with open(_SCHEDSTAT.format(pid=pid), encoding="ascii") as f:
            return parse_schedstat(f.read(256))
    except (OSError, ValueError):
        return None


def run_delay_share(usage: ProcessUsage) -> float | None:
    """The share of its own wall time (start to exit) ``usage``'s process waited for a CPU;
    None if its run delay is unknown or it had no wall time."""
    if usage.run_delay_s is None or usage.wall_s <= 0:
        return None
    return usage.run_delay_s / usage.wall_s


def nicd_cpu_share(nicd_cpu_s: float, host_cpu_s: float) -> float | None:
    """The nicd's share of the CPU its node used (nicd and host process together): 0.5 when
    the emulated NIC costs as much CPU as the program; None if the node used none."""
    total = nicd_cpu_s + host_cpu_s
    return nicd_cpu_s / total if total > 0 else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


@dataclass(frozen=True, slots=True)
class Gauge:
    """The job's figures, from every process that exited."""

    rank_share: float | None
    """The ranks' mean run-delay share (None: unknown for all)."""
    nicd_share: float | None
    """The nicds' mean run-delay share."""
    nicd_cpu_share: float | None
    """All nicds' CPU over all processes' CPU."""
    unknown: int
    """Processes whose run delay is unknown."""

    @property
    def oversubscribed(self) -> bool | None:
        """Whether the ranks waited more than `WARN_SHARE` (None: unknown)."""
        return None if self.rank_share is None else self.rank_share > WARN_SHARE


def gauge(usages: Sequence[ProcessUsage]) -> Gauge:
    """The job's gauge from its processes' usages."""
    ranks = [u for u in usages if u.role == "host"]
    nicds = [u for u in usages if u.role == "nicd"]
    return Gauge(
        _mean([run_delay_share(u) for u in ranks]),
        _mean([run_delay_share(u) for u in nicds]),
        nicd_cpu_share(sum(u.cpu_s for u in nicds), sum(u.cpu_s for u in ranks)),
        sum(1 for u in usages if u.run_delay_s is None),
    )


def warning(g: Gauge) -> str | None:
    """The one line (without ``emurun:`` and newline) emurun prints when ``g`` says the
    machine was oversubscribed, else None."""
    if not g.oversubscribed or g.rank_share is None:
        return None
    return (
        f"warning: the ranks waited for a CPU {g.rank_share:.0%} of their time (run delay; "
        f"above {WARN_SHARE:.0%} the machine was oversubscribed): CPU and time measured in "
        "this job include that contention"
    )


def gauge_json(g: Gauge) -> dict[str, object]:
    """``g`` as JSON (unknown figures null), with the threshold it was judged by."""
    return {
        "rank_run_delay_share": g.rank_share,
        "nicd_run_delay_share": g.nicd_share,
        "nicd_cpu_share": g.nicd_cpu_share,
        "run_delay_unknown": g.unknown,
        "warn_share": WARN_SHARE,
        "oversubscribed": g.oversubscribed,
    }


def append_gauge(path: str, job_id: str, g: Gauge) -> None:
    """Append job ``job_id``'s gauge to ``path`` as one JSON line (OSError if it cannot)."""
    line = json.dumps({"job_id": job_id, **gauge_json(g)}) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)


def summarise(text: str) -> dict[str, object]:
    """What the JSON lines of `append_gauge` in ``text`` say together: how many jobs, how many
    of them were oversubscribed, the ranks' mean and largest run-delay share, the nicds' mean
    CPU share. Lines that are not such records are skipped (counted in ``unreadable``)."""
    shares: list[float] = []
    nicd_cpu: list[float] = []
    jobs = oversubscribed = unreadable = 0
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            unreadable += 1
            continue
        jobs += 1
        share, cpu = record.get("rank_run_delay_share"), record.get("nicd_cpu_share")
        if isinstance(share, int | float) and not isinstance(share, bool):
            shares.append(float(share))
        if isinstance(cpu, int | float) and not isinstance(cpu, bool):
            nicd_cpu.append(float(cpu))
        oversubscribed += record.get("oversubscribed") is True
    return {
        "jobs": jobs,
        "oversubscribed_jobs": oversubscribed,
        "rank_run_delay_share_mean": _mean(shares),
        "rank_run_delay_share_max": max(shares, default=None),
        "nicd_cpu_share_mean": _mean(nicd_cpu),
        "warn_share": WARN_SHARE,
        "unreadable": unreadable,
    }
