"""The wait policy (emucluster.port.wait) on a virtual clock and a real socketpair."""

from __future__ import annotations

import socket

import pytest

from emucluster.port.wait import Waiter, WaitPolicy


class Clock:
    """A clock that moves only when a pump says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_until_pumps_until_ready_up_to_the_deadline_each_time() -> None:
    clock = Clock()
    waiter = Waiter("block", 0.0, clock=clock)
    calls: list[float | None] = []

    def pump(until: float | None) -> bool:
        calls.append(until)
        clock.now += 1.0
        return True

    assert waiter.until(lambda: len(calls) == 3, pump, 10.0)
    assert calls == [10.0, 10.0, 10.0]


def test_until_returns_false_at_the_deadline_after_one_last_pump() -> None:
    clock = Clock()
    waiter = Waiter("block", 0.0, clock=clock)
    calls: list[float | None] = []

    def pump(until: float | None) -> bool:
        calls.append(until)
        clock.now = 5.0
        return False

    clock.now = 7.0  # already past the deadline: still pumps once
    assert not waiter.until(lambda: False, pump, 5.0)
    assert calls == [5.0]


@pytest.mark.parametrize("policy", ["spin", "block", "hybrid"])
def test_wait_returns_when_records_arrive_and_false_at_the_deadline(policy: WaitPolicy) -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with a, b:
        a.setblocking(False)
        waiter = Waiter(policy, 0.0001)

        def take() -> int:
            try:
                return len(a.recv(64))
            except BlockingIOError:
                return 0

        assert not waiter.wait(a.fileno(), take, waiter.clock() + 0.01)
        b.send(b"x")
        assert waiter.wait(a.fileno(), take, waiter.clock() + 5.0)
        assert not waiter.readable(a.fileno(), waiter.clock() + 0.01)
        b.send(b"y")
        assert waiter.readable(a.fileno(), waiter.clock() + 5.0)
