"""GM-level NIC multicast on real nicd processes: groups, multicast, multisend, dead children."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

import pytest

from emubench.localcluster import NicCluster
from emucluster.offload.nic_mcast.trees import binomial_tree, postal_tree
from emucluster.port.client import McastChildDeadError, Port, PortError, SendFailedError
from nicd.config import FaultConfig
from nicd.link.wire import MsgType

if TYPE_CHECKING:
    from pathlib import Path

    from emucluster.offload.nic_mcast.trees import Tree

pytestmark = pytest.mark.slow
FAULTS = FaultConfig(loss=0.1, dup=0.05, reorder=0.05, seed=3)  # NicCluster derives per-node seeds


def _post(ports: dict[int, Port], group: int, tree: Tree, epoch: int = 0) -> None:
    for node in sorted(tree.members):
        ports[node].create_group(group, tree.root, tree.parent(node), tree.children(node),
                                 epoch=epoch)  # fmt: skip


def test_multicast_reaches_every_member_once_in_order_under_faults(tmp_path: Path) -> None:
    n = 6
    rng = random.Random(5)
    sizes = [0, 1, 100, 4096, 4097, 20_000, 3]
    payloads = [rng.randbytes(s) for s in sizes for _ in range(3)]
    with NicCluster(n, tmp_path, faults=FAULTS) as cluster:
        ports = {i: Port.open(cluster.sockets[i], 1, receive_buffers=64) for i in range(n)}
        tree = postal_tree(2, range(n), latency=3.0, gap=1.0)
        _post(ports, 7, tree)
        handles = [ports[2].multicast(7, p, args=(i, 0, 0, 9)) for i, p in enumerate(payloads)]
        assert len(set(handles)) == len(handles)
        for node in range(n):
            if node == 2:
                continue
            got = [ports[node].recv(timeout=60) for _ in payloads]
            assert [e.payload for e in got] == payloads
            assert {(e.mcast_group, e.src_node, e.msg_type) for e in got} == {
                (7, 2, MsgType.MCAST_DATA)
            }
            assert [e.args[0] for e in got] == list(range(len(payloads)))
        ports[2].flush(timeout=60)  # every child acknowledged every packet
        stats = [cluster.stats(i)["mcast"] for i in range(n)]
        for port in ports.values():
            port.close()
    internal = [node for node in range(n) if node != 2 and tree.children(node)]
    assert internal, "the tree has forwarding nodes"
    for node in internal:
        assert stats[node]["forwarded"] > 0
    assert stats[2]["messages_sent"] == len(payloads)
    assert sum(s["retransmissions"] for s in stats) > 0  # the faults were felt
    assert sum(s["delivered"] for s in stats) == (n - 1) * len(payloads)


def test_group_lifecycle_create_update_free(tmp_path: Path) -> None:
    n = 4
    with NicCluster(n, tmp_path) as cluster:
        ports = {i: Port.open(cluster.sockets[i], 1) for i in range(n)}
        _post(ports, 3, binomial_tree(0, range(n)))
        with pytest.raises(PortError, match="exists"):
            ports[1].create_group(3, 0, 0, ())
        with pytest.raises(PortError, match="parent"):
            ports[1].create_group(4, 0, None, (2,))  # a non-root without a parent
        ports[0].multicast(3, b"first tree")
        assert all(ports[i].recv(timeout=30).payload == b"first tree" for i in (1, 2, 3))
        ports[0].flush(timeout=30)
        chain = postal_tree(0, range(n), latency=1.0, gap=10.0)  # g >> L: a chain
        assert chain.depth() == n - 1
        for node in range(n):
            ports[node].update_group(3, 0, chain.parent(node), chain.children(node), epoch=1)
        ports[0].multicast(3, b"second tree")
        assert all(ports[i].recv(timeout=30).payload == b"second tree" for i in (1, 2, 3))
        ports[0].flush(timeout=30)
        assert cluster.stats(1)["mcast"]["forwarded"] >= 1
        for node in range(n):
            ports[node].free_group(3)
        with pytest.raises(PortError, match=r"does not exist|not this port"):
            ports[0].free_group(3)
        ports[0].multicast(3, b"no group")
        with pytest.raises(PortError, match="refused"):
            ports[0].flush(timeout=30)
        for port in ports.values():
            port.close()


def test_multisend_to_a_list(tmp_path: Path) -> None:
    with NicCluster(4, tmp_path) as cluster:
        ports = {i: Port.open(cluster.sockets[i], 1) for i in range(4)}
        for i in range(20):
            ports[0].multisend([1, 2, 3], 1, f"m{i}".encode(), args=(i, 0, 0, 0))
        for node in (1, 2, 3):
            got = [ports[node].recv(timeout=30) for _ in range(20)]
            assert [e.payload for e in got] == [f"m{i}".encode() for i in range(20)]
            assert all(e.mcast_group == 0 and e.src_node == 0 for e in got)
        ports[0].flush(timeout=30)
        assert ports[0].free_send_tokens == 64  # one token per multisend, all back
        stats = cluster.stats(0)["mcast"]
        assert stats["multisends"] == 20
        assert stats["multisend_copies"] == 60
        ports[0].multisend([1, 9], 1, b"x")
        with pytest.raises(SendFailedError, match="no_route"):
            ports[0].flush(timeout=30)
        for port in ports.values():
            port.close()


def test_dead_child_is_an_error_at_its_parent_not_a_hang(tmp_path: Path) -> None:
    with NicCluster(3, tmp_path, ["--dead-peer-s", "1.5", "--rto-max-ms", "200"]) as cluster:
        ports = {i: Port.open(cluster.sockets[i], 1) for i in range(3)}
        chain = {0: (None, (1,)), 1: (0, (2,)), 2: (1, ())}
        for node, (parent, kids) in chain.items():
            ports[node].create_group(5, 0, parent, kids)
        ports[0].multicast(5, b"alive")
        assert ports[1].recv(timeout=30).payload == b"alive"
        assert ports[2].recv(timeout=30).payload == b"alive"
        ports[0].flush(timeout=30)
        ports[2].close()
        cluster.kill(2)
        started = time.monotonic()
        ports[0].multicast(5, b"into the void below 1")
        assert ports[1].recv(timeout=30).payload == b"into the void below 1"
        with pytest.raises(McastChildDeadError) as failure:
            ports[1].recv(timeout=60)  # node 1 forwards to 2, which never answers
        assert failure.value.child == 2
        assert failure.value.group == 5
        assert time.monotonic() - started < 45
        ports[0].flush(timeout=30)  # the root's child (1) acknowledged: no error there
        assert cluster.stats(1)["mcast"]["children_dead"] == 1
        for node in (0, 1):
            ports[node].close()
