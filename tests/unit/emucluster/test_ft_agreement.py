"""ULFM's sans-IO parts: the control ledger (``emucluster.p2p.control``), the fault-tolerant
agreement (``emucluster.mpi.ft.agreement``) over a simulated network where nodes die, and the
p2p core's revocation (``P2P.revoke``)."""

from __future__ import annotations

import pytest

from emucluster.mpi.ft.agreement import ASK_INTERVAL_S, Agreement
from emucluster.p2p.control import (
    ASK,
    DECIDE,
    MAX_AGREEMENTS,
    PING,
    REVOKE,
    VOTE,
    ControlLedger,
    ControlSend,
    Decision,
    decode,
    encode,
)
from emucluster.p2p.ops import Outcome
from emucluster.p2p.protocol import P2P, Transmit
from nicd.contract import MsgType

KEY = (8, 0)


class Net:
    """Nodes with a ledger and an agreement each; messages to a dead node are lost and its
    death is reported to the sender's transport (as the NIC does) when it sends to it."""

    def __init__(self, values: dict[int, int], dead: set[int] | None = None) -> None:
        self.ledgers = {n: ControlLedger() for n in values}
        members = sorted(values)
        self.agreements = {n: Agreement(self.ledgers[n], KEY, members, n, v)
                           for n, v in values.items()}  # fmt: skip
        self.dead = set(dead or ())
        self.noticed: dict[int, set[int]] = {n: set() for n in values}
        self.queue: list[tuple[int, ControlSend]] = []
        self.now = 0.0
        self.cut: dict[int, int] = {}
        """node -> messages it may still send before it dies."""

    def send(self, src: int, sends: list[ControlSend]) -> None:
        for s in sends:
            if src in self.dead:
                return
            if src in self.cut:
                if self.cut[src] == 0:
                    self.dead.add(src)
                    return
                self.cut[src] -= 1
            if s.dst_node in self.dead:
                self.noticed[src].add(s.dst_node)
            else:
                self.queue.append((src, s))

    def run(self, rounds: int = 200) -> dict[int, Decision]:
        for _ in range(rounds):
            for n, agreement in self.agreements.items():
                if n not in self.dead:
                    self.send(n, agreement.step(self.now, self.noticed[n]))
            while self.queue:
                src, s = self.queue.pop(0)
                if s.dst_node not in self.dead:
                    self.send(
                        s.dst_node, self.ledgers[s.dst_node].on_message(src, s.args, s.payload)
                    )
            self.now += ASK_INTERVAL_S
            live = [a for n, a in self.agreements.items() if n not in self.dead]
            if all(a.decision is not None for a in live):
                break
        return {n: a.decision for n, a in self.agreements.items()
                if n not in self.dead and a.decision is not None}  # fmt: skip


def test_no_failure_every_member_decides_the_and() -> None:
    decided = Net({0: 0b1011, 1: 0b1101, 2: 0b1111}).run()
    assert set(decided) == {0, 1, 2}
    assert set(decided.values()) == {Decision(0b1001, frozenset())}


def test_a_member_dead_before_the_agreement_is_left_out_and_reported() -> None:
    decided = Net({0: 0b0111, 1: 0b0110, 2: 0b0001, 3: 0b1110}, dead={2}).run()
    assert set(decided) == {0, 1, 3}
    assert set(decided.values()) == {Decision(0b0110, frozenset({2}))}


def test_a_dead_coordinator_is_replaced() -> None:
    decided = Net({0: 1, 1: 3, 2: 7}, dead={0}).run()
    assert set(decided.values()) == {Decision(3, frozenset({0}))}


def test_a_coordinator_dying_while_it_sends_the_decision_leaves_one_outcome() -> None:
    net = Net({0: 0b11, 1: 0b01, 2: 0b11, 3: 0b11})
    net.cut[0] = 4  # three ASKs at its first step, then one DECIDE (to node 1), then dead
    decided = net.run()
    assert set(decided) == {1, 2, 3}
    assert len(set(decided.values())) == 1  # node 2 and 3 adopt what node 1 got from node 0
    assert decided[1].value == 0b01


def test_a_member_cannot_agree_from_outside() -> None:
    with pytest.raises(ValueError, match="not among the members"):
        Agreement(ControlLedger(), KEY, [0, 1], 2, 0)


def test_ledger_answers_asks_only_once_decided_and_drops_bad_input() -> None:
    ledger = ControlLedger()
    assert ledger.on_message(1, (ASK, 8, 0, 0), b"") == []
    ledger.decide(KEY, Decision(5, frozenset({3})))
    (answer,) = ledger.on_message(1, (ASK, 8, 0, 0), b"")
    assert answer.dst_node == 1
    assert answer.args == (DECIDE, 8, 0, 0)
    assert decode(answer.payload) == Decision(5, frozenset({3}))
    assert ledger.on_message(1, (VOTE, 8, 1, 0), b"{not json") == []
    assert ledger.on_message(1, (VOTE, 8, 1, 0), b'{"v": 1, "f": [-1]}') == []
    assert ledger.on_message(1, (99, 8, 1, 0), b"") == []
    assert ledger.on_message(1, (PING, 0, 0, 0), b"") == []
    assert ledger.dropped == {"bad_payload": 2, "unknown_kind": 1}
    assert (8, 1) not in ledger.votes


def test_ledger_tables_are_bounded_and_forget_a_freed_context() -> None:
    ledger = ControlLedger()
    for seq in range(MAX_AGREEMENTS + 5):
        ledger.on_message(1, (VOTE, 10, seq, 0), encode(1, set()))
    assert len(ledger.votes) == MAX_AGREEMENTS
    assert ledger.evicted == 5
    ledger.decide((12, 0), Decision(1, frozenset()))
    ledger.forget(10)
    assert ledger.votes == {}
    assert (12, 0) in ledger.decisions


def test_revoke_fails_posted_and_later_receives_of_both_contexts() -> None:
    core = P2P(0, 3)
    posted, _ = core.recv(8, 1, 5, 1, None)
    collective, _ = core.recv(9, 2, 5, 2, None)
    other, _ = core.recv(10, 1, 5, 1, None)
    answers = core.on_message(2, MsgType.MPI_CTRL, (REVOKE, 8, 0, 0), b"")
    assert answers == []
    assert posted.outcome is Outcome.REVOKED
    assert collective.outcome is Outcome.REVOKED
    assert other.done is False
    later, _ = core.recv(8, 1, 6, 1, None)
    assert later.outcome is Outcome.REVOKED
    core.forget(8)
    fresh, _ = core.recv(8, 1, 6, 1, None)
    assert fresh.done is False


def test_the_core_answers_an_ask_for_a_decided_agreement_as_a_transmit() -> None:
    core = P2P(0, 2)
    core.control.decide(KEY, Decision(3, frozenset()))
    (action,) = core.on_message(1, MsgType.MPI_CTRL, (ASK, 8, 0, 0), b"")
    assert isinstance(action, Transmit)
    assert action.dst_node == 1
    assert action.msg_type == MsgType.MPI_CTRL
    assert decode(bytes(action.payload)) == Decision(3, frozenset())


def test_awaited_nodes_are_those_a_posted_operation_waits_on() -> None:
    core = P2P(0, 4)
    core.recv(8, 1, 0, 1, None)
    core.recv(8, -1, 0, None, None)  # ANY_SOURCE: no node to probe
    core.send(8, 0, 0, 3, b"x" * (core.eager_limit + 1))  # rendezvous: waits for node 3's CTS
    assert core.awaited_nodes() == {1, 3}
    core.on_send_failed(3, "peer_dead")
    assert core.awaited_nodes() == {1}
