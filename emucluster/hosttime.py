"""Time as if this emulated host had a processor of its own: the clock and the CPU measure.

On the emulated cluster many hosts and NICs share a few cores. A host's wall clock then runs
through time it spent *runnable but waiting for a CPU* (the kernel's run delay, field 2 of
``/proc/thread-self/schedstat``), which a real node with its own processor never sees; and its
process CPU time misses the time it slept in the library waiting for its NIC, which a node
polling its NIC (as GM programs do) would have spent on the CPU. This module corrects both:

* `now` is the host's own-processor clock: monotonic time minus the run delay so far. `spin`
  busy-loops on it, so a skew of 1 ms is 1 ms of this host's own processor however many
  processes share the core (a loop on ``time.perf_counter`` gets only its share of the core).
  Like the papers' loops of a fixed number of iterations, it is prolonged by the time the
  library's signal handlers took from it (`charge_handler`): a handler's work is never hidden
  inside a skew or compute loop, it adds to the CPU time of a region around it.
* `Region` (``with hosttime.Region() as r: ...``) measures a piece of a program: ``r.cpu_s``
  is the process CPU time spent in it, which includes asynchronous library work (signal
  handlers of application-bypass collectives, progress run inside other calls) plus
  ``r.waited_s``, the time the library slept waiting for the NIC (a blocking wait, which yields
  the core to other emulated processes) charged as if it had polled, without the run delay of
  the wake-up. A program's own sleeps (``time.sleep``) are not charged. ``r.wall_s`` and
  ``r.run_delay_s`` are there too.

The library calls `charge_wait` around each blocking wait (`emucluster.port.wait`) and
`charge_handler` after each signal handler (`emucluster.port.signals`); nothing else touches this
module's state. Where schedstat is missing (not Linux, no CONFIG_SCHEDSTATS) the
run delay reads as 0 and `available` says so.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "Region",
    "Usage",
    "available",
    "charge_handler",
    "charge_wait",
    "handled",
    "now",
    "run_delay",
    "spin",
    "wait_mark",
    "waited",
]

SCHEDSTAT = "/proc/thread-self/schedstat"


class _Schedstat:
    """One open descriptor on this thread's schedstat, read with ``pread`` (no reopen); a
    forked child opens its own on first use (`forget` runs in it: no ``getpid`` per read,
    which is a system call, twice per library wait)."""

    def __init__(self) -> None:
        self.opened = False
        self.fd: int | None = None

    def forget(self) -> None:
        """In a forked child: the descriptor names the parent's thread; close it."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
        self.opened, self.fd = False, None

    def run_delay_ns(self) -> int:
        if not self.opened:  # first use in this process
            self.opened = True
            try:
                self.fd = os.open(SCHEDSTAT, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self.fd = None
        if self.fd is None:
            return 0
        try:
            fields = os.pread(self.fd, 96, 0).split()
            return int(fields[1])
        except (OSError, IndexError, ValueError):
            return 0


_SCHEDSTAT = _Schedstat()
os.register_at_fork(after_in_child=_SCHEDSTAT.forget)
_waited_ns = 0  # library waits charged as polling, this process
_handled_ns = 0  # own-processor time in the library's signal handlers, this process


def run_delay() -> float:
    """Seconds this thread has spent runnable but waiting for a CPU, since it started."""
    return _SCHEDSTAT.run_delay_ns() / 1e9


def available() -> bool:
    """Whether the run delay can be read here (else `run_delay` is always 0)."""
    _SCHEDSTAT.run_delay_ns()
    return _SCHEDSTAT.fd is not None


def now() -> float:
    """The host's own-processor clock (seconds): monotonic time without the run delay."""
    return time.monotonic() - _SCHEDSTAT.run_delay_ns() / 1e9


def spin(seconds: float) -> None:
    """Busy-loop for ``seconds`` of this host's own processor (the papers' skew and compute
    loops): longer in wall time when other processes take turns on the core, and longer by
    the time signal handlers of the library took from it (as a loop of a fixed number of
    iterations is), so their work is not hidden in the loop."""
    end_ns = time.monotonic_ns() - _SCHEDSTAT.run_delay_ns() + int(seconds * 1e9) - _handled_ns
    while time.monotonic_ns() - _SCHEDSTAT.run_delay_ns() - _handled_ns < end_ns:
        pass


def charge_handler(seconds: float) -> None:
    """The library's signal handler took ``seconds`` of this host's own processor (measured
    on `now`): a `spin` it interrupted goes on that much longer."""
    global _handled_ns
    if seconds > 0:
        _handled_ns += int(seconds * 1e9)


def handled() -> float:
    """Seconds of this host's own processor spent in the library's signal handlers so far."""
    return _handled_ns / 1e9


def charge_wait(started: float, delay_at_start_ns: int) -> None:
    """The library slept from monotonic ``started`` (run delay then: ``delay_at_start_ns``)
    until now, waiting for its NIC: charge that as polling, without the wake-up's run delay."""
    global _waited_ns
    delay_ns = _SCHEDSTAT.run_delay_ns() - delay_at_start_ns
    slept_ns = int((time.monotonic() - started) * 1e9) - delay_ns
    if slept_ns > 0:
        _waited_ns += slept_ns


def wait_mark() -> tuple[float, int]:
    """What `charge_wait` needs, taken just before a blocking wait."""
    return time.monotonic(), _SCHEDSTAT.run_delay_ns()


def waited() -> float:
    """Seconds of library waits charged as polling so far in this process."""
    return _waited_ns / 1e9


@dataclass(slots=True)
class Usage:
    """What a region of a program used (seconds)."""

    wall_s: float = 0.0
    """Monotonic time from entry to exit."""
    run_delay_s: float = 0.0
    """Of that, time spent runnable but waiting for a CPU (not this host's doing)."""
    process_cpu_s: float = 0.0
    """Process CPU time (``time.process_time``), asynchronous library work included."""
    waited_s: float = 0.0
    """Library waits for the NIC charged as polling (they yielded the core)."""

    @property
    def cpu_s(self) -> float:
        """CPU time as on a node with its own processor that polls its NIC: process CPU time
        plus the library's waits."""
        return self.process_cpu_s + self.waited_s

    @property
    def own_wall_s(self) -> float:
        """Wall time on the host's own-processor clock (`now`)."""
        return self.wall_s - self.run_delay_s


@dataclass(slots=True)
class Region:
    """``with Region() as r:`` measures the block into ``r`` (a `Usage`); or call `start`
    and `stop` yourself. Regions nest and may be reused (each `start` begins afresh)."""

    usage: Usage = field(default_factory=Usage)
    _marks: tuple[float, int, float, int] | None = None

    def start(self) -> Region:
        """Begin (again): a fresh `usage`, filled in by `stop`."""
        self.usage = Usage()
        self._marks = (time.monotonic(), _SCHEDSTAT.run_delay_ns(), time.process_time(),
                       _waited_ns)  # fmt: skip
        return self

    def stop(self) -> Usage:
        """End the region; its `usage`, also returned."""
        if self._marks is None:
            raise RuntimeError("Region.stop() before start()")
        wall0, delay0, cpu0, waited0 = self._marks
        usage = self.usage
        usage.wall_s = time.monotonic() - wall0
        usage.run_delay_s = (_SCHEDSTAT.run_delay_ns() - delay0) / 1e9
        usage.process_cpu_s = time.process_time() - cpu0
        usage.waited_s = (_waited_ns - waited0) / 1e9
        self._marks = None
        return usage

    def __enter__(self) -> Usage:
        return self.start().usage

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
