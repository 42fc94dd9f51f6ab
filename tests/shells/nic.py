"""A scripted nicd for shell tests: the far end of a SOCK_SEQPACKET socketpair.

The test writes the records the NIC would send (`ScriptedNic.tell`) and reads what the host
wrote (`ScriptedNic.requests`); nothing runs in the background, so every exchange is exact.
"""

from __future__ import annotations

import socket

from emucluster.port.client import Port
from nicd import hostlink as hl

__all__ = ["ScriptedNic", "open_pair"]


class ScriptedNic:
    """The NIC side of one port."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._assembler = hl.Assembler()

    def tell(self, *records: hl.HostRecord) -> None:
        """Send ``records`` to the host, in order."""
        for record in records:
            for chunk in hl.encode_record(record):
                self.sock.send(chunk)

    def requests(self) -> list[hl.HostRecord]:
        """Every record the host has written so far."""
        got: list[hl.HostRecord] = []
        self.sock.setblocking(False)
        try:
            while True:
                try:
                    chunk = self.sock.recv(hl.MAX_RECORD_BYTES)
                except BlockingIOError:
                    return got
                record = self._assembler.feed(chunk)
                if record is not None:
                    got.append(record)
        finally:
            self.sock.setblocking(True)


def open_pair(
    *,
    send_tokens: int = 4,
    receive_buffers: int = 0,
    auto_replenish: bool = False,
    node_id: int = 0,
    num_nodes: int = 2,
) -> tuple[Port, ScriptedNic]:
    """A `Port` (block policy: waits sleep in select) wired to a `ScriptedNic`."""
    host, nic = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    host.setblocking(False)
    opened = hl.Opened(port=2, node_id=node_id, num_nodes=num_nodes, send_tokens=send_tokens)
    port = Port(host, opened, auto_replenish=auto_replenish, wait="block", spin_s=0.0)
    if receive_buffers:
        port.provide_receive_buffers(receive_buffers)
        port.state.provide_batch = max(1, receive_buffers // 4)
    return port, ScriptedNic(nic)
