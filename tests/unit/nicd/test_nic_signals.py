"""NicCore signals (thesis 3.4.1): only application-bypass messages on an enabled port raise
SIGUSR1, at most one pending until the host acknowledges by re-enabling, never other traffic.
Two cores on netsim's NicNet; each step returns what node 1 gave its host, in order."""

from __future__ import annotations

from nicd import hostlink as hl
from nicd.config import NicConfig
from nicd.core.actions import RaiseSignal, ToHost
from nicd.core.nic import NicCore
from nicd.link.wire import MsgType
from tests.unit.netsim import NicNet

CONN = 1
PID = 4242
AB = int(MsgType.AB_COLL)


class Link(NicNet):
    """Node 0 sends to node 1's port 0 over netsim's virtual network; the test watches what
    node 1 gives its host (records and signals, in order) for each step."""

    def __init__(self) -> None:
        super().__init__(2, conn=CONN)
        for node in (0, 1):
            self.request(node, hl.OpenReq(0))
            self.request(node, hl.ProvideReq(64))
        self.run()
        self.b = self.cores[1]
        self.handle = 0

    def arrive(self, msg_type: int, payload: bytes = b"x") -> list[object]:
        """Node 0's host sends one message; what node 1 gave its host meanwhile."""
        self.handle += 1
        return self._step(hl.SendReq(self.handle, 1, 0, payload, msg_type), node=0)

    def host(self, enable: bool, seen: int = 0) -> list[object]:
        """Node 1's host enables or disables signals; what its NIC gave it for that."""
        return self._step(hl.SignalCtl(enable, PID, seen), node=1)

    def _step(self, record: hl.HostRecord, node: int) -> list[object]:
        before = len(self.host_actions[1])
        self.request(node, record)
        self.run()
        return list(self.host_actions[1][before:])


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
    for msg_type in (MsgType.GM_DATA, MsgType.MPI_EAGER, MsgType.MPI_RTS, MsgType.AM_DATA):
        actions = link.arrive(int(msg_type))
        assert actions == [ToHost(CONN, hl.RecvEvent(0, 0, b"x", int(msg_type)))], msg_type
    # NICVM source with NICVM off here: the NIC takes it, the host hears nothing.
    assert link.arrive(int(MsgType.NICVM_DATA)) == []
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
