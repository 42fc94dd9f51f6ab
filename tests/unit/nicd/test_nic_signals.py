"""NicCore signals (thesis 3.4.1): only application-bypass messages on an enabled port raise
SIGUSR1, at most one pending until the host acknowledges by re-enabling, never other traffic."""

from __future__ import annotations

from nicd import hostlink as hl
from nicd.actions import RaiseSignal, ToHost, Transmit
from nicd.config import NicConfig
from nicd.link.wire import MsgType
from nicd.nic import NicCore

A = ("127.0.0.1", 1001)
B = ("127.0.0.1", 1002)
CONN = 1
PID = 4242
AB = int(MsgType.AB_COLL)


class Link:
    """Node 0 sends to node 1's port 0; the test watches what node 1 gives its host."""

    def __init__(self) -> None:
        self.a = NicCore(NicConfig(0, "/tmp"))
        self.b = NicCore(NicConfig(1, "/tmp"))
        for core in (self.a, self.b):
            core.set_routes({0: A, 1: B})
            core.on_host(CONN, hl.OpenReq(0), now=0.0)
            core.on_host(CONN, hl.ProvideReq(64), now=0.0)
        self.handle = 0

    def arrive(self, msg_type: int, payload: bytes = b"x") -> list[object]:
        self.handle += 1
        [tx] = self.a.on_host(CONN, hl.SendReq(self.handle, 1, 0, payload, msg_type), now=0.0)
        assert isinstance(tx, Transmit)
        return list(self.b.on_datagram(tx.datagram, A, now=0.0))

    def host(self, enable: bool, seen: int = 0) -> list[object]:
        return list(self.b.on_host(CONN, hl.SignalCtl(enable, PID, seen), now=0.0))


def signals(actions: list[object]) -> list[RaiseSignal]:
    return [a for a in actions if isinstance(a, RaiseSignal)]


def test_signals_are_off_when_a_port_opens() -> None:
    link = Link()
    actions = link.arrive(AB)
    assert [type(a) for a in actions] == [ToHost]
    assert signals(actions) == []


def test_enabled_port_gets_the_record_then_one_signal() -> None:
    link = Link()
    assert link.host(True) == []
    actions = link.arrive(AB, b"\x01" * 8)
    assert actions == [
        ToHost(CONN, hl.RecvEvent(0, 0, b"\x01" * 8, AB)),
        RaiseSignal(CONN, PID),
    ]


def test_at_most_one_pending_until_the_host_acknowledges() -> None:
    link = Link()
    link.host(True)
    assert len(signals(link.arrive(AB))) == 1
    assert signals(link.arrive(AB)) == []  # pending: no second signal
    assert signals(link.arrive(AB)) == []
    # The host took in 1 of the 3: acknowledging re-signals at once for the other two.
    assert link.host(True, seen=1) == [RaiseSignal(CONN, PID)]
    assert link.host(True, seen=3) == []  # now it has seen all: nothing pending
    assert len(signals(link.arrive(AB))) == 1
    stats = link.b.stats()["gm"]["ports"]["0"]  # type: ignore[index]
    assert stats["signals_raised"] == 3
    assert stats["ab_delivered"] == 4


def test_other_traffic_never_signals() -> None:
    link = Link()
    link.host(True)
    for msg_type in (MsgType.GM_DATA, MsgType.MPI_EAGER, MsgType.MPI_RTS, MsgType.AM_DATA,
                     MsgType.NICVM_DATA):  # fmt: skip
        actions = link.arrive(int(msg_type))
        assert signals(actions) == [], msg_type
        assert len(actions) == 1
    assert len(signals(link.arrive(AB))) == 1


def test_disabling_stops_signals_and_forgets_the_pending_one() -> None:
    link = Link()
    link.host(True)
    assert len(signals(link.arrive(AB))) == 1
    assert link.host(False) == []
    assert signals(link.arrive(AB)) == []
    assert signals(link.arrive(AB)) == []
    # Re-enabling with everything seen: no signal, and the next arrival signals again.
    assert link.host(True, seen=3) == []
    assert len(signals(link.arrive(AB))) == 1


def test_enabling_with_unseen_messages_signals_at_once() -> None:
    link = Link()
    link.arrive(AB)  # arrived while disabled (the host was checking by itself)
    assert link.host(True, seen=0) == [RaiseSignal(CONN, PID)]


def test_seen_counts_wrap_modulo_two_to_the_32() -> None:
    link = Link()
    state = link.b.ports.get(0)
    assert state is not None
    state.ab_delivered = 0xFFFFFFFF
    link.arrive(AB)  # wraps to 0
    assert link.host(True, seen=0) == []
    assert link.host(True, seen=0xFFFFFFFF) == [RaiseSignal(CONN, PID)]


def test_signal_control_before_open_is_refused() -> None:
    core = NicCore(NicConfig(0, "/tmp"))
    [refused] = core.on_host(9, hl.SignalCtl(True, PID, 0), now=0.0)
    assert isinstance(refused, ToHost)
    assert refused.record == hl.Refused("SIGNALS before OPEN")
