"""The application-bypass reduce core (thesis Figs 3.3 and 3.5) without processes."""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING

import pytest

from emucluster import coll
from emucluster.coll.binomial import reduce_binomial
from emucluster.coll.context import simulate
from emucluster.offload.app_bypass import shell as appbypass
from emucluster.offload.app_bypass.core import (
    AppBypass,
    Descriptor,
    InstanceKey,
    SendUp,
    SetSignals,
    reduce_app_bypass,
)
from emucluster.port import signals

if TYPE_CHECKING:
    from collections.abc import Callable


class Sum:
    commute = True

    def __call__(self, left: bytes, right: bytes) -> bytes:
        return str(int(left) + int(right)).encode()


class Concat:
    commute = False

    def __call__(self, left: bytes, right: bytes) -> bytes:
        return left + right


K1 = InstanceKey(3, 2 * 1024 + 2)
K2 = InstanceKey(3, 3 * 1024 + 2)


def start(core: AppBypass, key: InstanceKey, value: bytes, children: list[int],
          combine: Sum | Concat | None = None) -> Descriptor:  # fmt: skip
    desc, actions = core.start(key, value, combine or Sum(), source=4, parent=0, parent_node=0,
                               parent_is_root=True, children=children)  # fmt: skip
    assert actions == [SetSignals(False)]  # Fig 3.3: signals off first
    return desc


def test_early_children_are_consumed_synchronously_and_signals_stay_off() -> None:
    core = AppBypass()
    assert core.on_packet(K1, 5, b"10") == []  # no descriptor yet: unexpected (one copy)
    assert core.on_packet(K1, 6, b"100") == []
    desc = start(core, K1, b"1", [5, 6])
    assert core.consume(desc, 5) == []
    [up] = core.consume(desc, 6) or []
    assert up == SendUp(K1, 4, 0, 0, True, b"111")
    assert core.leave(desc) == []  # queue empty: signals are not enabled
    assert core.counters["early"] == 2
    assert core.counters["copies"] == 2
    assert core.counters["sync_completed"] == 1
    assert core.outstanding == 0


def test_late_child_completes_asynchronously_and_disables_signals() -> None:
    core = AppBypass()
    desc = start(core, K1, b"1", [5, 6])
    assert core.consume(desc, 5) is None  # "Message received?" no
    assert core.on_packet(K1, 5, b"2") == []  # expected: arrived while Reduce runs
    assert core.consume(desc, 6) is None
    assert core.leave(desc) == [SetSignals(True)]
    actions = core.on_packet(K1, 6, b"3")  # late: after Reduce returned
    assert actions == [SendUp(K1, 4, 0, 0, True, b"6"), SetSignals(False)]
    assert core.counters["expected"] == 1
    assert core.counters["late"] == 1
    assert core.counters["async_completed"] == 1
    assert core.counters["copies"] == 0


def test_late_messages_match_their_own_instance_with_many_outstanding() -> None:
    core = AppBypass()
    keys = [InstanceKey(3, i * 1024 + 2) for i in range(5)]
    for i, key in enumerate(keys):
        desc = start(core, key, str(i * 100).encode(), [6])
        assert core.leave(desc) == [SetSignals(True)]
    assert core.outstanding == 5
    results = {}
    for i in (3, 0, 4, 1, 2):  # the late child's packets, in any order
        actions = core.on_packet(keys[i], 6, str(i).encode())
        up = actions[0]
        assert isinstance(up, SendUp)
        results[up.key] = up.payload
        assert (SetSignals(False) in actions) == (core.outstanding == 0)
    assert results == {key: str(i * 101).encode() for i, key in enumerate(keys)}


def test_a_non_commutative_operation_keeps_rank_order() -> None:
    core = AppBypass()
    desc = start(core, K1, b"a", [5, 6, 8], Concat())
    core.leave(desc)
    assert core.on_packet(K1, 8, b"d") == []  # too early for its turn: held (a copy)
    assert core.on_packet(K1, 6, b"c") == []
    [up, off] = core.on_packet(K1, 5, b"b")
    assert isinstance(up, SendUp)
    assert up.payload == b"abcd"
    assert off == SetSignals(False)
    assert core.counters["copies"] == 2


