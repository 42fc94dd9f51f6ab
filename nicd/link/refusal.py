"""Whether the receiver lets one stream send: OPEN, PAUSED by a refusal, or PROBING after one
(GRIM 4.2.1 and 4.3.3), as a state table.

A receiver refuses a stream with a NACK NO_BUFFER (its port has no receive token) or NO_PORT
(no endpoint is open there). The sender then stops (PAUSED) and waits for a NACK RESUME or for
the retry delay, which doubles with each retry in a row (``no_buffer_retry_s`` up to
``2**RETRY_BACKOFF_CAP`` times, at most ``max(no_buffer_retry_s, rto_max_s)``); when the delay
passes it sends one packet (PROBING) to ask again. Progress (new data acknowledged), a RESUME,
the peer's revival or the stream's failure make it OPEN. A refusal that lasts
``no_port_timeout_s`` (NO_PORT) or ``no_buffer_timeout_s`` (NO_BUFFER) fails the stream with
that reason: the peer answered, so never ``peer_dead``.

The legal moves are :data:`SEND_TRANSITIONS`; a move it lacks raises UsageError (only the
sender's own timer makes RETRY, so a peer cannot cause one).

Invariants: OPEN has no reason, no start and no retry counted; PAUSED and PROBING have a
reason and the time this refusal started (a new reason restarts it); a retry happens only from
PAUSED. Pure: callers pass ``now``.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

from nicd.config import TransportConfig
from nicd.errors import UsageError
from nicd.link.wire import NackReason

__all__ = ["RETRY_BACKOFF_CAP", "SEND_TRANSITIONS", "Refusal", "SendEvent", "SendState"]

RETRY_BACKOFF_CAP: Final = 16  # doublings of the refusal retry delay, at most


class SendState(Enum):
    """What the receiver lets one stream do."""

    OPEN = "open"
    """Send what the window allows."""
    PAUSED = "paused"
    """Refused: send nothing until a RESUME or the retry delay."""
    PROBING = "probing"
    """The retry delay passed: one packet at a time until progress or a RESUME."""


class SendEvent(Enum):
    """Inputs of the refusal machine."""

    REFUSED = "refused"
    """A NACK NO_BUFFER or NO_PORT arrived."""
    RETRY = "retry"
    """The retry delay passed (the sender's timer)."""
    CLEARED = "cleared"
    """New data was acknowledged, a RESUME came, the peer revived, or the stream failed."""


SEND_TRANSITIONS: dict[tuple[SendState, SendEvent], SendState] = {
    (SendState.OPEN, SendEvent.REFUSED): SendState.PAUSED,
    (SendState.OPEN, SendEvent.CLEARED): SendState.OPEN,
    (SendState.PAUSED, SendEvent.REFUSED): SendState.PAUSED,  # a repeat keeps the retry time
    (SendState.PAUSED, SendEvent.RETRY): SendState.PROBING,
    (SendState.PAUSED, SendEvent.CLEARED): SendState.OPEN,
    (SendState.PROBING, SendEvent.REFUSED): SendState.PAUSED,  # the probe was refused too
    (SendState.PROBING, SendEvent.CLEARED): SendState.OPEN,
}
"""Legal moves; (OPEN, RETRY) and (PROBING, RETRY) are not: no retry is armed there."""


class Refusal:
    """One stream's refusal state, its reason, and when it retries or gives up."""

    __slots__ = ("config", "reason", "retries", "retry_at", "since", "state")

    def __init__(self, config: TransportConfig) -> None:
        self.config = config
        self.state = SendState.OPEN
        self.reason: NackReason | None = None
        """Why the receiver refused us last (NO_BUFFER / NO_PORT), until it is cleared."""
        self.since: float | None = None
        """When this refusal (this reason) started."""
        self.retry_at = 0.0
        """When a PAUSED stream probes again."""
        self.retries = 0
        """Retries in a row (each doubles the next delay)."""

    def move(self, event: SendEvent) -> SendState:
        """Take the move ``event`` makes from the current state; UsageError if it has none."""
        state = SEND_TRANSITIONS.get((self.state, event))
        if state is None:
            raise UsageError(f"a stream in state {self.state.name} cannot take {event.name}")
        self.state = state
        return state

    def on_refused(self, reason: NackReason, *, now: float) -> None:
        """The receiver refused the stream for ``reason``: pause (a new pause arms the retry,
        a repeated refusal keeps it)."""
        if self.reason is not reason or self.since is None:
            self.since = now  # how long *this* refusal lasts
        self.reason = reason
        if self.state is not SendState.PAUSED:
            c = self.config
            delay = c.no_buffer_retry_s * (1 << min(self.retries, RETRY_BACKOFF_CAP))
            self.retry_at = now + min(delay, max(c.no_buffer_retry_s, c.rto_max_s))
        self.move(SendEvent.REFUSED)

    def on_retry(self) -> None:
        """The retry delay passed: probe with one packet."""
        self.move(SendEvent.RETRY)
        self.retries += 1

    def clear(self) -> None:
        """The receiver takes the stream again (or the stream failed): OPEN."""
        self.move(SendEvent.CLEARED)
        self.reason = None
        self.since = None
        self.retries = 0

    def limit(self) -> float | None:
        """When the current refusal has lasted too long, if it is one that can."""
        since = self.since
        if since is None:
            return None
        if self.reason is NackReason.NO_PORT:
            return since + self.config.no_port_timeout_s
        if self.reason is NackReason.NO_BUFFER:
            return since + self.config.no_buffer_timeout_s
        return None

    def deadline(self) -> float:
        """A PAUSED stream's timer: the retry, or the give-up if that comes first."""
        limit = self.limit()
        if limit is not None:
            return min(self.retry_at, limit)
        return self.retry_at
