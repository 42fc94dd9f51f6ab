"""What emurun says while a job starts: the live count of agents connected and nodes ready,
and the one line that says the nodes are ready.

A big job takes its time to start (1,024 nodes on one machine take about a minute; agents on
many hosts dial in one by one). On a terminal emurun shows a live count (`StartupCount`,
drawn by `launcher.job` with rich); when stderr is not a terminal (a batch job's output file,
a pipe) it says nothing until the one summary line (`ready_line`), as before.

Invariants: pure (counts and ``now`` in, text out): no clock, no terminal; a count never
shows more than its total, and the live line is redrawn at most every `REFRESH_S`, once the
start has taken `SHOW_AFTER_S` (a quick start shows nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REFRESH_S", "SHOW_AFTER_S", "StartupCount", "live_wanted", "ready_line"]

SHOW_AFTER_S = 0.5
"""A start quicker than this shows no live count (no flicker for small jobs)."""
REFRESH_S = 0.2
"""The live line is redrawn at most this often."""


@dataclass
class StartupCount:
    """The start of one job as counts, and when its live line is due."""

    nodes: int
    """Nodes of the job."""
    agents: int
    """Agents expected (0: a job on this machine, which has none)."""
    started: float
    """``now`` when emurun began to start the job."""
    connected: int = 0
    ready: int = 0
    _drawn: tuple[int, int, int] | None = None
    _drawn_at: float = float("-inf")

    def observe(self, connected: int, ready: int) -> None:
        """The counts as they are now (clamped to the totals)."""
        self.connected = max(0, min(connected, self.agents))
        self.ready = max(0, min(ready, self.nodes))

    def text(self, now: float) -> str:
        """``agents 3/4 connected, nodes 10/16 ready (2 s)``."""
        parts = [f"agents {self.connected}/{self.agents} connected"] if self.agents else []
        parts.append(f"nodes {self.ready}/{self.nodes} ready")
        return f"starting: {', '.join(parts)} ({int(max(0.0, now - self.started))} s)"

    def due(self, now: float) -> str | None:
        """The live line to draw now, or None (too early, too soon after the last one, or
        nothing changed, not even the whole seconds shown)."""
        if now - self.started < SHOW_AFTER_S or now - self._drawn_at < REFRESH_S:
            return None
        key = (self.connected, self.ready, int(max(0.0, now - self.started)))
        if key == self._drawn:
            return None
        self._drawn, self._drawn_at = key, now
        return self.text(now)

    @property
    def shown(self) -> bool:
        """A live line has been drawn (it must be cleared before the summary line)."""
        return self._drawn is not None


def live_wanted(stderr_is_terminal: bool, quiet: bool, term: str | None) -> bool:
    """Whether emurun draws the live count: on a terminal that can redraw, unless ``-q``."""
    return stderr_is_terminal and not quiet and term not in (None, "", "dumb")


def ready_line(job_id: str, nodes: int, where: str, setup: str, seconds: float) -> str:
    """The one line once every node is ready: ``job ID: N nodes ready[ on K hosts (...)];
    SETUP; started in T s``."""
    return f"job {job_id}: {nodes} nodes ready{where}; {setup}; started in {seconds:.1f} s"
