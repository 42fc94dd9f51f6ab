"""What the nicd cores return: frozen records the shell (or the composing core) carries out.

The transport core returns :data:`TransportAction`; the services NicCore composes return
:data:`CoreAction` (transport work plus requests only NicCore can carry out: a NIC-originated
send, a receive token given back, an ACK now); NicCore runs those in one flat loop and hands
the shell :data:`NicAction` (datagrams for the link, records for host connections, signals).

Records are slotted dataclasses treated as immutable but not ``frozen``: on CPython 3.11 a
frozen one with 15 fields takes 1.7 us to build against 0.3 us, and every packet builds several.
Those built per message write their own ``__init__`` (``dataclass`` keeps it and still makes
``__eq__`` and ``__repr__``): compiled with mypyc, the ``__init__`` that ``dataclass`` generates
is interpreted code, about 7x slower to call than the class's own, which is native.
"""

from __future__ import annotations

from dataclasses import dataclass

from nicd.hostlink import HostRecord
from nicd.link.wire import ControlPacket, DataPacket, MsgType

__all__ = [
    "AckNow",
    "CoreAction",
    "Deliver",
    "GiveBack",
    "McastAction",
    "McastChildDead",
    "McastDone",
    "NicAction",
    "NicSend",
    "PeerDead",
    "PortSend",
    "RaiseSignal",
    "ResumePort",
    "SendComplete",
    "SendFailed",
    "SendPacket",
    "ToHost",
    "ToPort",
    "Transmit",
    "TransportAction",
]


@dataclass(slots=True)
class SendPacket:
    """Put ``packet`` on the link towards node ``node``."""

    node: int
    packet: DataPacket | ControlPacket

    def __init__(self, node: int, packet: DataPacket | ControlPacket) -> None:
        self.node = node
        self.packet = packet


@dataclass(slots=True)
class Deliver:
    """A whole message arrived, in stream order, for local port ``port``."""

    port: int
    src_node: int
    src_port: int
    msg_type: MsgType
    payload: bytes
    am_handler: int = 0
    args: tuple[int, int, int, int] = (0, 0, 0, 0)
    mcast_group: int = 0

    def __init__(
        self,
        port: int,
        src_node: int,
        src_port: int,
        msg_type: MsgType,
        payload: bytes,
        am_handler: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
        mcast_group: int = 0,
    ) -> None:
        self.port = port
        self.src_node = src_node
        self.src_port = src_port
        self.msg_type = msg_type
        self.payload = payload
        self.am_handler = am_handler
        self.args = args
        self.mcast_group = mcast_group


@dataclass(slots=True)
class SendComplete:
    """Every fragment of the message ``handle`` sent from ``port`` was acknowledged."""

    port: int
    handle: int

    def __init__(self, port: int, handle: int) -> None:
        self.port = port
        self.handle = handle


@dataclass(slots=True)
class SendFailed:
    """The message ``handle`` from ``port`` will never be delivered."""

    port: int
    handle: int
    dst_node: int
    reason: str
    """``peer_dead``, ``no_port`` or ``closed``."""

    def __init__(self, port: int, handle: int, dst_node: int, reason: str) -> None:
        self.port = port
        self.handle = handle
        self.dst_node = dst_node
        self.reason = reason


@dataclass(slots=True)
class PeerDead:
    """Node ``node`` stopped answering past the dead-peer limit; it stays dead for this run."""

    node: int


@dataclass(slots=True)
class ToPort:
    """A record for the host that owns local port ``port`` (dropped if it closed);
    ``interrupt``: then SIGUSR1 to that host if its port asked for upcall signals."""

    port: int
    record: HostRecord
    interrupt: bool = False

    def __init__(self, port: int, record: HostRecord, interrupt: bool = False) -> None:
        self.port = port
        self.record = record
        self.interrupt = interrupt


TransportAction = SendPacket | Deliver | SendComplete | SendFailed | PeerDead | ToPort
"""What the transport returns; ``ToPort`` only ever comes from an admission verdict."""


@dataclass(slots=True)
class Transmit:
    """Send ``datagram`` (encoded, faults applied) to the UDP address ``addr``."""

    addr: tuple[str, int]
    datagram: bytes
    control: bool = False
    """An ACK/NACK: if the link is busy it waits in the control queue (GRIM 4.2.3)."""

    def __init__(self, addr: tuple[str, int], datagram: bytes, control: bool = False) -> None:
        self.addr = addr
        self.datagram = datagram
        self.control = control


