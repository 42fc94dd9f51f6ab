"""The MPI port's control messages (``MPI_CTRL``): revocations and the fault-tolerant agreement.

ULFM (``Comm.Revoke``, ``Agree``, ``Shrink``; ``emucluster.mpi.ft``) needs messages no receive
is posted for and that must be answered while the rank computes or waits for something else.
They travel as ``MPI_CTRL`` port messages beside the point-to-point stream; the `P2P` core
hands each to its `ControlLedger`, which keeps what they say and returns the answers to send.
Four 32-bit user arguments: ``(kind, context, seq, attempt)``; a vote or a decision carries a
JSON payload ``{"v": value, "f": [failed nodes]}`` (values are Python ints of any size: the
agreement ANDs a flag, or a mask of free context ids for ``Shrink``).

* ``REVOKE``: the communicator on p2p ``context`` is revoked (the core fails what waits on it).
* ``VOTE``: a member's value and the failures it knows, for agreement ``(context, seq)``, sent
  to the member it takes for the coordinator.
* ``DECIDE``: the agreement's outcome, from the coordinator (or from a member that had it).
* ``ASK``: "have you decided (context, seq)?": answered with ``DECIDE`` if so, else nothing.
  Sent while waiting on a member, it also keeps a message outstanding at the NIC, so a member
  that died is reported by the transport (``peer_dead``/``no_port``) instead of waited for.
* ``PING``: nothing to answer; sent by a fault-tolerant rank's wait to the nodes it waits on
  (``Progress.probe_awaited``) for the same reason.

Bad input (an unknown kind, a payload that does not parse) is counted in ``dropped`` and
dropped. Both tables are bounded (`MAX_AGREEMENTS`): the oldest entries go first, counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ASK",
    "DECIDE",
    "MAX_AGREEMENTS",
    "PING",
    "REVOKE",
    "VOTE",
    "ControlLedger",
    "ControlSend",
    "Decision",
    "Key",
    "decode",
    "encode",
]

REVOKE = 1
VOTE = 2
DECIDE = 3
ASK = 4
PING = 5
MAX_AGREEMENTS = 1024
"""Agreements whose votes (and, separately, decisions) a rank keeps at once."""

Key = tuple[int, int]
"""An agreement: (p2p context of its communicator, its number on that communicator)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What an agreement decided: the AND of the survivors' values and the failed nodes."""

    value: int
    failed: frozenset[int]


@dataclass(frozen=True, slots=True)
class ControlSend:
    """Send an ``MPI_CTRL`` message ``args`` + ``payload`` to ``dst_node``'s MPI port."""

    dst_node: int
    args: tuple[int, int, int, int]
    payload: bytes


def encode(value: int, failed: frozenset[int] | set[int]) -> bytes:
    """The payload of a vote or a decision."""
    return json.dumps({"v": value, "f": sorted(failed)}, separators=(",", ":")).encode()


def decode(payload: bytes) -> Decision:
    """A vote's or decision's payload; ValueError if it is not one."""
    try:
        doc = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("not an object")
    value, failed = doc.get("v"), doc.get("f")
    if type(value) is not int or not isinstance(failed, list):
        raise ValueError("missing 'v' (int) or 'f' (list)")
    if not all(type(n) is int and n >= 0 for n in failed):
        raise ValueError("'f' holds something other than node ids")
    return Decision(value, frozenset(failed))


class ControlLedger:
    """What this rank was told about revocations and agreements (sans-IO, one per rank)."""

    def __init__(self) -> None:
        self.votes: dict[Key, dict[int, Decision]] = {}
        """Votes received as coordinator: agreement -> node -> (value, failures it knew)."""
        self.decisions: dict[Key, Decision] = {}
        """Agreements decided (here, or told by the coordinator or another member)."""
        self.revoked: list[int] = []
        """Contexts revoked by a REVOKE not yet taken by the core (it empties the list)."""
        self.dropped: dict[str, int] = {}
        self.evicted = 0
        """Old agreements forgotten because a table was full."""

    def on_message(self, src_node: int, args: tuple[int, int, int, int],
                   payload: bytes) -> list[ControlSend]:  # fmt: skip
        """An ``MPI_CTRL`` message from ``src_node``; the answers to send."""
        kind, context, seq, _attempt = args
        key = (context, seq)
        if kind == REVOKE:
            self.revoked.append(context)
            return []
        if kind == ASK:
            return self._answer(src_node, key)
        if kind == PING:
            return []
        if kind not in (VOTE, DECIDE):
            self._drop("unknown_kind")
            return []
        try:
            told = decode(payload)
        except ValueError:
            self._drop("bad_payload")
            return []
        if kind == DECIDE:
            self.decide(key, told)
            return []
        if key in self.decisions:
            return self._answer(src_node, key)
        if key not in self.votes:
            self._bounded(self.votes)
        self.votes.setdefault(key, {})[src_node] = told
        return []

    def decide(self, key: Key, decision: Decision) -> None:
        """Record agreement ``key``'s outcome (the first one recorded stands)."""
        if key not in self.decisions:
            self._bounded(self.decisions)
            self.decisions[key] = decision
        self.votes.pop(key, None)

    def forget(self, context: int) -> None:
        """The communicator on ``context`` was freed: its agreements go (the id is reused)."""
        for table in (self.votes, self.decisions):
            for key in [k for k in table if k[0] == context]:
                del table[key]

    def _answer(self, src_node: int, key: Key) -> list[ControlSend]:
        decision = self.decisions.get(key)
        if decision is None:
            return []
        args = (DECIDE, key[0], key[1], 0)
        return [ControlSend(src_node, args, encode(decision.value, decision.failed))]

    def _bounded(self, table: dict[Key, Any]) -> None:
        while len(table) >= MAX_AGREEMENTS:
            del table[next(iter(table))]
            self.evicted += 1

    def _drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
