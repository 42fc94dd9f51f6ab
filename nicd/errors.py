"""The nicd exception tree: one base, peer misbehaviour apart from local misuse."""

from __future__ import annotations

__all__ = ["BadPacket", "NicdError", "ProtocolViolation", "UsageError"]


class NicdError(Exception):
    """Base of every error nicd raises on purpose."""


class BadPacket(NicdError):
    """Raised by ``decode_*_untrusted`` for bytes that are not a valid packet.

    Callers count the drop under ``reason`` and carry on; it never escapes a core.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        """Short stable key for the drop counters (``truncated``, ``crc``, ``type``, ...)."""


class ProtocolViolation(NicdError):
    """A well-formed packet or host record that breaks the protocol (a remote's fault).

    Cores turn it into a counted drop or an error event; it never crashes nicd.
    """


class UsageError(NicdError):
    """Local misuse: a bad flag, a bad routing table, a host API call out of order.

    Raised to the caller, who should fix the call.
    """
