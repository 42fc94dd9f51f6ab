"""Host-side NICVM API: check, upload, purge and list modules; delegate messages to them.

Thesis §4.3.4 and §5.1. ``check`` runs nicd's own compiler on the host, so a module that
passes here compiles on the NIC; errors carry ``.line``, ``.column`` and a caret snippet. The
other calls talk to this node's NIC over a GM port: inside an MPI program the MPI runtime's
port (``load``, ``purge``, ``modules``, ``delegate`` below), at the port level a `Nicvm` made
on any open `emucluster.port.client.Port`.

* ``load(name, source, *, persist=False)`` uploads a module; a module the NIC refuses raises
  `NicvmError` with the compiler's line and column. Without ``persist`` the NIC purges it when
  the loading port closes.
* ``delegate(name, buf)`` hands ``buf`` to this NIC's module ``name`` (the loopback path of
  Fig 4.5) and waits until the module ran and its sends completed; a module that faults or
  runs out of fuel raises `NicvmRunError` (a `NicvmError`) within the timeout.
* ``Nicvm.send`` sends a NICVM data message to another node's module (the echo benchmark).

Messages a module lets through arrive at the host as ``RecvEvent`` of type ``NICVM_DATA`` with
the root rank in ``am_handler`` and the communicator id in ``mcast_group``.

A `Nicvm` is its port's sink for NICVM records (answers, finished delegations, failure
reports): they land here whenever anything drains the port, and every wait goes through the
port's one wait door (`emucluster.port.client.Port.wait_until`).
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from emucluster.errors import EmuclusterError
from nicd import contract as hl
from nicd.contract import MsgType, NicvmError, compile_module, encode_preamble

if TYPE_CHECKING:
    from emucluster.port.client import Port

__all__ = [
    "Nicvm",
    "NicvmError",
    "NicvmRunError",
    "check",
    "client",
    "delegate",
    "forget_mpi_port",
    "load",
    "modules",
    "purge",
    "use_mpi_port",
]

TIMEOUT_S = 10.0  # default wait for the NIC's answer
REPORTS_KEPT = 100
Args = tuple[int, int, int, int]


class NicvmRunError(NicvmError, EmuclusterError):
    """A delegated message's module failed on the NIC (``outcome``: ``fault``,
    ``out_of_fuel``, ``vm_error``, ``no_module``, ``no_comm``, ``send_failed``, ``disabled``);
    ``line`` is the module line that failed (0 if none). Fix the module or its input."""

    def __init__(self, outcome: str, detail: str, line: int) -> None:
        self.outcome = outcome
        super().__init__(f"{outcome}: {detail}" if detail else outcome, line=line, column=0)


def check(source: str) -> None:
    """Raise ``NicvmError`` (with ``.line``, ``.column``, ``.snippet``) if ``source`` would
    not compile on the NIC: a syntax error, a semantic error or an exceeded limit."""
    compile_module(source)


class Nicvm:
    """The NICVM requests of one open port (one client per port: it takes the port's NICVM
    records)."""

    def __init__(self, port: Port) -> None:
        self.port = port
        self._next = 1
        self.done: dict[int, hl.NicvmDone] = {}
        """Finished delegations not collected yet (started with ``wait=False``)."""
        self.reports: list[hl.NicvmReport] = []
        """Failures of this port's modules on received packets, as the NIC reported them."""
        self._comms: dict[int, tuple[int, ...]] = {}
        self._replies: deque[hl.NicvmReply] = deque()
        port.register_sink(hl.NicvmReply, self._replies.append)
        port.register_sink(hl.NicvmDone, self._on_done)
        port.register_sink(hl.NicvmReport, self._on_report)

    def load(self, name: str, source: str, *, persist: bool = False, precheck: bool = True,
             timeout: float = TIMEOUT_S) -> None:  # fmt: skip
        """Upload ``source`` as module ``name`` (replacing one of that name). Raise
        `NicvmError` with line and column if it does not compile (checked here first unless
        ``precheck`` is False, then by the NIC)."""
        if precheck:
            check(source)
        reply = self._ask(hl.NicvmLoadReq(name, source, persist), timeout)
        if not reply.ok:
            raise NicvmError(reply.error, line=reply.line, column=reply.column, source=source)

    def purge(self, name: str, *, timeout: float = TIMEOUT_S) -> None:
        """Remove module ``name``; `NicvmError` if there is none."""
        reply = self._ask(hl.NicvmPurgeReq(name), timeout)
        if not reply.ok:
            raise NicvmError(reply.error, line=0, column=0)

    def modules(self, *, timeout: float = TIMEOUT_S) -> dict[str, dict[str, object]]:
        """The modules loaded on the NIC, by name: ``"fig43" in nic.modules()`` asks whether one
        is loaded, and each value holds its details (name, owner port, persist, instruction
        count and counters: invocations, ok, consumed, sends, fault, out_of_fuel, ...)."""
        listing = self._ask(hl.NicvmListReq(), timeout).modules or []
        return {str(details["name"]): details for details in listing}

    def set_comm(self, comm: int, nodes: tuple[int, ...]) -> None:
        """Post communicator ``comm``'s map (rank i = node ``nodes[i]``) to the NIC, once."""
        if self._comms.get(comm) != nodes:
            self._comms[comm] = nodes
            self.port.send_record(hl.NicvmCommReq(comm, nodes))

    def start_delegate(self, name: str, buf: bytes | bytearray | memoryview, *, root: int | None
                       = None, comm: int = 0, args: Args = (0, 0, 0, 0)) -> int:  # fmt: skip
        """Hand ``buf`` to this NIC's module ``name`` without waiting; return the handle
        `wait_done` takes. ``root`` defaults to this node (communicator 0's rank)."""
        handle = self._next
        self._next = (handle + 1) & 0xFFFFFFFF or 1
        root = self.port.node_id if root is None else root
        self.port.send_record(hl.NicvmDelegateReq(handle, name, root, comm, bytes(buf), args))
        return handle

    def wait_done(self, handle: int, *, timeout: float = TIMEOUT_S) -> int:
        """Wait for delegation ``handle``; return the module's result code or raise
        `NicvmRunError` (also TimeoutError when the NIC did not answer in time)."""
        done_now = self.done
        if not self.port.wait_until(lambda: handle in done_now, time.monotonic() + timeout):
            raise TimeoutError(f"the NIC did not finish delegation {handle} in {timeout} s")
        done = self.done.pop(handle)
        if done.outcome != "ok":
            raise NicvmRunError(done.outcome, done.detail, done.line)
        return done.result

    def delegate(self, name: str, buf: bytes | bytearray | memoryview, *, root: int | None =
                 None, comm: int = 0, args: Args = (0, 0, 0, 0),
                 timeout: float = TIMEOUT_S) -> int:  # fmt: skip
        """Delegate ``buf`` to module ``name`` and wait (see `start_delegate`, `wait_done`)."""
        handle = self.start_delegate(name, buf, root=root, comm=comm, args=args)
        return self.wait_done(handle, timeout=timeout)

    def send(self, dst_node: int, name: str, buf: bytes | bytearray | memoryview, *,
             root: int, comm: int = 0, args: Args = (0, 0, 0, 0),
             dst_port: int | None = None) -> int:  # fmt: skip
        """Send ``buf`` as a NICVM data message for module ``name`` on node ``dst_node``
        (same port number unless ``dst_port``); return the port's send handle."""
        payload = encode_preamble(name, root, comm) + bytes(buf)
        port = self.port.port_id if dst_port is None else dst_port
        return self.port.send(dst_node, port, payload, msg_type=MsgType.NICVM_DATA, args=args)

    def _ask(self, req: hl.HostRecord, timeout: float) -> hl.NicvmReply:
        replies = self._replies
        replies.clear()  # a late answer to an earlier request that timed out
        self.port.send_record(req)
        if not self.port.wait_until(lambda: bool(replies), time.monotonic() + timeout):
            raise TimeoutError(f"the NIC did not answer {type(req).__name__} in {timeout} s")
        return replies.popleft()

    def _on_done(self, record: hl.NicvmDone) -> None:
        self.done[record.handle] = record

    def _on_report(self, record: hl.NicvmReport) -> None:
        self.reports.append(record)
        del self.reports[:-REPORTS_KEPT]


