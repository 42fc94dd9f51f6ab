"""The GM port path: what a host's port does on the NIC when no feature claims the traffic.

Opening a port, receive tokens, signals, the checks every host send passes (:meth:`start_send`),
plain delivery to the host (and RM-P placement, GRIM 4.5), and completions: a send's token
comes back at once and its SENT event goes lazily, batched with others or riding along with
a delivery. NicCore composes it with the other services; like them it returns
:data:`~nicd.core.actions.CoreAction` s and never calls the transport (a host send is a
:class:`~nicd.core.actions.PortSend`, a port ready for more is a
:class:`~nicd.core.actions.ResumePort`).

Invariants: every send a host starts ends in exactly one SENT or ERROR event to it while its
port is open; host misuse is a ``Refused`` record and a counted drop; a ``RaiseSignal``
follows only the RECV record of an application-bypass message (or a host's re-enabling while
such messages are unseen), on a port with signals enabled and none pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from nicd import hostlink as hl
from nicd.config import NicConfig
from nicd.core.actions import (
    CoreAction,
    Deliver,
    PortSend,
    RaiseSignal,
    ResumePort,
    SendComplete,
    SendFailed,
    ToHost,
)
from nicd.core.service import NicService
from nicd.core.stats import LinkStats
from nicd.errors import UsageError
from nicd.gm.ports import PortState, PortTable
from nicd.link.wire import SIGNAL_TYPES, MsgType

__all__ = ["HOST_MSG_TYPES", "NIC_MSG_TYPES", "GmService"]

NIC_MSG_TYPES: Final = frozenset(
    {MsgType.MCAST_DATA, MsgType.RM_READ_REPLY, MsgType.MGMT_HELLO, MsgType.MGMT_ROUTING,
     MsgType.MGMT_STATS}
)  # fmt: skip
"""Data types only a NIC sends: a host's MCAST_DATA would reach the multicast engine and
never be ACKed on its unicast stream (audit finding 2), an RM_READ_REPLY would answer a read
nobody made."""
HOST_MSG_TYPES: Final = {
    int(t): t for t in MsgType if not t.is_control() and t not in NIC_MSG_TYPES
}
"""Message types a host may put on the wire; controls and :data:`NIC_MSG_TYPES` are the NIC's
own, and a SEND or multisend of one is refused."""
_U16: Final = 0xFFFF  # the OPENED record's 16-bit fields


class GmService(NicService):
    """The port path of one NIC; ``link`` is where its drops are counted."""

    def __init__(self, config: NicConfig, ports: PortTable, link: LinkStats) -> None:
        self.config = config
        self.node_id = config.node_id
        self.ports = ports
        self.link = link
        self.nodes: frozenset[int] = frozenset()
        """Nodes with a route (NicCore's routing table)."""
        self._sent: dict[int, list[int]] = {}  # port -> completed handles not yet told
        self._sent_due: dict[int, float] = {}  # port -> when they must be told
        self._sent_flush_at = max(1, config.send_tokens // 2)

    # -- host records -----------------------------------------------------------------------

    def refuse(self, conn: int, reason: str) -> list[CoreAction]:
        """Host misuse: a counted drop and a ``Refused`` record."""
        self.link.drop("host_misuse")
        return [ToHost(conn, hl.Refused(reason))]

    def open(self, conn: int, record: hl.OpenReq) -> list[CoreAction]:
        """OPEN: a port for ``conn``; streams refused while it was not open resume."""
        requested = None if record.port == hl.ANY_PORT else record.port
        try:
            state = self.ports.open(conn, requested)
        except UsageError as exc:
            return self.refuse(conn, str(exc))
        opened = hl.Opened(state.port, self.node_id, min(len(self.nodes), _U16),
                           min(state.send_tokens, _U16))  # fmt: skip
        return [ToHost(conn, opened), ResumePort(state.port)]

    def provide(self, conn: int, record: hl.ProvideReq) -> list[CoreAction]:
        """PROVIDE: receive tokens for the port; refused streams resume."""
        state = self.ports.port_of(conn)
        if state is None:
            return self.refuse(conn, "PROVIDE before OPEN")
        self.ports.provide(state, record.count)
        return [ResumePort(state.port)]

    def signal_ctl(self, conn: int, record: hl.SignalCtl) -> list[CoreAction]:
        """SIGNALS: enable or disable SIGUSR1 on application-bypass arrivals."""
        state = self.ports.port_of(conn)
        if state is None:
            return self.refuse(conn, "SIGNALS before OPEN")
        if self.ports.set_signals(state, record.enable, record.pid, record.seen):
            return [self._signal(state)]
        return []

    def start_send(
        self, conn: int, state: PortState, handle: int, dests: Sequence[int], size: int,
        error_node: int,
    ) -> list[CoreAction] | None:  # fmt: skip
        """The checks every host send passes (a send token, a route to each destination, the
        size): None when it may start, its token taken; else what to tell the host."""
        try:
            self.ports.take_send_token(state)
        except UsageError as exc:
            return self.refuse(conn, str(exc))
        failure = None
        if not self.nodes.issuperset(dests):
            failure = "no_route"
        elif size > self.config.max_message:
            failure = "too_large"
        if failure is None:
            return None
        self.ports.return_send_token(state.port)
        return [ToHost(conn, hl.ErrorEvent(handle, error_node, failure))]

    def send(self, conn: int, req: hl.SendReq) -> list[CoreAction]:
        """SEND: one message over the reliable transport."""
        state = self.ports.port_of(conn)
        if state is None:
            return self.refuse(conn, "SEND before OPEN")
        msg_type = HOST_MSG_TYPES.get(req.msg_type)
        if msg_type is None:
            return self.refuse(conn, f"message type {req.msg_type} is not for hosts to send")
        refused = self.start_send(conn, state, req.handle, (req.dst_node,), len(req.payload),
                                  req.dst_node)  # fmt: skip
        if refused is not None:
            return refused
        return [PortSend(state.port, req.dst_node, req.dst_port, msg_type, req.payload,
                         req.handle, req.am_handler, req.args)]  # fmt: skip

    # -- delivery and completion ------------------------------------------------------------

    def on_deliver(
        self, d: Deliver, state: PortState | None, *, now: float
    ) -> list[CoreAction] | None:
        """A whole message for the host of ``state`` (None: its port closed, a drop)."""
        if state is None:
            self.link.drop("port_closed")
            return []
        if d.msg_type is MsgType.RM_WRITE_P:
            return self._place(state, d)
        event = hl.RecvEvent(
            d.src_node, d.src_port, d.payload, int(d.msg_type), d.am_handler, d.args,
            d.mcast_group,
        )  # fmt: skip
        out: list[CoreAction] = []
        if d.port in self._sent:
            out += self._tell_sent(d.port)  # rides along: same wake-up
        out.append(ToHost(state.conn, event))
        if d.msg_type in SIGNAL_TYPES and self.ports.on_ab_delivered(state):
            out.append(self._signal(state))  # after the record: the handler finds it
        return out

    def on_done(self, done: SendComplete | SendFailed, *, now: float) -> list[CoreAction] | None:
        """A host's send ended: SENT lazily, ERROR at once; its token comes back."""
        if isinstance(done, SendComplete):
            return self._complete(done.port, done.handle, now)
        error = hl.ErrorEvent(done.handle, done.dst_node, done.reason)
        return [*self._tell_sent(done.port), *self._finish_send(done.port, error)]

    def on_timer(self, *, now: float) -> list[CoreAction]:
        """Tell the hosts whose SENT events are due."""
        out: list[CoreAction] = []
        for port, due in list(self._sent_due.items()):
            if due <= now:
                out += self._tell_sent(port)
        return out

    def next_deadline(self) -> float | None:
        """When the earliest held SENT event is due."""
        return min(self._sent_due.values()) if self._sent_due else None

    def on_port_closed(self, port: int) -> None:
        """Nobody to tell any more."""
        self._sent.pop(port, None)
        self._sent_due.pop(port, None)

    # -- helpers ----------------------------------------------------------------------------

    def _signal(self, state: PortState) -> RaiseSignal:
        state.signal_pending = True
        state.signals_raised += 1
        return RaiseSignal(state.conn, state.host_pid)

    def _place(self, state: PortState, d: Deliver) -> list[CoreAction]:
        """RM-P write (GRIM 4.5): copy into registered memory, tell the host where."""
        region, offset = d.args[0], d.args[1]
        memory = state.regions.get(region)
        end = offset + len(d.payload)
        if memory is None or end > len(memory):
            self.link.drop("rm_bounds")
            return []
        memory[offset:end] = d.payload
        event = hl.RmWriteEvent(d.src_node, d.src_port, region, offset, len(d.payload), d.args)
        return [ToHost(state.conn, event)]

    def _complete(self, port: int, handle: int, now: float) -> list[CoreAction]:
        """A send completed: its token is back at once; the host hears of it lazily."""
        if self.ports.get(port) is None:
            return []
        self.ports.return_send_token(port)
        pending = self._sent.setdefault(port, [])
        pending.append(handle)
        if len(pending) >= self._sent_flush_at:
            return self._tell_sent(port)
        self._sent_due.setdefault(port, now + self.config.sent_delay_s)
        return []

    def _tell_sent(self, port: int) -> list[CoreAction]:
        handles = self._sent.pop(port, None)
        self._sent_due.pop(port, None)
        state = self.ports.get(port)
        if not handles or state is None:
            return []
        event = hl.SentEvent(handles[0]) if len(handles) == 1 else hl.SentBatch(tuple(handles))
        return [ToHost(state.conn, event)]

    def _finish_send(self, port: int, event: hl.ErrorEvent) -> list[CoreAction]:
        state = self.ports.get(port)
        if state is None:
            return []
        self.ports.return_send_token(port)
        return [ToHost(state.conn, event)]
