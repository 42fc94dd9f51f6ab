"""Selective recovery's receiver buffer and SACK bitmap arithmetic (``--recovery selective``).

A receiver in selective mode keeps the packets that arrive beyond its expected sequence number
(at most ``limit`` ahead, so the buffer is bounded by the window), hands them back in order once
the hole before them is filled, and describes what it holds in the SACK bitmap: bit ``i`` set =
it holds ``expected + 1 + i``. The sender turns a bitmap back into sequence numbers. Pure
functions and one small class; no protocol decisions.
"""

from __future__ import annotations

from nicd.link.wire import SACK_BITS, DataPacket

__all__ = ["HoldBuffer", "sacked"]


class HoldBuffer:
    """Out-of-order packets of one stream, keyed by unbounded sequence number."""

    __slots__ = ("_held", "limit")

    def __init__(self, window: int) -> None:
        self.limit = max(1, min(window, SACK_BITS))
        """How far beyond ``expected`` a packet may be held (the bitmap's reach at most)."""
        self._held: dict[int, DataPacket] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __bool__(self) -> bool:  # compiled (mypyc), truth ignores __len__: empty is false here
        return bool(self._held)

    def __contains__(self, seq: int) -> bool:
        return seq in self._held

    def fits(self, seq: int, expected: int) -> bool:
        """``seq`` (beyond ``expected``) is within reach of the buffer."""
        return expected < seq <= expected + self.limit

    def hold(self, seq: int, packet: DataPacket) -> None:
        """Keep ``packet`` (the caller checked :meth:`fits` and that it is not held yet)."""
        self._held[seq] = packet

    def pop(self, seq: int) -> DataPacket | None:
        """Take the packet held at ``seq``, if any."""
        return self._held.pop(seq, None)

    def clear(self) -> int:
        """Forget everything held (a refusal: the sender goes back); return how many."""
        count = len(self._held)
        self._held.clear()
        return count

    def bitmap(self, expected: int) -> int:
        """The SACK bitmap relative to ``expected``."""
        bits = 0
        for seq in self._held:
            offset = seq - expected - 1
            if 0 <= offset < SACK_BITS:
                bits |= 1 << offset
        return bits


def sacked(cumulative: int, bitmap: int) -> list[int]:
    """The sequence numbers a SACK with cumulative ``cumulative`` says are held, ascending."""
    out: list[int] = []
    offset = 0
    while bitmap:
        if bitmap & 1:
            out.append(cumulative + 1 + offset)
        bitmap >>= 1
        offset += 1
    return out