def test_duplicates_and_strangers_are_counted_drops() -> None:
    core = AppBypass()
    desc = start(core, K1, b"1", [5])
    core.leave(desc)
    assert core.on_packet(K1, 9, b"7") == []  # not a child of this instance
    assert core.on_packet(K2, 5, b"1") == []  # another instance: early
    assert core.on_packet(K2, 5, b"1") == []  # ... twice
    assert core.stats()["dropped"] == {"duplicate": 2}
    with pytest.raises(ValueError, match="already outstanding"):
        core.start(K1, b"", Sum(), source=4, parent=0, parent_node=0, parent_is_root=True,
                   children=[5])  # fmt: skip


@pytest.mark.parametrize("size", [1, 2, 5, 8])
def test_without_the_service_it_is_the_binomial_reduce(size: int) -> None:
    def args(rank: int) -> tuple[bytes, Sum, int]:
        return (str(rank + 1).encode(), Sum(), size - 1)

    assert simulate(reduce_app_bypass, size, args) == simulate(reduce_binomial, size, args)


def test_registered_under_its_reserved_name() -> None:
    assert coll.get("reduce", environ={"EMU_REDUCE": "app-bypass"}) is reduce_app_bypass
    assert "app-bypass" in coll.choices("reduce")


class FakePort:
    """The signal controls of a Port; ``on_enable`` runs while the enable record goes out."""

    def __init__(self) -> None:
        self.records: list[str] = []
        self.on_enable: Callable[[], None] | None = None

    def enable_signals(self, seen: int) -> None:
        self.records.append(f"enable {seen}")
        if self.on_enable is not None:
            self.on_enable()

    def disable_signals(self) -> None:
        self.records.append("disable")


class FakeEngine:
    def __init__(self) -> None:
        self.port = FakePort()
        self.eager_limit = 16287
        self.hooks: dict[int, object] = {}

    def poll(self) -> bool:
        return False


def test_a_signal_raised_while_enabling_stays_owed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The NIC may signal as soon as it reads the enable record (a packet arrived that the
    host has not seen); the handler then runs inside the library and defers. That signal must
    stay owed, so the retry processes the packet: otherwise it would wait, unprocessed, until
    the program next calls MPI (the lost wake-up the benchmark found)."""
    timers: list[float] = []
    monkeypatch.setattr(signals.signal, "signal", lambda *args: None)
    monkeypatch.setattr(signals.signal, "setitimer", lambda which, s: timers.append(s))
    monkeypatch.setattr(signals, "_clients", [])
    monkeypatch.setattr(signals, "_old", None)
    monkeypatch.setattr(signals, "_retry_armed", False)
    engine = FakeEngine()
    bypass = appbypass.Bypass(engine)  # type: ignore[arg-type]
    desc, _ = bypass.core.start(K1, b"1", Sum(), source=4, parent=0, parent_node=0,
                                parent_is_root=True, children=[5])  # fmt: skip
    # The handler interrupts Bypass._set_signals (two frames up): inside the library.
    engine.port.on_enable = lambda: signals._on_signal(signal.SIGUSR1, sys._getframe(2))
    bypass.execute(bypass.core.leave(desc))
    engine.port.on_enable = None
    assert bypass.counters["signals_deferred"] == 1
    assert bypass.owe_ack
    assert timers == [appbypass.RETRY_S]
    signals._on_retry(signal.SIGALRM, None)  # the retry, outside the library
    assert bypass.counters["retries"] == 1
    assert bypass.counters["signal_runs"] == 1
    assert engine.port.records == ["enable 0", "enable 0"]  # acknowledged: signals re-armed
    assert not bypass.owe_ack
