"""emucluster.port.signals: which interrupted stacks count as inside the library (a signal is
deferred there, never re-entrant)."""

from __future__ import annotations

import signal
import sys
import time
from typing import TYPE_CHECKING

import pytest

from emucluster import hosttime
from emucluster.port import signals
from emucluster.port.wait import Waiter

if TYPE_CHECKING:
    from types import FrameType


def test_a_frame_under_a_library_call_is_inside() -> None:
    frames: list[FrameType] = []

    def ready() -> bool:  # called by the library's wait loop
        frames.append(sys._getframe())
        return True

    Waiter("block", 0.0).until(ready, lambda until: True, None)
    assert signals.in_library(frames[0])
    assert not signals.in_library(sys._getframe())


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_a_program_busy_looping_on_the_host_clock_is_outside() -> None:
    """`hosttime.spin` is the program's compute loop (the papers' skew): a NIC signal that
    arrives during it must be served at once, as on a real node, not deferred until it ends."""
    frames: list[FrameType | None] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        frames.append(frame)

    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        hosttime.spin(0.5)
        signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert frames
    assert frames[0] is not None
    assert frames[0].f_globals["__name__"] == "emucluster.hosttime"
    assert not signals.in_library(frames[0])


class _Burner:
    """A client whose every call takes ``seconds`` of CPU (a handler doing real work)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0

    def on_signal(self, frame: FrameType | None, retry: bool) -> bool:
        self.calls += 1
        end = time.process_time() + self.seconds
        while time.process_time() < end:
            pass
        return False


@pytest.mark.skipif(not signals.available() or not hasattr(signal, "setitimer"),
                    reason="needs SIGUSR1 and setitimer")  # fmt: skip
def test_handler_time_prolongs_a_spin_and_is_counted() -> None:
    """A handler's work inside a program's `hosttime.spin` is not hidden in it: the loop goes
    on as long (as a loop of a fixed number of iterations would), so a region around it sees
    the loop's time plus the handler's."""
    burner = _Burner(0.03)
    assert signals.register(burner)
    try:
        handled0 = hosttime.handled()
        with hosttime.Region() as used:
            signal.setitimer(signal.ITIMER_REAL, 0.005)  # the dispatcher's retry timer
            hosttime.spin(0.05)
        signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signals.unregister(burner)
    assert burner.calls == 1
    # The handler burns 30 ms of CPU time; it is charged on the own-processor clock (monotonic
    # minus the run delay), which follows CPU time only to the kernel's accounting (a loaded run
    # charged 29.6 ms): 1 ms of slack, far from the 30 ms an uncharged handler gives.
    assert hosttime.handled() - handled0 >= 0.03 - 0.001
    assert used.own_wall_s >= 0.05 + hosttime.handled() - handled0  # exact by construction
    # CPU time follows that clock only to the kernel's accounting (a run read 79.85 ms of CPU
    # for 80.03 ms of own wall time): 1 ms of slack, far from the 50 ms a hidden handler gives.
    assert used.process_cpu_s >= 0.05 + 0.03 - 0.001
