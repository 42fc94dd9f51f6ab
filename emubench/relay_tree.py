"""The floor of the emulated path for 8-byte collectives: a plain-Python relay tree.

What an emulated collective could cost if each message cost only its three hops. Per node, a
"host" process and a "NIC" relay process (``N`` nodes = ``2 N`` processes, as emurun starts); a
message goes host -> relay (Unix SEQPACKET), relay -> relay (UDP on loopback), relay -> host
(SEQPACKET): the three hops of `emubench.nicd_port`'s relay, with blocking sockets, no
reliability, no matching beyond (source, tag). The hosts run emucluster's host algorithms on
the same tree shapes (`emucluster.coll.trees`): binomial Bcast and Reduce (of one double,
summed) rooted at rank 0, and the default barrier (``auto``: dissemination up to
`DISSEMINATION_MAX_RANKS` ranks, the binomial fan-in/fan-out tree above); ``bcast_nic`` is the
floor of the NIC-forwarded bcast (emucluster's default from 3 ranks): the root's relay and
every relay that receives it forward it down a binomial tree (emucluster's is postal-optimal
from measured costs) and hand it to their host,
so an edge is one UDP hop and each host one SEQPACKET hop. Each iteration starts after a
barrier, a rank's figure is its mean over iterations, the figure is the mean over ranks (as
`emubench.mpi_micro` measures). Placement as emurun's ``--bind-to core``: node i's host and
relay share the i-th CPU; relays at SCHED_FIFO when ``nic_priority`` is ``rt`` (as emurun's
nicd), else unchanged.

``measure(nodes, iters, nic_priority)`` returns ``{"collectives": {op: {"mean_us", "max_us",
"ranks"}}, "nic_priority": ...}``.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import select
import socket
import statistics
import struct
import tempfile
import time
from collections import deque
from typing import Any

from emucluster.coll.barrier import DISSEMINATION_MAX_RANKS
from emucluster.coll.trees import binomial_children, binomial_parent, dissemination_peers

__all__ = ["OPS", "measure"]

OPS = ("bcast", "bcast_nic", "reduce", "barrier")
NICD_RT_PRIORITY = 10  # SCHED_FIFO priority, as emurun gives nicd
WARMUP = 10  # iterations per operation before timing
_HEAD = struct.Struct(">HB")  # node (destination host->relay, source relay->host), tag
_DOUBLE = struct.Struct(">d")
_TAGS = {"bcast": 1, "reduce": 2, "barrier_up": 3, "barrier_down": 4, "bcast_nic": 5}
_STOP = b""  # host -> relay: shut down


def _relay(node: int, path: str, udp: socket.socket, peers: list[tuple[str, int]],
           ready: Any) -> None:  # fmt: skip
    """Node ``node``'s NIC stand-in: host datagrams out over UDP, UDP datagrams in to the
    host, rewriting the node field (destination out, source in); a ``bcast_nic`` datagram is
    also forwarded to this node's children of the binomial tree rooted at node 0."""
    nic_tag = _TAGS["bcast_nic"]
    children = [peers[c] for c in binomial_children(node, 0, len(peers))]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(1)
    ready.set()
    conn, _ = listener.accept()
    while True:
        readable, _, _ = select.select([conn, udp], [], [])
        if conn in readable:
            msg = conn.recv(65536)
            if not msg:
                return
            dest, tag = _HEAD.unpack_from(msg)
            if tag == nic_tag:  # the root hands it to its NIC once
                datagram = _HEAD.pack(node, tag) + msg[_HEAD.size :]
                for child in children:
                    udp.sendto(datagram, child)
            else:
                udp.sendto(_HEAD.pack(node, tag) + msg[_HEAD.size :], peers[dest])
        if udp in readable:
            datagram = udp.recv(65536)
            if datagram[2] == nic_tag:  # forward first, as the NIC does, then deliver
                for child in children:
                    udp.sendto(datagram, child)
            conn.send(datagram)


