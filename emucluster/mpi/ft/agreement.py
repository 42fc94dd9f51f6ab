"""One rank's part in a fault-tolerant agreement (sans-IO): ``Comm.Agree`` and ``Shrink``.

A rotating coordinator over the members' node ids, in increasing order, with the failures the
transport reports as the failure detector (a node the NIC gave up on, or whose MPI port is
gone, is dead for good):

* the coordinator is the first member not known to have failed;
* every other member sends it a VOTE (its value and the failures it knows) and waits for the
  DECIDE; if the coordinator fails first, the member counts it failed and votes for the next;
* the coordinator waits until every member it does not know failed has voted (or turns out to
  have failed, or answers an ASK with a decision it already has: then that decision stands),
  decides ``value`` = the AND of the voters' values and ``failed`` = every failure anyone
  reported, and sends the decision to every survivor.

While it waits, a member ASKs the members it waits on every `ASK_INTERVAL_S`: a message
outstanding at the NIC is how a peer that died is noticed (there is no heartbeat otherwise),
and a member that already decided answers with the decision, which the asker adopts, so two
survivors never leave with different decisions. Decisions are kept by the rank's
`ControlLedger` and answered in the background (a member that decided and moved on still
answers a late coordinator).

Inputs: ``step(now, dead)``, with the transport's dead nodes; outputs: `ControlSend` actions;
``decision`` once decided.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.p2p.control import ASK, DECIDE, VOTE, ControlSend, Decision, encode

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from emucluster.p2p.control import ControlLedger, Key

__all__ = ["ASK_INTERVAL_S", "Agreement"]

ASK_INTERVAL_S = 0.25
"""How often a waiting member asks the members it waits on (and so probes them)."""


class Agreement:
    """Agreement ``key`` among ``members`` (node ids) as seen by member ``me``."""

    def __init__(self, ledger: ControlLedger, key: Key, members: Sequence[int], me: int,
                 value: int) -> None:  # fmt: skip
        if me not in members:
            raise ValueError(f"node {me} is not among the members {list(members)}")
        self.ledger = ledger
        self.key = key
        self.members = sorted(set(members))
        self.me = me
        self.value = value
        self.failed: set[int] = set()
        """Members this rank knows failed (its transport's, and what voters told)."""
        self.decision: Decision | None = None
        self._voted_to = -1
        self._asked_at: dict[int, float] = {}

    def coordinator(self) -> int:
        """The first member not known to have failed (this rank, at worst)."""
        return next(n for n in self.members if n not in self.failed)

    def step(self, now: float, dead: Iterable[int]) -> list[ControlSend]:
        """Advance with the transport's dead nodes ``dead``; what to send."""
        if self.decision is not None:
            return []
        members = self.members
        self.failed.update(n for n in dead if n in members and n != self.me)
        decided = self.ledger.decisions.get(self.key)
        if decided is not None:
            self.decision = decided
            return []
        coordinator = self.coordinator()
        if coordinator != self.me:
            return self._vote(now, coordinator)
        return self._coordinate(now)

    def _vote(self, now: float, coordinator: int) -> list[ControlSend]:
        if self._voted_to != coordinator:
            self._voted_to = coordinator
            self._asked_at[coordinator] = now
            args = (VOTE, self.key[0], self.key[1], 0)
            return [ControlSend(coordinator, args, encode(self.value, self.failed))]
        return self._ask(now, [coordinator])

    def _coordinate(self, now: float) -> list[ControlSend]:
        votes = self.ledger.votes.get(self.key, {})
        for vote in votes.values():
            self.failed.update(n for n in vote.failed if n in self.members and n != self.me)
        waiting = [n for n in self.members
                   if n != self.me and n not in self.failed and n not in votes]  # fmt: skip
        if waiting:
            return self._ask(now, waiting)
        value = self.value
        for node, vote in votes.items():
            if node not in self.failed:
                value &= vote.value
        decision = Decision(value, frozenset(self.failed))
        self.ledger.decide(self.key, decision)
        self.decision = decision
        args = (DECIDE, self.key[0], self.key[1], 0)
        payload = encode(decision.value, decision.failed)
        return [ControlSend(n, args, payload) for n in self.members
                if n != self.me and n not in self.failed]  # fmt: skip

    def _ask(self, now: float, nodes: list[int]) -> list[ControlSend]:
        out: list[ControlSend] = []
        for node in nodes:
            last = self._asked_at.get(node)
            if last is None or now - last >= ASK_INTERVAL_S:
                self._asked_at[node] = now
                out.append(ControlSend(node, (ASK, self.key[0], self.key[1], 0), b""))
        return out
