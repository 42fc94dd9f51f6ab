"""Seeded fault injection on outgoing datagrams: drop, duplicate, corrupt, reorder, delay.

The kernel under the emulator has no netem, so nicd plays the bad network itself: every
datagram it puts on the link passes through :meth:`FaultPlan.on_send`, which decides its fate
with the plan's own ``random.Random(config.seed)``. Held datagrams (delayed or reordered) wait
in a heap of deadlines and come out of :meth:`FaultPlan.on_timer`.

Invariants: the plan never looks inside a datagram or an address; the only randomness is the
plan's own generator, drawn in a fixed order per datagram (loss, duplication, then per copy
corruption and reordering), so the same seed and the same inputs give the same outputs; a
held datagram leaves exactly once, in deadline order, ties in the order it was sent; with
delay alone nothing overtakes anything.
"""

from __future__ import annotations

import heapq
import random
from typing import Final, Generic, TypeVar

from emutrace.kinds import F_CORRUPT, F_DELAY, F_DROP, F_DUP, F_REORDER, K_FAULT
from emutrace.recorder import Facts
from nicd.config import FaultConfig

__all__ = ["REORDER_MAX_HOLD_S", "FaultPlan"]

REORDER_MAX_HOLD_S: Final = 0.002  # longest a reordered datagram is held back, beyond delay_ms

A = TypeVar("A")


class FaultPlan(Generic[A]):
    """The fate of every outgoing datagram of one NIC, decided by a seeded generator.

    ``A`` is the address type; the plan only hands addresses back.
    """

    def __init__(self, config: FaultConfig) -> None:
        self.config = config  # its ranges were checked when it was built (FaultConfig)
        self.active = config.active
        """False when no fault is configured: :meth:`on_send` passes datagrams through."""
        self._rng = random.Random(config.seed)
        self._loss = config.loss
        self._dup = config.dup
        self._reorder = config.reorder
        self._corrupt = config.corrupt
        self._delay_s = config.delay_ms / 1000.0
        # (deadline, order sent, addr, datagram); the order breaks ties, so addr and datagram
        # are never compared.
        self._held: list[tuple[float, int, A, bytes]] = []
        self._pushed = 0
        self._dropped = 0
        self._duplicated = 0
        self._reordered = 0
        self._corrupted = 0
        self._delayed = 0
        self.trace: Facts | None = None
        """Set while tracing: each fault applied is noted there (kind, fault, datagram)."""

    # -- inputs -----------------------------------------------------------------------------

    def on_send(self, addr: A, datagram: bytes, *, now: float) -> list[tuple[A, bytes]]:
        """Apply the faults to one datagram bound for ``addr``; return what to send now.

        That is nothing (lost or held back), one datagram, or two (duplicated); each copy is
        corrupted and reordered independently. Held copies come out of :meth:`on_timer`.
        """
        if not self.active:
            return [(addr, datagram)]
        rng = self._rng
        trace = self.trace
        if self._loss and rng.random() < self._loss:
            self._dropped += 1
            if trace is not None:
                trace.append((K_FAULT, F_DROP, datagram))
            return []
        copies = 1
        if self._dup and rng.random() < self._dup:
            self._duplicated += 1
            copies = 2
            if trace is not None:
                trace.append((K_FAULT, F_DUP, datagram))
        out: list[tuple[A, bytes]] = []
        for _ in range(copies):
            data = datagram
            if self._corrupt and datagram and rng.random() < self._corrupt:
                self._corrupted += 1
                data = _flip_bit(datagram, rng.randrange(len(datagram) * 8))
                if trace is not None:
                    trace.append((K_FAULT, F_CORRUPT, datagram))
            deadline = now + self._delay_s
            held = False
            if self._delay_s:
                self._delayed += 1
                held = True
                if trace is not None:
                    trace.append((K_FAULT, F_DELAY, datagram))
            if self._reorder and rng.random() < self._reorder:
                self._reordered += 1
                deadline += rng.uniform(0.0, REORDER_MAX_HOLD_S)
                held = True
                if trace is not None:
                    trace.append((K_FAULT, F_REORDER, datagram))
            if held:
                heapq.heappush(self._held, (deadline, self._pushed, addr, data))
                self._pushed += 1
            else:
                out.append((addr, data))
        return out

    def on_timer(self, *, now: float) -> list[tuple[A, bytes]]:
        """Release the held datagrams whose deadline is at or before ``now``, earliest first."""
        held = self._held
        out: list[tuple[A, bytes]] = []
        while held and held[0][0] <= now:
            _, _, addr, data = heapq.heappop(held)
            out.append((addr, data))
        return out

    # -- queries ----------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When the earliest held datagram is due, or None if none is held."""
        return self._held[0][0] if self._held else None

    def stats(self) -> dict[str, int]:
        """Counters of injected faults (``delayed``/``reordered`` count held copies)."""
        return {
            "dropped": self._dropped,
            "duplicated": self._duplicated,
            "reordered": self._reordered,
            "corrupted": self._corrupted,
            "delayed": self._delayed,
        }


def _flip_bit(datagram: bytes, bit: int) -> bytes:
    flipped = bytearray(datagram)
    flipped[bit >> 3] ^= 0x80 >> (bit & 7)
    return bytes(flipped)
