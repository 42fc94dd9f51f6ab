"""Active-message bookkeeping of one endpoint (GRIM 4.4): local handlers, the global
name <-> id table learned from the registry, dispatch decisions, the host overflow queue of
outgoing messages and credit-based injection policing. Pure: no I/O.

Invariants: a name maps to at most one id and an id to at most one name (the registry's
table only grows); a message leaves the overflow queue only in the order it entered, and
nothing is sent past a non-empty overflow queue (so replies keep their order); with a credit
limit ``c`` at most ``c`` messages are outstanding.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Args", "Dispatch", "Handler", "HandlerTable", "OutMsg", "Outbox"]

Args = tuple[int, int, int, int]
Handler = "Callable[[int, Args, bytes], object]"


@dataclass(slots=True)
class OutMsg:
    """A message waiting to be handed to the NIC."""

    dest: int
    dst_port: int
    msg_type: int
    payload: bytes
    am_handler: int = 0
    args: Args = (0, 0, 0, 0)
    tag: object = None
    """The shell's bookkeeping (e.g. the remote-memory request it belongs to)."""


@dataclass(slots=True)
class Dispatch:
    """What to do with an arriving active message."""

    name: str | None
    """The handler's name (None: the id is unknown here)."""
    handler: Callable[[int, Args, bytes], object] | None
    """The local handler (None: not registered on this endpoint)."""


class HandlerTable:
    """Local handlers and the cluster-wide table."""

    def __init__(self) -> None:
        self._local: dict[str, Callable[[int, Args, bytes], object]] = {}
        self._ids: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._unsynced: list[str] = []
        self.counts: Counter[str] = Counter()

    def register(self, name: str, handler: Callable[[int, Args, bytes], object]) -> None:
        """Register ``handler`` locally under ``name`` (published at the next sync)."""
        if not isinstance(name, str) or not name:
            raise ValueError("a handler name must be a non-empty string")
        if not callable(handler):
            raise TypeError(f"handler for {name!r} is not callable")
        if name not in self._local and name not in self._unsynced:
            self._unsynced.append(name)
        self._local[name] = handler

    def unsynced(self) -> list[str]:
        """Names registered locally since the last sync."""
        return list(self._unsynced)

    def merge(self, table: dict[str, int], published: list[str] | None = None) -> None:
        """Take the registry's table (after a sync of ``published`` or a lookup)."""
        for name, hid in table.items():
            old = self._ids.get(name)
            if old is not None and old != hid:
                raise RuntimeError(f"registry changed the id of {name!r}: {old} -> {hid}")
            self._ids[name] = hid
            self._names[hid] = name
        if published:
            self._unsynced = [n for n in self._unsynced if n not in table]

    def id_of(self, name: str) -> int | None:
        """The cluster-wide id of ``name`` if known here."""
        return self._ids.get(name)

    def name_of(self, hid: int) -> str | None:
        """The name of id ``hid`` if known here."""
        return self._names.get(hid)

    def dispatch(self, hid: int) -> Dispatch:
        """How to run a message for handler id ``hid``."""
        name = self._names.get(hid)
        handler = None if name is None else self._local.get(name)
        return Dispatch(name, handler)

    def table(self) -> dict[str, int]:
        """The cluster-wide table as known here."""
        return dict(self._ids)


class Outbox:
    """Outgoing messages: handed to the NIC while it has room (send tokens, credits), else
    kept in the host overflow queue (GRIM 4.4.3) until it does."""

    def __init__(self, credits: int | None = None) -> None:
        self.credits = credits
        """Credit-based injection policing: at most this many outstanding (None: only the
        NIC's send tokens limit)."""
        self.overflow: deque[OutMsg] = deque()
        self.counts: Counter[str] = Counter()
        self.overflow_peak = 0

    def may_send(self, free_tokens: int, outstanding: int) -> bool:
        """Can one more message go to the NIC now (ignoring the overflow queue)?"""
        if free_tokens <= 0:
            return False
        return self.credits is None or outstanding < self.credits

    def admit(self, msg: OutMsg, free_tokens: int, outstanding: int) -> bool:
        """A handler (which must not block) sends ``msg``: True to send it now, False if
        it was queued in the overflow queue."""
        if not self.overflow and self.may_send(free_tokens, outstanding):
            return True
        self.overflow.append(msg)
        self.counts["overflowed"] += 1
        self.overflow_peak = max(self.overflow_peak, len(self.overflow))
        return False

    def drainable(self, free_tokens: int, outstanding: int) -> int:
        """How many queued messages may go to the NIC now."""
        n = 0
        while n < len(self.overflow) and self.may_send(free_tokens - n, outstanding + n):
            n += 1
        return n

    def take(self, n: int) -> list[OutMsg]:
        """Remove the first ``n`` queued messages (to send them)."""
        out = [self.overflow.popleft() for _ in range(min(n, len(self.overflow)))]
        self.counts["drained"] += len(out)
        return out