@dataclass(slots=True)
class ToHost:
    """Write ``record`` (a :mod:`nicd.hostlink` record) to host connection ``conn``."""

    conn: int
    record: HostRecord

    def __init__(self, conn: int, record: HostRecord) -> None:
        self.conn = conn
        self.record = record


@dataclass(slots=True)
class RaiseSignal:
    """Send SIGUSR1 to host process ``pid``, the owner of connection ``conn`` (an
    application-bypass message arrived on a port with signals enabled; thesis 3.4.1)."""

    conn: int
    pid: int


NicAction = Transmit | ToHost | RaiseSignal


@dataclass(slots=True)
class NicSend:
    """A message the NIC sends itself, from ``NIC_PORT`` (GRIM replies and reads)."""

    dst_node: int
    dst_port: int
    msg_type: MsgType
    payload: bytes
    am_handler: int = 0
    args: tuple[int, int, int, int] = (0, 0, 0, 0)

    def __init__(
        self,
        dst_node: int,
        dst_port: int,
        msg_type: MsgType,
        payload: bytes,
        am_handler: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
    ) -> None:
        self.dst_node = dst_node
        self.dst_port = dst_port
        self.msg_type = msg_type
        self.payload = payload
        self.am_handler = am_handler
        self.args = args


@dataclass(slots=True)
class PortSend:
    """A host's send from local port ``src_port``, checked (token taken, route, size): hand
    it to the reliable transport."""

    src_port: int
    dst_node: int
    dst_port: int
    msg_type: MsgType
    payload: bytes
    handle: int
    am_handler: int = 0
    args: tuple[int, int, int, int] = (0, 0, 0, 0)

    def __init__(
        self,
        src_port: int,
        dst_node: int,
        dst_port: int,
        msg_type: MsgType,
        payload: bytes,
        handle: int,
        am_handler: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
    ) -> None:
        self.src_port = src_port
        self.dst_node = dst_node
        self.dst_port = dst_port
        self.msg_type = msg_type
        self.payload = payload
        self.handle = handle
        self.am_handler = am_handler
        self.args = args


@dataclass(slots=True)
class ResumePort:
    """Local port ``port`` can take messages again: NACK-RESUME the streams it refused."""

    port: int

    def __init__(self, port: int) -> None:
        self.port = port


@dataclass(slots=True)
class GiveBack:
    """A delivered message went nowhere: its receive token returns to ``port``, which then
    resumes (NICVM consumed it, or it was garbage)."""

    port: int

    def __init__(self, port: int) -> None:
        self.port = port


@dataclass(slots=True)
class AckNow:
    """Acknowledge the stream (``src_node``, ``src_port``) -> ``port`` at once."""

    src_node: int
    src_port: int
    port: int

    def __init__(self, src_node: int, src_port: int, port: int) -> None:
        self.src_node = src_node
        self.src_port = src_port
        self.port = port


CoreAction = TransportAction | NicAction | NicSend | PortSend | ResumePort | GiveBack | AckNow
"""What a service returns to NicCore, which runs it in one flat loop."""


@dataclass(slots=True)
class McastDone:
    """At a multicast root: message ``handle`` that ``port`` multicast on ``group`` is over,
    its send records released (seed 001 §5.1). Every child acknowledged every packet except
    the children in ``failed`` (dead ones, or all still owed when the group was updated or
    freed); those subtrees did not get the message."""

    port: int
    group: int
    handle: int
    failed: tuple[int, ...] = ()
    reason: str = "ok"
    """``ok``; ``child_dead``; ``freed`` or ``updated`` (the group went first)."""


@dataclass(slots=True)
class McastChildDead:
    """At a multicast parent (root or forwarding node): ``child`` of ``group`` stopped
    acknowledging past the retry limit (``retries``) or its node was declared dead
    (``peer_dead``). It gets nothing more on this group; the group's host port ``port``
    decides what to do (an error, not a hang)."""

    port: int
    group: int
    child: int
    reason: str


McastAction = SendPacket | Deliver | McastDone | McastChildDead
"""What the multicast core (:mod:`nicd.mcast.engine`) returns."""
