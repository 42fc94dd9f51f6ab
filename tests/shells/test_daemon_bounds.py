"""The nicd shell on real sockets, driven by hand: the per-wake budget of host records, the
bounded output queue of a host connection, and the fail-closed signal rule."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from nicd import hostlink as hl
from nicd.config import NicConfig
from nicd.core.actions import RaiseSignal
from nicd.core.nic import NicCore
from nicd.shell.daemon import _Shell
from nicd.shell.hostconn import HostConn

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

STATS_REQ = b"".join(hl.encode_record(hl.StatsReq()))


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[_Shell]:
    loop = asyncio.new_event_loop()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    config = NicConfig(node_id=0, run_dir=str(tmp_path), host_records_per_wake=16,
                       host_out_bytes=1, max_message=4096)  # fmt: skip
    s = _Shell(NicCore(config), loop, udp)
    try:
        yield s
    finally:
        s.close()
        udp.close()
        loop.close()


def _connect(shell: _Shell) -> tuple[HostConn, socket.socket]:
    host, nic = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    nic.setblocking(False)
    conn = HostConn(shell._next_conn, nic, shell.core.config.max_message)
    shell._next_conn += 1
    shell.conns[conn.conn_id] = conn
    shell.loop.add_reader(nic.fileno(), shell._readable, conn)
    return conn, host


def test_one_wake_reads_at_most_the_budget_of_host_records(shell: _Shell) -> None:
    conn, host = _connect(shell)
    with host:
        host.setblocking(False)
        for _ in range(40):
            host.send(STATS_REQ)
        shell._readable(conn)
        link = shell.core.link
        assert link.host_records_in == 16
        assert link.host_read_yields == 1
        shell._readable(conn)
        shell._readable(conn)
        assert link.host_records_in == 40


def test_a_host_that_never_reads_is_disconnected_at_the_bound(shell: _Shell) -> None:
    conn, host = _connect(shell)
    with host:
        host.setblocking(False)
        limit = shell.core.config.max_message + 65536  # the floor of the bound
        for _ in range(100_000):
            if conn.conn_id not in shell.conns:
                break
            assert conn.outq_bytes <= limit
            with contextlib.suppress(BlockingIOError):
                host.send(STATS_REQ)
            shell._readable(conn)
        assert conn.conn_id not in shell.conns
        assert shell.core.link.drops["host_outq_full"] == 1


def test_no_signal_without_a_verified_peer_pid(shell: _Shell) -> None:
    got: list[int] = []
    old = signal.signal(signal.SIGUSR1, lambda signum, _frame: got.append(signum))
    try:
        conn, host = _connect(shell)
        with host:
            assert conn.pid == os.getpid()  # SO_PEERCRED of a socketpair: this process
            shell._raise_signal(RaiseSignal(conn.conn_id, os.getpid()))
            assert got == [signal.SIGUSR1]
            conn.pid = None  # e.g. across pid namespaces: SO_PEERCRED gave no pid
            shell._raise_signal(RaiseSignal(conn.conn_id, os.getpid()))
            assert got == [signal.SIGUSR1]
            assert shell.core.link.drops["signal_unverified"] == 1
    finally:
        signal.signal(signal.SIGUSR1, old)


def test_a_signal_never_reaches_a_process_that_reused_the_hosts_pid(
    shell: _Shell, tmp_path: Path
) -> None:
    """The host that connected exits; its pid then names another process (this one, standing
    in for a reuse): the NIC's signal goes through the pidfd taken at connect time, so it
    fails (counted) instead of hitting the newcomer."""
    path = str(tmp_path / "pci.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(1)
    code = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
        f"s.connect({path!r})\n"
        "sys.stdin.read()\n"
    )
    host = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    got: list[int] = []
    old = signal.signal(signal.SIGUSR1, lambda signum, _frame: got.append(signum))
    try:
        nic, _ = listener.accept()
        nic.setblocking(False)
        conn = HostConn(shell._next_conn, nic, shell.core.config.max_message)
        shell.conns[conn.conn_id] = conn
        assert conn.pid == host.pid
        assert host.stdin is not None
        host.stdin.close()
        assert host.wait(timeout=60) == 0  # exited and reaped: its pid is free for reuse
        conn.pid = os.getpid()  # the reuse: the connection's pid now names a live process
        shell._raise_signal(RaiseSignal(conn.conn_id, os.getpid()))
        assert got == []
        assert shell.core.link.drops["signal_failed"] == 1
    finally:
        signal.signal(signal.SIGUSR1, old)
        listener.close()
        if host.poll() is None:
            host.kill()
            host.wait()
