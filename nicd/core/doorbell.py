"""Doorbell coalescing: when the nicd shell pauses before it reads its hosts' records again.

A real host posts send descriptors into a ring in the NIC's memory and rings a doorbell that
costs it next to nothing; the NIC's processor picks up whatever has accumulated. Here each
host record is a socket write that wakes nicd, and nicd runs at real-time priority beside its
host, so without help it wakes, and preempts its host, once per record: a host streaming small
messages pays a context switch and a cold cache on both sides for every one (the 8-byte
message rate of issue 17 was bound by that, not by the protocol).

So the shell, after handling host records, asks this core how long to hold off. It says hold
only while the host is streaming: its next record came within ``gap_s`` of nicd going back to
wait, ``streak`` times running. A ping-pong (the host waits for an answer between records), a
blocking send loop (it waits for the SENT) and a collective's few sends in a row never hold,
so latency is untouched; a stream holds ``hold_s`` after each batch, its host fills the
socket meanwhile, and the next wake-up reads a batch (and the link carries it as one bundle:
:mod:`nicd.link.bundle`). The same trade NICs make with adaptive interrupt moderation.
Sans-IO: the shell passes ``now`` and does the sleeping.
"""

from __future__ import annotations

from nicd.config import CoalesceConfig

__all__ = ["DoorbellCoalescer"]


class DoorbellCoalescer:
    """Decides, after each batch of host records, whether the shell holds off before the next."""

    __slots__ = ("_idle_since", "_quick", "config", "held_s", "holds")

    def __init__(self, config: CoalesceConfig | None = None) -> None:
        self.config = config or CoalesceConfig()
        self._idle_since: float | None = None
        self._quick = 0
        self.holds = 0
        """Times the shell was told to hold off."""
        self.held_s = 0.0
        """Seconds of holding off told in all."""

    def on_batch(self, started: float, finished: float) -> float:
        """Host records were read at ``started`` (the wake-up) and handled by ``finished``:
        seconds to hold off before reading again (0.0: go back to waiting at once)."""
        config = self.config
        if config.hold_s <= 0.0:
            return 0.0
        idle_since = self._idle_since
        if idle_since is not None and started - idle_since < config.gap_s:
            self._quick += 1
        else:
            self._quick = 0
        if self._quick < config.streak:
            self._idle_since = finished
            return 0.0
        self._idle_since = finished + config.hold_s
        self.holds += 1
        self.held_s += config.hold_s
        return config.hold_s

    def stats(self) -> dict[str, float | int]:
        """JSON-able counters."""
        return {"holds": self.holds, "held_s": round(self.held_s, 6)}
