"""How the host waits for its NIC: the wait policy (spin, block, hybrid), in one place.

``spin`` polls the socket like GM polls its event queue and burns CPU as on the real cluster;
``block`` sleeps in the kernel (``select``); ``hybrid`` spins ``spin_s`` then blocks. A sleep
yields the core to the other emulated processes, and `emucluster.hosttime` charges it to the
program as if it had polled (what `hosttime.Region` reports as CPU time). A
blocking wait sleeps in ``select``, which PEP 475 resumes after a Python signal handler ran,
so signal handlers run during waits too.

Every wait of the host library ends here: `Waiter.wait` (until records arrived) under
`Waiter.until` (until a condition holds). `emucluster.port.client.Port.pump` and
`Port.wait_until` are the public doors; MPI's progress engine, GRIM's endpoint and the NICVM
client all wait through them.
"""

from __future__ import annotations

import select
import time
from typing import TYPE_CHECKING, Literal

from emucluster import hosttime
from emutrace import recorder
from emutrace.kinds import K_WAIT_SLEEP

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DEFAULT_SPIN_US", "WaitPolicy", "Waiter"]

WaitPolicy = Literal["spin", "block", "hybrid"]
DEFAULT_SPIN_US = 50.0  # hybrid: microseconds of polling before sleeping in the kernel


class Waiter:
    """The wait policy of one port."""

    def __init__(
        self, policy: WaitPolicy, spin_s: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.policy: WaitPolicy = policy
        """``spin``, ``block`` or ``hybrid`` (may be changed between waits)."""
        self.spin_s = spin_s
        """Hybrid: seconds of polling before blocking."""
        self.clock = clock

    def wait(self, fileno: int, take: Callable[[], int], deadline: float | None) -> bool:
        """Call ``take`` (read what is there; return how many records) until it returned
        some, waiting on descriptor ``fileno`` by the policy; False at ``deadline``."""
        clock = self.clock
        if self.policy != "block":
            spin_until = None if self.policy == "spin" else clock() + self.spin_s
            while True:
                if take():
                    return True
                now = clock()
                if deadline is not None and now >= deadline:
                    return False
                if spin_until is not None and now >= spin_until:
                    break
        while True:
            remaining = None if deadline is None else max(0.0, deadline - clock())
            started, delay = hosttime.wait_mark()
            slept_from = time.monotonic_ns() if recorder.tracer is not None else 0
            ready, _, _ = select.select([fileno], [], [], remaining)
            hosttime.charge_wait(started, delay)  # as if this host had polled its NIC
            if recorder.tracer is not None:
                recorder.tracer.emit(K_WAIT_SLEEP, time.monotonic_ns() - slept_from)
            if ready and take():
                return True
            if deadline is not None and clock() >= deadline:
                return False

    def readable(self, fileno: int, deadline: float) -> bool:
        """Sleep in the kernel until descriptor ``fileno`` is readable (True) or
        ``deadline`` (False), reading nothing: for a second thread that must not read."""
        ready, _, _ = select.select([fileno], [], [], max(0.0, deadline - self.clock()))
        return bool(ready)

    def readable_any(self, filenos: list[int], deadline: float) -> bool:
        """Sleep in the kernel until one of ``filenos`` is readable (True) or ``deadline``
        (False), reading nothing: for a wait on two ports (MPI's and one-sided's). The
        sleep is charged as a poll, as in `wait`."""
        started, delay = hosttime.wait_mark()
        ready, _, _ = select.select(filenos, [], [], max(0.0, deadline - self.clock()))
        hosttime.charge_wait(started, delay)
        return bool(ready)

    def until(
        self,
        ready: Callable[[], bool],
        pump: Callable[[float | None], bool],
        deadline: float | None,
    ) -> bool:
        """Call ``pump(until)`` (take in records, waiting until ``until`` for some) until
        ``ready()``; False at ``deadline``.

        ``ready`` is evaluated after each pump only: a condition must be one that records
        change. There is no re-check timer; a wait on memory the NIC writes with no event
        (GRIM's remote writes) first asks the NIC to report those writes (``RmWatch``)."""
        while not ready():
            # Pump at least once, even past the deadline: what already arrived counts.
            if not pump(deadline) and deadline is not None and self.clock() >= deadline:
                return ready()
        return True
