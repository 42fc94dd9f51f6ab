"""The ACK piggy-backed on reverse data (wire flag ACKED) over a bad network: NicCores sending
to each other both ways at once, so most ACKs ride on data, still deliver every message once,
in order, and complete every send exactly once, in both recovery modes."""

from __future__ import annotations

import pytest

from nicd import hostlink as hl
from nicd.config import NicConfig
from tests.unit.netsim import BadNetwork, NicNet, sent_handles, test_config

NODES = 3
PER_PAIR = 24


def port(node: int) -> int:
    """Each node's port: all different, so a stream key with two ports swapped names none."""
    return 5 + 2 * node


def piggybacked(net: NicNet) -> int:
    return sum(
        core.stats()["transport"]["acks_piggybacked"]  # type: ignore[index]
        for core in net.cores
    )


@pytest.mark.parametrize("recovery", ["gbn", "selective"])
@pytest.mark.parametrize("seed", range(6))
def test_traffic_both_ways_at_30_percent_loss_is_exactly_once_in_order(
    recovery: str, seed: int
) -> None:
    # A delayed ACK (ack_delay_s > 0) is what a data packet going back can carry.
    transport = test_config(recovery=recovery, ack_delay_s=0.002, ack_every=8)
    configs = [NicConfig(i, "/tmp", transport=transport) for i in range(NODES)]
    bad = BadNetwork(seed, loss=0.3, dup=0.02, reorder=0.02, corrupt=0.01)
    net = NicNet(configs, bad)
    for node in range(NODES):
        net.request(node, hl.OpenReq(port(node)))
        net.request(node, hl.ProvideReq(NODES * PER_PAIR))
    sent: dict[int, list[int]] = {node: [] for node in range(NODES)}
    for i in range(PER_PAIR):  # interleaved, so each stream has data going back
        for src in range(NODES):
            for dst in range(NODES):
                if dst != src:
                    handle = i * NODES + dst
                    net.request(
                        src, hl.SendReq(handle, dst, port(dst), f"{src}>{dst}:{i}".encode())
                    )
                    sent[src].append(handle)

    def completed(node: int) -> list[int]:
        return sent_handles(net.hosts[node])

    net.run(lambda: all(len(completed(n)) == len(sent[n]) for n in range(NODES)),
            max_events=200_000)  # fmt: skip
    for node in range(NODES):
        assert sorted(completed(node)) == sorted(sent[node])
        assert not net.records(node, hl.ErrorEvent)
        got = [r for r in net.records(node, hl.RecvEvent) if isinstance(r, hl.RecvEvent)]
        for src in range(NODES):
            if src != node:
                want = [f"{src}>{node}:{i}".encode() for i in range(PER_PAIR)]
                assert [r.payload for r in got if r.src_node == src] == want
    assert piggybacked(net) > 0  # the path under test was taken
    for core in net.cores:
        drops = core.stats()["transport"]["drops"]  # type: ignore[index]
        assert "unknown_stream" not in drops  # every piggy-backed ACK found its stream