class _Host:
    """One rank: blocking sends and (source, tag)-matched receives through its relay."""

    def __init__(self, rank: int, size: int, path: str) -> None:
        self.rank = rank
        self.size = size
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(path)
        self.stash: dict[tuple[int, int], deque[bytes]] = {}

    def send(self, dest: int, tag: int, payload: bytes = b"") -> None:
        self.sock.send(_HEAD.pack(dest, tag) + payload)

    def recv(self, source: int, tag: int) -> bytes:
        queue = self.stash.get((source, tag))
        if queue:
            return queue.popleft()
        while True:
            msg = self.sock.recv(65536)
            src, got = _HEAD.unpack_from(msg)
            if (src, got) == (source, tag):
                return msg[_HEAD.size :]
            self.stash.setdefault((src, got), deque()).append(msg[_HEAD.size :])

    def barrier(self) -> None:
        if self.size <= DISSEMINATION_MAX_RANKS:
            for send_to, recv_from in dissemination_peers(self.rank, self.size):
                self.send(send_to, _TAGS["barrier_up"])
                self.recv(recv_from, _TAGS["barrier_up"])
            return
        children = binomial_children(self.rank, 0, self.size)
        for child in children:
            self.recv(child, _TAGS["barrier_up"])
        parent = binomial_parent(self.rank, 0, self.size)
        if parent is not None:
            self.send(parent, _TAGS["barrier_up"])
            self.recv(parent, _TAGS["barrier_down"])
        for child in children:
            self.send(child, _TAGS["barrier_down"])

    def bcast(self, value: bytes) -> bytes:
        parent = binomial_parent(self.rank, 0, self.size)
        if parent is not None:
            value = self.recv(parent, _TAGS["bcast"])
        for child in binomial_children(self.rank, 0, self.size):
            self.send(child, _TAGS["bcast"], value)
        return value

    def bcast_nic(self, value: bytes) -> bytes:
        if self.rank == 0:
            self.send(0, _TAGS["bcast_nic"], value)
            return value
        return self.recv(0, _TAGS["bcast_nic"])  # the source field names the root's node

    def reduce(self, value: float) -> float:
        for child in binomial_children(self.rank, 0, self.size)[::-1]:
            value += _DOUBLE.unpack(self.recv(child, _TAGS["reduce"]))[0]
        parent = binomial_parent(self.rank, 0, self.size)
        if parent is not None:
            self.send(parent, _TAGS["reduce"], _DOUBLE.pack(value))
        return value


def _host(rank: int, size: int, path: str, iters: int, out: Any) -> None:
    """Rank ``rank``: every operation, timed after a barrier; its means go to ``out``."""
    host = _Host(rank, size, path)
    ops = {
        "bcast": lambda: host.bcast(_DOUBLE.pack(1.0)),
        "bcast_nic": lambda: host.bcast_nic(_DOUBLE.pack(1.0)),
        "reduce": lambda: host.reduce(float(rank)),
        "barrier": host.barrier,
    }
    means: dict[str, float] = {}
    checks: dict[str, object] = {}
    for name, op in ops.items():
        for _ in range(WARMUP):
            host.barrier()
            op()
        total = 0.0
        for _ in range(iters):
            host.barrier()
            start = time.perf_counter()
            result = op()
            total += time.perf_counter() - start
        means[name] = total / iters * 1e6
        checks[name] = result
    host.barrier()
    host.sock.close()
    expected_sum = float(size * (size - 1) // 2)
    ok = checks["bcast"] == checks["bcast_nic"] == _DOUBLE.pack(1.0)
    ok = ok and (rank != 0 or checks["reduce"] == expected_sum)
    out.put((rank, means, ok))


def _realtime(pids: list[int]) -> str:
    for pid in pids:
        try:
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(NICD_RT_PRIORITY))
        except OSError as exc:
            return f"none (SCHED_FIFO refused: {exc})"
    return "rt"


def _bind(pid: int, node: int, cpus: list[int]) -> None:
    with contextlib.suppress(OSError):
        os.sched_setaffinity(pid, {cpus[node % len(cpus)]})


def measure(nodes: int, iters: int, nic_priority: str = "rt",
            timeout: float = 600.0) -> dict[str, Any]:  # fmt: skip
    """Run the relay tree on ``nodes`` nodes; see the module docstring for the result."""
    ctx = mp.get_context("fork")
    cpus = sorted(os.sched_getaffinity(0))
    udps = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(nodes)]
    for udp in udps:
        udp.bind(("127.0.0.1", 0))
        udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    peers = [udp.getsockname() for udp in udps]
    relays: list[Any] = []
    hosts: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="relaytree-", dir="/tmp") as run_dir:
        try:
            paths = [os.path.join(run_dir, f"relay{i}.sock") for i in range(nodes)]
            for node in range(nodes):
                ready = ctx.Event()
                relay = ctx.Process(target=_relay, args=(node, paths[node], udps[node], peers,
                                                         ready), daemon=True)  # fmt: skip
                relay.start()
                relays.append(relay)
                if not ready.wait(30):
                    raise RuntimeError(f"relay {node} did not start")
            priority = "none"
            if nic_priority == "rt":
                priority = _realtime([r.pid for r in relays])
            out = ctx.Queue()
            for rank in range(nodes):
                host = ctx.Process(target=_host, args=(rank, nodes, paths[rank], iters, out),
                                   daemon=True)  # fmt: skip
                host.start()
                hosts.append(host)
            for node in range(nodes):
                _bind(relays[node].pid, node, cpus)
                _bind(hosts[node].pid, node, cpus)
            deadline = time.monotonic() + timeout
            rows = [out.get(timeout=max(1.0, deadline - time.monotonic())) for _ in hosts]
        finally:
            for proc in hosts + relays:
                proc.join(5)
                if proc.is_alive():
                    proc.kill()
            for udp in udps:
                udp.close()
    if not all(ok for _, _, ok in rows):
        raise RuntimeError("relay tree: a rank got a wrong bcast or reduce result")
    rows.sort()
    collectives = {
        op: {
            "mean_us": statistics.fmean(means[op] for _, means, _ in rows),
            "max_us": max(means[op] for _, means, _ in rows),
            "ranks": [means[op] for _, means, _ in rows],
        }
        for op in OPS
    }
    return {"collectives": collectives, "nic_priority": priority, "iters": iters}
