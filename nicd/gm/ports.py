"""GM ports: which host connection owns which port, send tokens and receive tokens.

A port is a GM endpoint and a GRIM logical channel at once (GRIM 4.3.1: one LC per endpoint).

Invariants: a port is owned by at most one connection; a port's free send tokens never exceed
what it was opened with and never go negative (a send without a token is refused, not queued);
receive tokens are only consumed by ``admit`` for a message that will be delivered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nicd.errors import UsageError
from nicd.link.channels import Admission
from nicd.link.wire import DataPacket, MsgType

__all__ = ["PortState", "PortTable"]


@dataclass(slots=True)
class PortState:
    """One open port."""

    port: int
    conn: int
    """The shell's id for the host connection that opened it."""
    send_tokens: int
    """Free send tokens (outstanding sends the host may still start)."""
    receive_tokens: int = 0
    """Receive buffers the host has provided and no message has used yet."""
    sends_outstanding: int = 0
    regions: dict[int, memoryview] = field(default_factory=dict)
    """Registered memory: region id -> the shared memory mapped by this NIC."""
    signals_enabled: bool = False
    """The host wants SIGUSR1 when an application-bypass message arrives (off at open)."""
    signal_pending: bool = False
    """A signal was raised and the host has not acknowledged it (at most one pending)."""
    host_pid: int = 0
    """The process to signal, as the host stated it."""
    ab_delivered: int = 0
    """Application-bypass messages delivered to the host, modulo 2**32."""
    signals_raised: int = 0
    upcall_signals: bool = False
    """The host wants SIGUSR1 after every GRIM translation upcall (``RmUpcallSignals``)."""


