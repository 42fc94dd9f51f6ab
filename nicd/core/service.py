"""NicService: what a feature plugged into NicCore owns and answers (GRIM, multicast, NICVM).

:class:`~nicd.core.nic.NicCore` builds its dispatch dicts once from the services it composes:
``packet_types`` (link packets the service takes instead of the transport), ``msg_types``
(whole messages it executes on delivery) and ``record_types`` (host records it answers).
Every input takes ``now`` keyword-only and returns :data:`~nicd.core.actions.CoreAction` s, which
NicCore runs in one flat loop; a service never calls the transport, the port table's token
counters or another service (it returns ``ResumePort``, ``GiveBack``, ``AckNow``, ``NicSend``
or ``ToPort`` instead). A service subclasses this Protocol to inherit its do-nothing defaults.
"""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from nicd import hostlink as hl
    from nicd.core.actions import CoreAction, Deliver, SendComplete, SendFailed
    from nicd.gm.ports import PortState
    from nicd.link.wire import ControlPacket, DataPacket, MsgType

__all__ = ["NicService"]


class NicService(Protocol):
    """One feature of the NIC, sans-IO."""

    packet_types: ClassVar[frozenset[MsgType]] = frozenset()
    """Link packet types this service takes whole from the link (multicast data and ACKs)."""
    msg_types: ClassVar[frozenset[MsgType]] = frozenset()
    """Delivered message types this service executes before (or instead of) host delivery."""
    record_types: ClassVar[tuple[type, ...]] = ()
    """Host record types this service answers (only on an open port)."""
    family: ClassVar[str] = ""
    """How a refusal before OPEN names these records ("": by the record's type)."""
    owned_sends: Container[tuple[int, int]] = frozenset()
    """The (port, handle) of the sends in flight whose completion is this service's: NicCore
    calls :meth:`on_done` only for those (a service that overrides ``on_done`` keeps this
    up to date, e.g. as the dict it tracks them in), so a plain send's completion makes no
    call into a service at all."""

    def on_packet(self, packet: DataPacket | ControlPacket, *, now: float) -> list[CoreAction]:
        """A link packet of one of ``packet_types``, decoded and checked for misrouting."""
        return []

    def on_deliver(
        self, d: Deliver, state: PortState | None, *, now: float
    ) -> list[CoreAction] | None:
        """A whole message of one of ``msg_types`` for local port ``d.port`` (``state`` None:
        closed). None leaves it to plain host delivery."""
        return None

    def on_host(
        self, state: PortState, record: hl.HostRecord, *, now: float
    ) -> list[CoreAction] | str:
        """A record of one of ``record_types`` from the host owning ``state``; a string is the
        reason for refusing it."""
        return []

    def on_done(self, done: SendComplete | SendFailed, *, now: float) -> list[CoreAction] | None:
        """A send of ``owned_sends`` ended; None leaves it to the host's send path."""
        return None

    def on_peer_dead(self, node: int, *, now: float) -> list[CoreAction]:
        """The transport declared ``node`` dead."""
        return []

    def on_timer(self, *, now: float) -> list[CoreAction]:
        """Fire the timers due by ``now``."""
        return []

    def next_deadline(self) -> float | None:
        """The earliest moment ``on_timer`` wants to run."""
        return None

    def deadline_query(self) -> Callable[[], float | None]:
        """What NicCore calls for :meth:`next_deadline` after every input, asked once: the
        method itself, or the one it only forwards to (an object the service keeps for its
        lifetime), which saves a call per input."""
        return self.next_deadline

    def on_port_closed(self, port: int) -> None:
        """Forget what belongs to local port ``port``."""
        return None

    def stats(self) -> dict[str, object] | None:
        """Counters, JSON-able."""
        return None
