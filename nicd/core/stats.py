"""Counters of one nicd: traffic on the link and the host bus, drops by reason, and the
reliable transport's counters (:class:`TransportStats`, shared by every stream)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["LinkStats", "TransportStats"]


@dataclass(slots=True)
class LinkStats:
    """What crossed the link and the PCI bus, and what was dropped and why."""

    datagrams_in: int = 0
    datagrams_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    host_records_in: int = 0
    host_records_out: int = 0
    host_read_yields: int = 0
    """Times the shell stopped reading a host connection at its per-wake budget."""
    bundles_out: int = 0
    """Datagrams that carried several frames to one peer (:mod:`nicd.link.bundle`)."""
    bundled_frames_out: int = 0
    """Frames those carried (each also counted in ``datagrams_out``)."""
    bundles_in: int = 0
    bundled_frames_in: int = 0
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
            "host_read_yields": self.host_read_yields,
            "bundles_out": self.bundles_out,
            "bundled_frames_out": self.bundled_frames_out,
            "bundles_in": self.bundles_in,
            "bundled_frames_in": self.bundled_frames_in,
            "drops": dict(self.drops),
            "drops_total": sum(self.drops.values()),
            "peers_dead": list(self.peers_dead),
        }


@dataclass(slots=True)
class TransportStats:
    """Counters shared by every stream of one transport."""

    data_sent: int = 0
    """Data packets put on the link for the first time."""
    retransmissions: int = 0
    """Data packets put on the link again (go-back-N, retries, timeouts)."""
    acks_sent: int = 0
    acks_received: int = 0
    acks_piggybacked: int = 0
    """ACKs that rode on a data packet of the reverse stream (counted in ``acks_sent`` and,
    at the other end, ``acks_received`` too)."""
    nacks_sent: Counter[str] = field(default_factory=Counter)
    nacks_received: Counter[str] = field(default_factory=Counter)
    drops: Counter[str] = field(default_factory=Counter)
    """Data and control packets dropped, by reason."""
    delivered: int = 0
    completed: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    timeouts: int = 0
    loss_events: int = 0
    """Window cuts (GAP NACKs and timeouts, at most one per RTT per stream)."""
    refusal_retries: int = 0
    probes_sent: int = 0
    """Liveness PINGs sent to silent peers with data outstanding."""
    probes_answered: int = 0
    """PONGs sent in answer to a peer's PING."""
    stalls: int = 0
    """Gaps between our own inputs long enough to be discounted from a peer's silence."""
    streams_evicted: int = 0
    """Idle incoming streams forgotten (see ``idle_stream_s``)."""
    streams_retired: int = 0
    """Idle outgoing streams forgotten; the next message to that stream starts a new epoch."""
    streams_restarted: int = 0
    """Incoming streams whose sender started a new epoch (it retired the old one, or its nicd
    restarted): the old state was replaced."""
    peers_revived: int = 0
    """DEAD peers heard from again (usable again for new sends)."""
    recovery: Counter[str] = field(default_factory=Counter)
    """Selective recovery (``--recovery selective``): ``held`` (packets held out of order),
    ``held_taken`` / ``held_discarded``, ``sacks_sent`` / ``sacks_received``, ``sacked``
    (packets a SACK covered), ``holes_resent``, ``resends_lost`` (a resent hole found lost
    again by RACK's time rule), ``tail_probes``."""
