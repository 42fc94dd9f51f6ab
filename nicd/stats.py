"""Counters of one nicd: traffic on the link and the host bus, drops by reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["LinkStats"]


@dataclass(slots=True)
class LinkStats:
    """What crossed the link and the PCI bus, and what was dropped and why."""

    datagrams_in: int = 0
    datagrams_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    host_records_in: int = 0
    host_records_out: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    """Dropped incoming datagrams and host records by reason (``crc``, ``unknown_source``...)."""
    peers_dead: list[int] = field(default_factory=list)

    def drop(self, reason: str) -> None:
        """Count one dropped datagram or record."""
        self.drops[reason] += 1

    def as_dict(self) -> dict[str, object]:
        """JSON-able snapshot."""
        return {
            "datagrams_in": self.datagrams_in,
            "datagrams_out": self.datagrams_out,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "host_records_in": self.host_records_in,
            "host_records_out": self.host_records_out,
            "drops": dict(self.drops),
            "drops_total": sum(self.drops.values()),
            "peers_dead": list(self.peers_dead),
        }