_clients: dict[int, Nicvm] = {}
_mpi_port: list[Port | None] = []  # [port] once MPI is initialized ([None]: a singleton rank)


def use_mpi_port(port: Port | None) -> None:
    """The MPI library tells which port calls without ``port`` use: its own (``None`` for a
    singleton rank without a NIC); called at Init (`forget_mpi_port` at Finalize)."""
    _mpi_port[:] = [port]


def forget_mpi_port() -> None:
    """MPI was finalized: calls without ``port`` fail again."""
    _mpi_port.clear()


def client(port: Port | None = None) -> Nicvm:
    """The `Nicvm` of ``port``, or of the MPI library's port inside an MPI program."""
    if port is None:
        if not _mpi_port:
            raise NicvmError("no port given and MPI is not initialized", line=0, column=0)
        port = _mpi_port[0]
        if port is None:
            raise NicvmError("this MPI rank has no NIC (singleton)", line=0, column=0)
    found = _clients.get(id(port))
    if found is None or found.port is not port:
        found = _clients[id(port)] = Nicvm(port)
    return found


def load(name: str, source: str, *, persist: bool = False, port: Port | None = None) -> None:
    """Upload module ``name`` to this node's NIC (see `Nicvm.load`)."""
    client(port).load(name, source, persist=persist)


def purge(name: str, *, port: Port | None = None) -> None:
    """Remove module ``name`` from this node's NIC."""
    client(port).purge(name)


def modules(*, port: Port | None = None) -> dict[str, dict[str, object]]:
    """The modules loaded on this node's NIC, by name (see `Nicvm.modules`)."""
    return client(port).modules()


def delegate(name: str, buf: bytes | bytearray | memoryview, *, port: Port | None = None,
             root: int | None = None, comm: int = 0, args: Args = (0, 0, 0, 0),
             timeout: float = TIMEOUT_S) -> int:  # fmt: skip
    """Hand ``buf`` to this NIC's module ``name`` and wait for it (see `Nicvm.delegate`)."""
    return client(port).delegate(name, buf, root=root, comm=comm, args=args, timeout=timeout)
