"""The passive-target lock queues a NIC keeps for the windows in its host's memory (MPI
``Win.Lock``/``Unlock``/``Lock_all``): shared and exclusive, granted first come first served by
the NIC without the target host's help.

A lock is named by (local port, virtual address of its lock word). An origin (node, port)
asks with ``RM_ATOMIC`` op ``LOCK_SHARED``/``LOCK_EXCLUSIVE`` (:mod:`nicd.grim.atomics`); the
NIC answers the operation's status only when the lock is granted, so the origin's request
completes at the grant. ``UNLOCK`` releases and grants the waiters it unblocks. Pure: events
and ``now`` in, :data:`Outcome` s out (the GRIM service turns them into status replies).

Fairness: requests are granted strictly in arrival order. The head of the queue is granted
when it is compatible with the holders (an exclusive request: nobody holds; a shared one: no
exclusive holder), and so are the shared requests right behind a granted shared one; a shared
request that arrives while an exclusive one waits queues behind it, so writers never starve.

Never a hang: a waiter not granted within ``wait_s`` is refused (``LOCK_FAILED`` at the
origin: its holder never released); a dead node's holdings are released and its waiting
entries dropped (:meth:`LockTable.peer_dead`); a closing port refuses its locks' waiters at
the next timer. Bounded: at most ``max_waiters`` waiting entries over all locks; one more is
refused at once and counted.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter, deque
from dataclasses import dataclass, field

__all__ = [
    "LOCK_WAIT_S",
    "MAX_WAITERS",
    "Granted",
    "LockKey",
    "LockTable",
    "Outcome",
    "Refused",
    "Waiter",
]

LOCK_WAIT_S = 240.0
"""The longest a lock request waits at the NIC before it is refused (below the origin's own
300 s limit, so the origin hears why)."""
MAX_WAITERS = 4096
"""Waiting lock requests a NIC keeps at once over all its locks."""

LockKey = tuple[int, int]
"""(local port, virtual address of the lock word)."""


@dataclass(slots=True, frozen=True)
class Waiter:
    """Who asked for a lock, and the request to answer: origin node and port, its request id."""

    node: int
    port: int
    req: int


@dataclass(slots=True, frozen=True)
class Granted:
    """``who`` holds the lock now: complete its request."""

    who: Waiter


@dataclass(slots=True, frozen=True)
class Refused:
    """``who``'s request fails (``reason`` says why): complete it with an error."""

    who: Waiter
    reason: str


Outcome = Granted | Refused


@dataclass(slots=True)
class _Entry:
    who: Waiter
    exclusive: bool
    deadline: float
    seq: int


@dataclass(slots=True)
class _Lock:
    holders: dict[tuple[int, int], bool] = field(default_factory=dict)
    """(node, port) -> exclusive."""
    queue: deque[_Entry] = field(default_factory=deque)

    def compatible(self, exclusive: bool) -> bool:
        if exclusive:
            return not self.holders
        return not any(self.holders.values())


