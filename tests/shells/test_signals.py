"""The host's one SIGUSR1 dispatcher (emucluster.port.signals) and the GRIM endpoint as its client,
without a NIC: signal.signal and the retry timer are recorded, frames are real."""

from __future__ import annotations

import signal
import sys
import threading
from collections import Counter, deque
from typing import TYPE_CHECKING

import pytest

from emucluster.grim.endpoint import Endpoint
from emucluster.port import signals

if TYPE_CHECKING:
    from types import FrameType


@pytest.fixture
def timers(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    armed: list[float] = []
    installed: dict[int, object] = {}

    def fake_signal(signum: int, handler: object) -> object:
        old = installed.get(signum, "default")
        installed[signum] = handler
        return old

    monkeypatch.setattr(signals.signal, "signal", fake_signal)
    monkeypatch.setattr(signals.signal, "setitimer", lambda which, s: armed.append(s))
    monkeypatch.setattr(signals, "_clients", [])
    monkeypatch.setattr(signals, "_old", None)
    monkeypatch.setattr(signals, "_retry_armed", False)
    return armed


class Client:
    def __init__(self, owes: int) -> None:
        self.owes = owes
        self.calls: list[bool] = []

    def on_signal(self, frame: FrameType | None, retry: bool) -> bool:
        self.calls.append(retry)
        self.owes = max(0, self.owes - 1)
        return self.owes > 0


def test_every_client_hears_each_signal_and_one_that_owes_is_retried(timers: list[float]) -> None:
    quiet, owing = Client(0), Client(2)
    assert signals.register(quiet)
    assert signals.register(owing)
    assert signals._old is not None  # installed once, for both
    signals._on_signal(signal.SIGUSR1, None)
    assert quiet.calls == [False]
    assert owing.calls == [False]
    assert timers == [signals.RETRY_S]
    signals._on_retry(signal.SIGALRM, None)
    assert owing.calls == [False, True]
    assert timers == [signals.RETRY_S]  # it owes nothing more: no new timer
    signals.unregister(quiet)
    assert signals._old is not None
    signals.unregister(owing)
    assert signals._old is None  # the last one out restored the handlers


def test_no_handler_outside_the_main_thread(timers: list[float]) -> None:
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(signals.register(Client(0))))
    thread.start()
    thread.join()
    assert result == [False]
    assert signals._old is None


class BareEndpoint(Endpoint):
    """An Endpoint's signal client without a port: ``_progress`` only counts, or plays the
    point where a signal interrupts the endpoint's own ``poll`` after its read."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._owed = False
        self._closed = False
        self._dispatching = False
        self._amq = deque()
        self.port = object()  # type: ignore[assignment]
        self.kernel = object()  # type: ignore[assignment]
        self.counts = Counter()
        self.drains = 0
        self.interrupt = False
        self.handler_said: bool | None = None

    def _progress(self) -> None:
        if self.interrupt:  # the read is done; the signal comes now, inside Endpoint.poll
            self.interrupt = False
            self.handler_said = self.on_signal(sys._getframe(1), retry=False)
            return
        self._owed = False
        self.drains += 1

    def busy(self) -> bool | None:
        """The program is inside the endpoint (``poll``) when the signal comes."""
        self.interrupt = True
        self.poll()
        return self.handler_said


def test_the_endpoint_drains_from_the_handler_outside_it_and_never_inside() -> None:
    ep = BareEndpoint()
    assert ep.on_signal(sys._getframe(0), retry=False) is False  # the program computes
    assert ep.drains == 1
    assert ep.busy() is True  # inside: not re-entered, owed
    assert ep.drains == 1
    assert ep.on_signal(None, retry=True) is False  # the retry, outside: drains
    assert ep.drains == 2
    ep.busy()
    ep._progress()  # the endpoint's own drain took the record in meanwhile
    assert ep.on_signal(None, retry=True) is False
    assert ep.drains == 3  # only its own