class PortTable:
    """The NIC's ports, by number and by connection."""

    def __init__(self, *, max_ports: int, send_tokens: int) -> None:
        self._max_ports = max_ports
        self._send_tokens = send_tokens
        self._ports: dict[int, PortState] = {}
        self._by_conn: dict[int, int] = {}
        self._ever_opened: set[int] = set()
        self.refused_no_buffer = 0
        self.refused_no_port = 0
        self.refused_not_open = 0

    def open(self, conn: int, requested: int | None) -> PortState:
        """Open ``requested`` (or the lowest free port) for ``conn``; raise UsageError if
        the connection has a port already, the port is taken, or none is free."""
        if conn in self._by_conn:
            raise UsageError(f"connection already owns port {self._by_conn[conn]}")
        if requested is None:
            free = [p for p in range(self._max_ports) if p not in self._ports]
            if not free:
                raise UsageError(f"all {self._max_ports} ports are open")
            requested = free[0]
        elif not 0 <= requested < self._max_ports:
            raise UsageError(f"port {requested} is outside 0..{self._max_ports - 1}")
        elif requested in self._ports:
            raise UsageError(f"port {requested} is already open")
        state = PortState(requested, conn, self._send_tokens)
        self._ports[requested] = state
        self._by_conn[conn] = requested
        self._ever_opened.add(requested)
        return state

    @property
    def any_opened(self) -> bool:
        """A port has been opened on this NIC at some time (hosts have started)."""
        return bool(self._ever_opened)

    def close_conn(self, conn: int) -> PortState | None:
        """Forget the port of ``conn``; return it (with its regions), if it had one."""
        port = self._by_conn.pop(conn, None)
        return None if port is None else self._ports.pop(port)

    def port_of(self, conn: int) -> PortState | None:
        """The port ``conn`` owns, if any."""
        port = self._by_conn.get(conn)
        return None if port is None else self._ports[port]

    def get(self, port: int) -> PortState | None:
        """The open port ``port``, if open."""
        return self._ports.get(port)

    def take_send_token(self, state: PortState) -> None:
        """Use one send token; UsageError when none is free (the host ignored its count)."""
        if state.send_tokens <= 0:
            raise UsageError("send without a free send token")
        state.send_tokens -= 1
        state.sends_outstanding += 1

    def return_send_token(self, port: int) -> None:
        """A send finished (SENT or ERROR): its token goes back, if the port is still open."""
        state = self._ports.get(port)
        if state is not None and state.sends_outstanding > 0:
            state.sends_outstanding -= 1
            state.send_tokens += 1

    def provide(self, state: PortState, count: int) -> None:
        """The host gave ``count`` more receive buffers."""
        state.receive_tokens += count

    def register(self, state: PortState, region: int, memory: memoryview) -> None:
        """Make ``memory`` region ``region`` of the port; UsageError if the id is taken."""
        if region in state.regions:
            raise UsageError(f"region {region} is already registered")
        state.regions[region] = memory

    def deregister(self, state: PortState, region: int) -> memoryview | None:
        """Forget region ``region``; return its memory for the shell to unmap."""
        return state.regions.pop(region, None)

    def set_signals(self, state: PortState, enable: bool, pid: int, seen: int) -> bool:
        """The host enabled (acknowledging the last signal) or disabled signals; True if a
        signal is due at once: enabled, and messages arrived that the host has not seen."""
        state.signals_enabled = enable
        state.signal_pending = False
        state.host_pid = pid
        return enable and pid > 0 and state.ab_delivered != seen & 0xFFFFFFFF

    def on_ab_delivered(self, state: PortState) -> bool:
        """An application-bypass message goes to the host; True if it must be signalled
        (enabled and no signal pending)."""
        state.ab_delivered = (state.ab_delivered + 1) & 0xFFFFFFFF
        return state.signals_enabled and not state.signal_pending and state.host_pid > 0

    def admit(self, first: DataPacket) -> Admission:
        """Transport hook: may the message ``first`` begins enter its port? A message uses
        one receive token; a remote-memory write needs its region registered instead.

        A port that was never open on this NIC is not ready yet rather than gone (its host
        is still starting, as MPI ranks do at different speeds): NO_BUFFER, so the sender
        keeps probing and resumes when it opens. Only a port that was open and closed
        refuses with NO_PORT, which fails the sends once it lasts."""
        state = self._ports.get(first.dst_port)
        if state is None:
            if first.dst_port not in self._ever_opened:
                self.refused_not_open += 1
                return Admission.NO_BUFFER
            self.refused_no_port += 1
            return Admission.NO_PORT
        if first.msg_type is MsgType.RM_WRITE_P:
            memory = state.regions.get(first.args[0])
            if memory is None or first.args[1] + first.msg_len > len(memory):
                self.refused_no_port += 1  # no such memory: fails like a closed port
                return Admission.NO_PORT
            return Admission.OK
        if state.receive_tokens <= 0:
            self.refused_no_buffer += 1
            return Admission.NO_BUFFER
        state.receive_tokens -= 1
        return Admission.OK

    def admit_group(self, port: int) -> Admission:
        """A new multicast message for ``port`` (its group's host port) needs a receive token,
        as a unicast message does; a closed port refuses with NO_PORT."""
        state = self._ports.get(port)
        if state is None:
            self.refused_no_port += 1
            return Admission.NO_PORT
        if state.receive_tokens <= 0:
            self.refused_no_buffer += 1
            return Admission.NO_BUFFER
        state.receive_tokens -= 1
        return Admission.OK

    def stats(self) -> dict[str, object]:
        """Per-port token counts and refusals."""
        return {
            "ports": {
                str(p.port): {
                    "send_tokens": p.send_tokens,
                    "receive_tokens": p.receive_tokens,
                    "sends_outstanding": p.sends_outstanding,
                    "regions": {str(r): len(m) for r, m in p.regions.items()},
                    "signals_enabled": p.signals_enabled,
                    "signals_raised": p.signals_raised,
                    "ab_delivered": p.ab_delivered,
                }
                for p in self._ports.values()
            },
            "refused_no_buffer": self.refused_no_buffer,
            "refused_no_port": self.refused_no_port,
            "refused_not_open": self.refused_not_open,
        }