class LockTable:
    """Every lock of one NIC (see the module docstring)."""

    def __init__(self, *, wait_s: float = LOCK_WAIT_S, max_waiters: int = MAX_WAITERS) -> None:
        self.wait_s = wait_s
        self.max_waiters = max_waiters
        self._locks: dict[LockKey, _Lock] = {}
        self._waiting: dict[int, tuple[LockKey, _Entry]] = {}  # seq -> where it waits
        self._deadlines: list[tuple[float, int]] = []  # heap of (deadline, seq), lazily pruned
        self._seq = itertools.count()
        self.counts: Counter[str] = Counter()

    # -- requests ----------------------------------------------------------------------------

    def acquire(self, key: LockKey, who: Waiter, *, exclusive: bool, now: float) -> list[Outcome]:
        """``who`` asks for lock ``key``: granted now, or queued (nothing returned yet)."""
        lock = self._locks.setdefault(key, _Lock())
        if (who.node, who.port) in lock.holders or any(
            (e.who.node, e.who.port) == (who.node, who.port) for e in lock.queue
        ):
            self.counts["lock_twice"] += 1
            return [Refused(who, "this origin already holds or awaits the lock")]
        if not lock.queue and lock.compatible(exclusive):
            lock.holders[(who.node, who.port)] = exclusive
            self.counts["granted_at_once"] += 1
            return [Granted(who)]
        if len(self._waiting) >= self.max_waiters:
            self.counts["refused_queue_full"] += 1
            self._forget_if_idle(key, lock)
            return [Refused(who, "the NIC's lock queue is full")]
        entry = _Entry(who, exclusive, now + self.wait_s, next(self._seq))
        lock.queue.append(entry)
        self._waiting[entry.seq] = (key, entry)
        heapq.heappush(self._deadlines, (entry.deadline, entry.seq))
        self.counts["queued"] += 1
        return []

    def release(self, key: LockKey, node: int, port: int) -> tuple[bool, list[Outcome]]:
        """(node, port) releases lock ``key``: (whether it held it, the grants that follow)."""
        lock = self._locks.get(key)
        if lock is None or lock.holders.pop((node, port), None) is None:
            self.counts["release_not_held"] += 1
            return False, []
        self.counts["released"] += 1
        return True, self._grant(key, lock)

    # -- time and failures -------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When the oldest waiter must be refused (None: nobody waits)."""
        heap = self._deadlines
        while heap and self._stale(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def on_timer(self, *, now: float) -> list[Outcome]:
        """Refuse every waiter whose deadline passed; grant what that unblocks."""
        out: list[Outcome] = []
        touched: dict[LockKey, _Lock] = {}
        heap = self._deadlines
        while heap and (self._stale(heap[0]) or heap[0][0] <= now):
            _, seq = heapq.heappop(heap)
            found = self._waiting.pop(seq, None)
            if found is None:
                continue
            key, entry = found
            lock = self._locks[key]
            lock.queue.remove(entry)
            touched[key] = lock
            self.counts["refused_waited_too_long"] += 1
            out.append(Refused(entry.who, "the lock was not granted in time (a holder died?)"))
        for key, lock in touched.items():
            out += self._grant(key, lock)
        return out

    def peer_dead(self, node: int) -> list[Outcome]:
        """Node ``node`` died: its holdings are released, its waiting entries dropped (no
        answer can reach it); the grants that follow."""
        out: list[Outcome] = []
        for key, lock in list(self._locks.items()):
            dead = [h for h in lock.holders if h[0] == node]
            for holder in dead:
                del lock.holders[holder]
            self.counts["released_for_dead_peer"] += len(dead)
            for entry in [e for e in lock.queue if e.who.node == node]:
                lock.queue.remove(entry)
                del self._waiting[entry.seq]
                self.counts["dropped_dead_waiter"] += 1
            out += self._grant(key, lock)
        return out

    def port_closed(self, port: int) -> None:
        """Local port ``port`` closed: its locks' holders are forgotten and their waiters are
        refused at the next timer (this input has no ``now``; their deadline becomes 0)."""
        for key in [k for k in self._locks if k[0] == port]:
            lock = self._locks[key]
            lock.holders.clear()
            for entry in lock.queue:
                entry.deadline = 0.0
                heapq.heappush(self._deadlines, (0.0, entry.seq))
            self._forget_if_idle(key, lock)

    def stats(self) -> dict[str, int]:
        """Counters, locks held and requests waiting now."""
        held = sum(1 for lock in self._locks.values() if lock.holders)
        return {**self.counts, "locks_held": held, "waiting": len(self._waiting)}

    # -- internals ---------------------------------------------------------------------------

    def _grant(self, key: LockKey, lock: _Lock) -> list[Outcome]:
        """Grant from the head of ``lock``'s queue while the head is compatible."""
        out: list[Outcome] = []
        while lock.queue and lock.compatible(lock.queue[0].exclusive):
            entry = lock.queue.popleft()
            del self._waiting[entry.seq]
            lock.holders[(entry.who.node, entry.who.port)] = entry.exclusive
            self.counts["granted_after_wait"] += 1
            out.append(Granted(entry.who))
        self._forget_if_idle(key, lock)
        return out

    def _forget_if_idle(self, key: LockKey, lock: _Lock) -> None:
        if not lock.holders and not lock.queue:
            self._locks.pop(key, None)

    def _stale(self, item: tuple[float, int]) -> bool:
        found = self._waiting.get(item[1])
        return found is None or found[1].deadline != item[0]
