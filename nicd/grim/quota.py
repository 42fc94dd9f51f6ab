"""The quota on messages a NIC sends on its own behalf (GRIM read replies, status replies,
AM-registry replies): they take no host send token, so without a bound a requester that
reads a lot and refuses to receive would make the target NIC queue without limit.

Pure bookkeeping: NicCore asks :meth:`NicSendQuota.admit` before it queues a NIC send and
calls :meth:`NicSendQuota.release` when the transport reports that send done or failed.
"""

from __future__ import annotations

from collections import Counter

from nicd.core.actions import NicSend
from nicd.hostlink.grim import ReplyKind, RmStatus

__all__ = ["NicSendQuota", "busy_reply"]


def busy_reply(reply: NicSend) -> NicSend:
    """The status reply that replaces a read reply ``reply`` the quota refused: the reader's
    request completes with BUSY instead of waiting for data that will not come."""
    req = reply.args[2]
    handler = int(ReplyKind.READ) << 8 | int(RmStatus.BUSY)
    return NicSend(reply.dst_node, reply.dst_port, reply.msg_type, b"", handler, (0, 0, req, 0))


class NicSendQuota:
    """At most ``max_sends`` NIC-generated messages and ``max_bytes`` of their payload in
    flight; each refusal counted. Empty messages (status replies) need only a slot."""

    def __init__(self, max_sends: int, max_bytes: int) -> None:
        self.max_sends = max_sends
        self.max_bytes = max_bytes
        self._next_handle = 1
        self._in_flight: dict[int, int] = {}  # handle -> payload bytes
        self.bytes_in_flight = 0
        self.counts: Counter[str] = Counter()

    def admit(self, size: int) -> int | None:
        """A handle for a NIC send of ``size`` bytes, or None when it does not fit."""
        if len(self._in_flight) >= self.max_sends:
            self.counts["refused_sends"] += 1
            return None
        if size and self.bytes_in_flight + size > self.max_bytes:
            self.counts["refused_bytes"] += 1
            return None
        handle = self._next_handle
        self._next_handle = handle % 0x7FFF_FFFF + 1
        self._in_flight[handle] = size
        self.bytes_in_flight += size
        self.counts["admitted"] += 1
        return handle

    def release(self, handle: int) -> bool:
        """The send ``handle`` ended; False if it was not one of ours."""
        size = self._in_flight.pop(handle, None)
        if size is None:
            return False
        self.bytes_in_flight -= size
        return True

    def stats(self) -> dict[str, int]:
        """Counters and what is in flight now."""
        return {**self.counts, "in_flight": len(self._in_flight),
                "bytes_in_flight": self.bytes_in_flight}  # fmt: skip
