"""Watch over the messages this NIC is reassembling, so none holds a receive token forever.

A multi-fragment message takes its port's receive token when its FIRST fragment is admitted
(:meth:`Partials.admit`, the transport's admission question) and gives it up as a delivery
when its LAST arrives. If its sender dies or goes silent in between, nothing else would ever
end it (GRIM 4.3.3 buffers only at the sender; the receiver just waits). This table remembers,
per incoming stream, when the partial message last heard a packet and whether it took a token;
NicCore aborts the ones silent for ``reassembly_timeout_s`` (their senders are told, NACK
ABORTED, so they report an error and never SENT) and returns their tokens. A
stream holds at most one partial at a time, so the table never holds more entries than there
are incoming streams. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from nicd.core.stats import LinkStats
from nicd.gm.ports import PortTable
from nicd.link.reliable import Admission, Verdict
from nicd.link.wire import HAS_LAST, DataPacket

__all__ = ["PartialKey", "Partials"]


PartialKey: TypeAlias = tuple[int, int, int]
"""An incoming stream ``(src_node, src_port, dst_port)``: from LC ``src_port`` of ``src_node``
to local LC ``dst_port``. A plain tuple: a NamedTuple's ``__new__`` stays interpreted code in
the compiled build (docs/dev/build.md)."""


class _Partial:
    __slots__ = ("heard", "token")

    def __init__(self, heard: float, token: bool) -> None:
        self.heard = heard
        """When a packet of its stream last arrived."""
        self.token = token
        """It took a receive token at admission (remote-memory writes take none)."""


class Partials:
    """The partial messages of one NIC, by stream; ``ports`` holds their receive tokens and
    ``link`` counts the drops."""

    def __init__(self, timeout_s: float, ports: PortTable, link: LinkStats) -> None:
        self.timeout_s = timeout_s
        self.ports = ports
        self.link = link
        self._by_key: dict[PartialKey, _Partial] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def __bool__(self) -> bool:  # compiled (mypyc), truth ignores __len__: empty is false here
        return bool(self._by_key)

    def admit(
        self, first: DataPacket, claim: Callable[[DataPacket], Verdict | None], *, now: float
    ) -> Verdict:
        """The transport's admission of a message's FIRST fragment: ``claim``'s verdict (a
        feature's, GRIM's), else the port table's (a receive token). A message of several
        fragments is watched until its delivery; a partial its sender abandoned on the same
        stream gives its token back."""
        key = (first.src_node, first.src_port, first.dst_port)
        state = self.ports.get(first.dst_port)
        if self.forget(key) and state is not None:
            self.ports.provide(state, 1)
            self.link.drop("abandoned_partial")
        tokens = 0 if state is None else state.receive_tokens
        verdict = claim(first)
        if verdict is None:
            verdict = (self.ports.admit(first), [])
        if verdict[0] is Admission.OK and first.flags not in HAS_LAST:
            took = state is not None and state.receive_tokens < tokens
            self.started(key, now=now, token=took)
        return verdict

    def started(self, key: PartialKey, *, now: float, token: bool) -> None:
        """A message of several fragments was admitted on ``key``."""
        self._by_key[key] = _Partial(now, token)

    def forget(self, key: PartialKey) -> bool:
        """A new message starts on ``key``, so its old partial (if any: the sender gave up
        on it) is gone. True if that one held a token (the caller gives it back)."""
        old = self._by_key.pop(key, None)
        return old is not None and old.token

    def heard(self, key: PartialKey, now: float) -> None:
        """A packet of stream ``key`` arrived (cheap when it has no partial)."""
        partial = self._by_key.get(key)
        if partial is not None:
            partial.heard = now

    def done(self, key: PartialKey) -> None:
        """The message on ``key`` was delivered (its token went with it)."""
        self._by_key.pop(key, None)

    def port_closed(self, port: int) -> None:
        """Local ``port`` closed: its partials are dropped with it, tokens and all."""
        for key in [k for k in self._by_key if k[2] == port]:  # (src_node, src_port, dst_port)
            del self._by_key[key]

    def expired(self, now: float) -> list[tuple[PartialKey, bool]]:
        """Forget and return the partials silent for the timeout (each a counted drop), with
        whether each held a token."""
        timeout = self.timeout_s  # ``heard + timeout`` as next_deadline computes it: a timer
        # at that deadline always finds it passed (``heard <= now - timeout`` may not, by a
        # rounding, and the caller would spin)
        gone = [(k, p.token) for k, p in self._by_key.items() if p.heard + timeout <= now]
        for key, _ in gone:
            del self._by_key[key]
            self.link.drop("reassembly_timeout")
        return gone

    def next_deadline(self) -> float | None:
        """When the oldest partial times out, or None."""
        if not self._by_key:
            return None
        return min(p.heard for p in self._by_key.values()) + self.timeout_s
