"""Two nicd shells on real UDP and SEQPACKET sockets, driven by hand: host records read in one
wake-up leave as one bundle, the peer's shell splits it and delivers every message in order,
and a malformed bundle is a counted drop."""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING

import pytest

from nicd import hostlink as hl
from nicd.config import NicConfig
from nicd.core.nic import NicCore
from nicd.link.bundle import is_bundle, split_bundle_untrusted
from nicd.shell.daemon import _Shell
from nicd.shell.hostconn import HostConn

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PORT = 3
TIMEOUT_S = 10.0


class _Node:
    def __init__(self, node_id: int, tmp_path: Path, loop: asyncio.AbstractEventLoop) -> None:
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(TIMEOUT_S)
        self.shell = _Shell(NicCore(NicConfig(node_id, str(tmp_path))), loop, self.udp)
        self.host, nic = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.host.settimeout(TIMEOUT_S)
        nic.setblocking(False)
        self.conn = HostConn(1, nic, self.shell.core.config.max_message)
        self.shell.conns[1] = self.conn
        self.assembler = hl.Assembler()

    @property
    def addr(self) -> tuple[str, int]:
        host, port = self.udp.getsockname()
        return (str(host), int(port))

    def write(self, *records: hl.HostRecord) -> None:
        """The host writes ``records``; nicd reads them all in one wake-up."""
        for record in records:
            for chunk in hl.encode_record(record):
                self.host.send(chunk)
        self.shell._readable(self.conn)

    def read(self) -> hl.HostRecord:
        """The next whole record nicd wrote to the host."""
        while True:
            record = self.assembler.feed(self.host.recv(hl.MAX_RECORD_BYTES))
            if record is not None:
                return record

    def receive(self) -> tuple[bytes, tuple[str, int]]:
        data, addr = self.udp.recvfrom(1 << 16)
        return data, (str(addr[0]), int(addr[1]))

    def close(self) -> None:
        self.shell.close()
        self.host.close()
        self.udp.close()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[_Node, _Node]]:
    loop = asyncio.new_event_loop()
    a, b = _Node(0, tmp_path, loop), _Node(1, tmp_path, loop)
    routes = {0: a.addr, 1: b.addr}
    a.shell.core.set_routes(routes)
    b.shell.core.set_routes(routes)
    try:
        yield a, b
    finally:
        a.close()
        b.close()
        loop.close()


def test_host_sends_read_together_go_as_one_bundle_and_arrive_in_order(
    pair: tuple[_Node, _Node],
) -> None:
    a, b = pair
    a.write(hl.OpenReq(PORT))
    b.write(hl.OpenReq(PORT), hl.ProvideReq(16))
    assert isinstance(a.read(), hl.Opened)
    assert isinstance(b.read(), hl.Opened)
    payloads = [f"message {i}".encode() for i in range(10)]
    a.write(*(hl.SendReq(i, 1, PORT, p) for i, p in enumerate(payloads)))

    data, addr = b.receive()
    assert is_bundle(data)
    assert len(split_bundle_untrusted(data)) == len(payloads)
    link = a.shell.core.link
    assert (link.bundles_out, link.bundled_frames_out, link.datagrams_out) == (1, 10, 10)

    b.shell.datagram_received(data, addr)
    got = [b.read() for _ in payloads]
    assert [r.payload for r in got if isinstance(r, hl.RecvEvent)] == payloads
    assert (b.shell.core.link.bundles_in, b.shell.core.link.bundled_frames_in) == (1, 10)
    assert b.shell.core.link.datagrams_in == 10
    assert not b.shell.core.link.drops


def test_a_single_send_goes_as_a_plain_frame(pair: tuple[_Node, _Node]) -> None:
    a, b = pair
    a.write(hl.OpenReq(PORT))
    a.write(hl.SendReq(7, 1, PORT, b"alone"))
    data, _ = b.receive()
    assert not is_bundle(data)
    assert a.shell.core.link.bundles_out == 0


@pytest.mark.parametrize(
    "bad",
    [
        b"\x00\x06\x37",  # header cut short
        b"\x00\x06\x37\x00\x00",  # no frames
        b"\x00\x06\x37\x00\x02\x00\x01x",  # says two, holds one
        b"\x00\x06\x37\x00\x01\x00\x09short",  # frame runs past the end
        b"\x00\x06\x37\x00\x01\x00\x01xy",  # bytes left over
    ],
)
def test_a_malformed_bundle_is_a_counted_drop(pair: tuple[_Node, _Node], bad: bytes) -> None:
    a, b = pair
    b.shell.datagram_received(bad, a.addr)
    assert b.shell.core.link.drops["bundle"] == 1
    assert b.shell.core.link.datagrams_in == 0
