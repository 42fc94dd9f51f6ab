"""emucluster.pmi.channel against a scripted process manager on real sockets: the inherited
descriptor (PMI_FD), the TCP port with its hand-shake (PMI_PORT + PMI_ID), a manager that
closes the connection or never answers."""

from __future__ import annotations

import socket
import threading
from typing import TYPE_CHECKING

import pytest

from emucluster.pmi.channel import PmiChannel, PmiChannelError, started_by_pmi
from emucluster.pmi.session import Maxes, PmiRefused

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

Script = list[tuple[bytes, bytes]]
"""(request the client must send, reply the manager sends) in order."""

WIRE_UP: Script = [
    (b"cmd=init pmi_version=1 pmi_subversion=1\n",
     b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"),
    (b"cmd=get_maxes\n", b"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n"),
    (b"cmd=get_my_kvsname\n", b"cmd=my_kvsname kvsname=kvs_1_0\n"),
    (b"cmd=put kvsname=kvs_1_0 key=k value=v\n", b"cmd=put_result rc=0\n"),
    (b"cmd=barrier_in\n", b"cmd=barrier_out\n"),
    (b"cmd=get kvsname=kvs_1_0 key=nothing\n", b"cmd=get_result rc=-1 msg=not_found\n"),
    (b"cmd=get kvsname=kvs_1_0 key=k\n", b"cmd=get_result rc=0 value=v\n"),
    (b"cmd=finalize\n", b"cmd=finalize_ack\n"),
]  # fmt: skip


def serve(sock: socket.socket, script: Script, seen: list[bytes]) -> None:
    """Answer ``script`` line by line, recording each request; then close."""
    with sock, sock.makefile("rb") as lines:
        for expected, reply in script:
            line = lines.readline()
            seen.append(line)
            if line != expected:
                return
            sock.sendall(reply)


@pytest.fixture
def manager() -> Iterator[Callable[[Script], tuple[socket.socket, list[bytes]]]]:
    threads: list[threading.Thread] = []

    def start(script: Script) -> tuple[socket.socket, list[bytes]]:
        ours, theirs = socket.socketpair()
        seen: list[bytes] = []
        thread = threading.Thread(target=serve, args=(theirs, script, seen), daemon=True)
        thread.start()
        threads.append(thread)
        return ours, seen

    yield start
    for thread in threads:
        thread.join(10)


def run_wire_up(channel: PmiChannel) -> None:
    assert channel.maxes() == Maxes(256, 64, 1024)
    assert channel.kvsname() == "kvs_1_0"
    channel.put("kvs_1_0", "k", "v")
    channel.barrier()
    with pytest.raises(PmiRefused, match="not_found"):
        channel.get("kvs_1_0", "nothing")
    assert channel.get("kvs_1_0", "k") == "v"
    channel.finalize()


def test_over_the_inherited_descriptor(
    manager: Callable[..., tuple[socket.socket, list[bytes]]],
) -> None:
    ours, seen = manager(WIRE_UP)
    env = {"PMI_FD": str(ours.detach()), "PMI_RANK": "0", "PMI_SIZE": "1"}
    assert started_by_pmi(env)
    channel = PmiChannel.from_environ(env, timeout_s=30)
    assert channel.placement is None
    run_wire_up(channel)
    assert seen == [request for request, _ in WIRE_UP]


def test_over_the_port_with_its_handshake() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    handshake: Script = [
        (
            b"cmd=initack pmiid=5\n",
            b"cmd=initack\ncmd=set size=8\ncmd=set rank=5\ncmd=set debug=0\n",
        )
    ]
    seen: list[bytes] = []

    def accept() -> None:
        conn, _ = listener.accept()
        serve(conn, handshake + WIRE_UP, seen)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    channel = PmiChannel.from_environ({"PMI_PORT": f"127.0.0.1:{port}", "PMI_ID": "5"}, 30)
    assert channel.placement is not None
    assert (channel.placement.rank, channel.placement.size) == (5, 8)
    run_wire_up(channel)
    thread.join(10)
    listener.close()
    assert seen[0] == b"cmd=initack pmiid=5\n"


def test_a_manager_that_closes_is_an_error_not_a_hang(
    manager: Callable[..., tuple[socket.socket, list[bytes]]],
) -> None:
    ours, _ = manager([*WIRE_UP[:1], (b"cmd=barrier_in\n", b"")])  # reads it, then closes
    channel = PmiChannel.from_environ({"PMI_FD": str(ours.detach())}, 30)
    with pytest.raises(PmiChannelError, match="closed the connection"):
        channel.barrier()


def test_a_manager_that_never_answers_times_out() -> None:
    ours, theirs = socket.socketpair()
    with theirs, pytest.raises(PmiChannelError, match="no reply"):
        PmiChannel.from_environ({"PMI_FD": str(ours.detach())}, timeout_s=0.2)


def test_nothing_to_connect_to_is_a_clear_error() -> None:
    assert not started_by_pmi({"PMI_RANK": "0"})
    with pytest.raises(PmiChannelError, match="PMI_FD=notanumber"):
        PmiChannel.from_environ({"PMI_FD": "notanumber"}, 1)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        with pytest.raises(PmiChannelError, match="PMI_ID"):
            PmiChannel.from_environ({"PMI_PORT": f"127.0.0.1:{port}"}, 1)
