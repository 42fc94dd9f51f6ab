"""Selective recovery (``recovery="selective"``): held packets, SACK, hole-only resends, the
tail-loss probe, refusals, bounds, mixed modes; exactly-once in-order delivery at 30 % loss +
duplication + reordering over many seeds, on the fake-clock netsim."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nicd.core.actions import SendPacket
from nicd.core.stats import TransportStats
from nicd.errors import UsageError
from nicd.link.channels import Transport
from nicd.link.reliable import Admission, GbnReceiver, Verdict
from nicd.link.selective import HoldBuffer, sacked
from nicd.link.wire import ControlPacket, DataPacket, FragFlags, MsgType
from tests.unit.factories import data_packet
from tests.unit.netsim import LINK_DELAY_S, BadNetwork, Net, Transit, perfect, test_config

if TYPE_CHECKING:
    from nicd.config import TransportConfig

MTU = 64
Stream = tuple[int, int, int, int]  # src node, src port, dst node, dst port
SELECTIVE = test_config(recovery="selective")
GBN = test_config()


def delivered_by_stream(net: Net) -> dict[Stream, list[bytes]]:
    got: dict[Stream, list[bytes]] = defaultdict(list)
    for dst, node in enumerate(net.nodes):
        for d in node.delivered:
            got[(d.src_node, d.src_port, dst, d.port)].append(d.payload)
    return got


def outcomes(net: Net) -> int:
    return sum(len(n.completed) + len(n.failed) for n in net.nodes)


def with_modes(net: Net, configs: list[TransportConfig]) -> Net:
    """Give node i of ``net`` a transport with ``configs[i]`` (before any traffic)."""
    for i, config in enumerate(configs):
        node = net.nodes[i]
        node.transport = Transport(i, config, node.ports.verdict)
    return net


def recovery(net: Net, node: int) -> dict[str, int]:
    return net.nodes[node].transport.stats()["recovery"]  # type: ignore[return-value]


def lose_first_copies(wanted: set[int]) -> object:
    """A route losing the first copy of node 0's data packets whose seq is in ``wanted``."""
    seen: set[int] = set()

    def route(t: Transit) -> list[tuple[float, bytes]]:
        p = t.packet
        if t.src == 0 and isinstance(p, DataPacket) and p.seq in wanted and p.seq not in seen:
            seen.add(p.seq)
            return []
        return perfect(t)

    return route


# -- the mechanism, scripted ------------------------------------------------------------------


def test_selective_resends_only_the_lost_packet() -> None:
    # One 8-packet message; the first copy of seq 2 is lost. Go-back-N sends 2..7 again;
    # selective holds 3..7 at the receiver, SACKs them and the sender resends only 2.
    payload = bytes(range(256)) * 2  # 8 packets of 64 bytes
    for config, resent in ((GBN, [2, 3, 4, 5, 6, 7]), (SELECTIVE, [2])):
        net = Net(2, config, lose_first_copies({2}))  # type: ignore[arg-type]
        net.send(0, 1, payload)
        net.run()
        seqs = [p.seq for p in net.data_sent(src=0)]
        assert seqs[:8] == list(range(8))
        assert seqs[8:] == resent, config.recovery
        assert [d.payload for d in net.nodes[1].delivered] == [payload]
        assert len(net.nodes[0].completed) == 1
    assert recovery(net, 1)["held"] == 5
    assert recovery(net, 1)["sacks_sent"] >= 1
    assert recovery(net, 0)["holes_resent"] == 1
    sacks = [c for c in net.controls(src=1) if c.msg_type is MsgType.SACK]
    assert sacked(sacks[0].seq, sacks[0].sack)[0] == 3


def test_a_lost_tail_is_recovered_by_the_tail_probe_not_the_timeout() -> None:
    # The last two packets of a message are lost the first time: nothing after them makes
    # the receiver speak, so only a timer can find them. The tail-loss probe resends the
    # last one after ~2 RTT; the SACK it provokes reveals the hole before it.
    payload = bytes(range(256)) * 2  # seqs 0..7
    config = test_config(recovery="selective", rto_initial_s=0.2, rto_min_s=0.2, rto_max_s=1.0)
    net = Net(2, config, lose_first_copies({6, 7}))  # type: ignore[arg-type]
    net.send(0, 1, payload)
    net.run()
    assert [d.payload for d in net.nodes[1].delivered] == [payload]
    stats = net.nodes[0].transport.stats()
    assert stats["timeouts"] == 0
    assert recovery(net, 0)["tail_probes"] == 1
    assert [p.seq for p in net.data_sent(src=0)][8:] == [7, 6]
    assert net.now < config.rto_min_s


def lose_copies(counts: dict[int, int], *, slow_until: float = 0.0) -> object:
    """A route losing the first ``counts[seq]`` copies of node 0's data packet ``seq``; the
    controls node 1 sends before ``slow_until`` take 200 us longer (a queue that drains)."""
    seen: Counter[int] = Counter()

    def route(t: Transit) -> list[tuple[float, bytes]]:
        p = t.packet
        if t.src == 0 and isinstance(p, DataPacket) and seen[p.seq] < counts.get(p.seq, 0):
            seen[p.seq] += 1
            return []
        if t.src == 1 and t.now < slow_until:
            return [(LINK_DELAY_S + 0.0002, t.datagram)]
        return perfect(t)

    return route


def test_a_lost_resend_is_found_by_the_next_sack_not_by_a_timer() -> None:
    # RACK: seq 2 is lost, and so is its first resend. The packets sent after that resend
    # (8 and 9, as the window slid) come back SACKed, which shows the resend lost: it goes out
    # a third time at once, with no timeout and no tail probe. The first ACKs are slow, so
    # SRTT is longer than the round trip of 8 and 9: a sender that resends a hole at most
    # once per SRTT (before RACK) waits for the tail probe instead.
    payload = bytes(range(256)) * 4  # 16 packets of 64 bytes
    net = Net(2, SELECTIVE, lose_copies({2: 2}, slow_until=0.00015))  # type: ignore[arg-type]
    net.send(0, 1, payload)
    net.run()
    assert [d.payload for d in net.nodes[1].delivered] == [payload]
    stats = net.nodes[0].transport.stats()
    assert stats["timeouts"] == 0
    assert "tail_probes" not in recovery(net, 0)
    assert [p.seq for p in net.data_sent(src=0, seq=2)] == [2, 2, 2]
    assert stats["retransmissions"] == 2  # nothing but the two resends of seq 2
    assert recovery(net, 0)["resends_lost"] == 1


def test_no_timeout_while_sacks_bring_news() -> None:
    # A long message, 10 % of the first copies lost: every hole is found by RACK from the
    # SACKs of later packets, none by the tail probe, and the RTO never fires.
    payload = bytes(range(256)) * 64  # 256 packets
    lost = {seq: 1 for seq in range(3, 256, 10)}
    config = test_config(recovery="selective", rto_initial_s=0.05, rto_min_s=0.05)
    net = Net(2, config, lose_copies(lost))  # type: ignore[arg-type]
    net.send(0, 1, payload)
    net.run()
    assert [d.payload for d in net.nodes[1].delivered] == [payload]
    stats = net.nodes[0].transport.stats()
    assert stats["timeouts"] == 0
    assert "tail_probes" not in recovery(net, 0)
    assert recovery(net, 0)["holes_resent"] == len(lost)
    assert net.now < config.rto_min_s


def test_after_reordering_a_late_packet_gets_a_reordering_window_before_its_resend() -> None:
    # Seq 1's first copy is late (reordered), not lost: RACK resends it (no reordering was
    # seen yet, so the window is zero); the ACK comes back sooner than any round trip after
    # the resend, so the original arrived: the sender learns that this network reorders.
    # Seq 9's first copy is late again, by less than SRTT / 4: this time the reorder timer
    # waits for it and nothing is resent.
    late: dict[int, float] = {1: 0.00006, 9: 0.00001}

    def route(t: Transit) -> list[tuple[float, bytes]]:
        p = t.packet
        if t.src == 0 and isinstance(p, DataPacket) and p.seq in late:
            return [(LINK_DELAY_S + late.pop(p.seq), t.datagram)]
        return perfect(t)

    net = Net(2, SELECTIVE, route)
    net.send(0, 1, bytes(64 * 8))  # seqs 0..7
    net.run()
    assert [p.seq for p in net.data_sent(src=0)].count(1) == 2  # one spurious resend
    sender = net.nodes[0].transport._senders[(0, 1, 0)]
    assert sender.recovery.rack.reordering
    net.send(0, 1, bytes(64 * 8))  # seqs 8..15
    net.run()
    assert [p.seq for p in net.data_sent(src=0)].count(9) == 1
    assert len(net.nodes[1].delivered) == 2


def test_a_lost_tail_probe_gets_a_full_rto_from_the_probe() -> None:
    # The tail (6, 7) is lost and so is the probe (7's second copy): the RTO, re-armed when
    # the probe went (RFC 8985 §7.3), fires a full RTO after the probe, not after 6 and 7
    # first went out (which under load left the probe's answer almost no time).
    config = test_config(recovery="selective", rto_initial_s=0.2, rto_min_s=0.2, rto_max_s=1.0)
    net = Net(2, config, lose_copies({6: 1, 7: 2}))  # type: ignore[arg-type]
    net.send(0, 1, bytes(range(256)) * 2)  # seqs 0..7
    net.run(lambda: recovery(net, 0).get("tail_probes", 0) == 1)
    probe_at = net.now
    sender = net.nodes[0].transport._senders[(0, 1, 0)]
    assert sender.rto_deadline() == pytest.approx(probe_at + 0.2)
    net.run()
    assert len(net.nodes[1].delivered) == 1
    assert net.nodes[0].transport.stats()["timeouts"] == 1


def test_gbn_waits_for_the_timeout_on_the_same_lost_tail() -> None:
    config = test_config(rto_initial_s=0.2, rto_min_s=0.2, rto_max_s=1.0)
    net = Net(2, config, lose_first_copies({6, 7}))  # type: ignore[arg-type]
    net.send(0, 1, bytes(512))
    net.run()
    assert net.nodes[0].transport.stats()["timeouts"] == 1
    assert "tail_probes" not in recovery(net, 0)


def test_a_refusal_discards_what_was_held_and_the_stream_still_delivers_in_order() -> None:
    # Message 1 (seq 0) is admitted; message 2's FIRST (seq 1) is lost, later fragments are
    # held; when it arrives the port has no token: NO_BUFFER, the held fragments are dropped,
    # the sender forgets its SACK marks and resends from seq 1 after RESUME.
    net = Net(2, SELECTIVE, lose_first_copies({1}))  # type: ignore[arg-type]
    net.nodes[1].ports.open(0, tokens=1)
    first, second = b"a" * 10, bytes(range(200))  # 1 packet, then 4 packets (seqs 1..4)
    net.send(0, 1, first)
    net.send(0, 1, second)
    net.advance(0.05)
    receiver = net.nodes[1]
    assert [d.payload for d in receiver.delivered] == [first]
    assert recovery(net, 1)["held_discarded"] >= 1
    assert list(receiver.transport.stats()["nacks_sent"]) == ["no_buffer"]  # type: ignore[call-overload]
    receiver.ports.tokens[0] = 5
    net.apply(1, receiver.transport.resume_port(0, now=net.now))
    net.run()
    assert [d.payload for d in receiver.delivered] == [first, second]
    assert len(net.nodes[0].completed) == 2
    assert net.nodes[0].failed == []


def test_the_receiver_holds_at_most_the_window_and_counts_the_rest() -> None:
    config = test_config(recovery="selective", window=4)
    stats = TransportStats()
    r = GbnReceiver(node_id=3, src_node=1, src_port=2, dst_port=4, config=config, stats=stats)

    def admit(first: DataPacket) -> Verdict:
        return Admission.OK, []

    for seq in (1, 2, 3, 4, 5, 9, 3):
        p = data_packet(seq=seq, flags=FragFlags.ONLY, payload=b"x", msg_len=1)
        assert r.on_data(p, now=0.0, admit=admit) == []
    assert stats.recovery["held"] == 4
    assert stats.drops["beyond_window"] == 2
    assert stats.drops["duplicate"] == 1
    ack = r.take_ack(0.0)
    assert ack is not None
    assert isinstance(ack.packet, ControlPacket)
    assert ack.packet.msg_type is MsgType.SACK
    assert (ack.packet.seq, sacked(ack.packet.seq, ack.packet.sack)) == (0, [1, 2, 3, 4])
    p0 = data_packet(seq=0, flags=FragFlags.ONLY, payload=b"x", msg_len=1)
    out = r.on_data(p0, now=0.0, admit=admit)
    assert r.expected == 5  # 0 and the four held ones, in order
    assert sum(1 for a in out if not isinstance(a, SendPacket)) == 5
    assert stats.recovery["held_taken"] == 4


def test_hold_buffer_bitmap_round_trips_through_sacked() -> None:
    buf = HoldBuffer(window=1000)
    assert buf.limit == 64
    for seq in (11, 12, 20, 74):
        buf.hold(seq, data_packet(seq=seq))
    assert sacked(10, buf.bitmap(10)) == [11, 12, 20, 74]
    assert buf.fits(74, 10)
    assert not buf.fits(75, 10)
    assert not buf.fits(10, 10)
    assert buf.clear() == 4
    assert len(buf) == 0


def test_an_unknown_recovery_mode_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="recovery"):
        Transport(0, test_config(recovery="sack"), lambda first: (Admission.OK, []))


# -- exactly once, in order, under a bad network ----------------------------------------------


def all_pairs(net: Net, rng: random.Random, count: int) -> tuple[dict[Stream, list[bytes]], int]:
    n = len(net.nodes)
    sent: dict[Stream, list[bytes]] = defaultdict(list)
    total = 0
    for _ in range(count):
        src, dst = rng.randrange(n), rng.randrange(n)
        sport, dport = rng.randrange(2), rng.randrange(2)
        data = rng.randbytes(rng.randrange(0, 12 * MTU))
        net.send(src, dst, data, src_port=sport, dst_port=dport)
        sent[(src, sport, dst, dport)].append(data)
        total += 1
        net.advance(rng.uniform(0, 0.002))
    return sent, total


def check_exactly_once(net: Net, sent: dict[Stream, list[bytes]], total: int) -> None:
    net.run(lambda: outcomes(net) == total, max_events=500_000)
    net.run(max_events=500_000)
    assert delivered_by_stream(net) == sent  # exactly once, in order, byte-identical
    for node in net.nodes:
        assert node.failed == []
        assert node.dead == []
        assert node.transport.next_deadline() is None


MODES = {
    "selective": [SELECTIVE] * 3,
    "gbn": [GBN] * 3,
    "mixed": [SELECTIVE, GBN, SELECTIVE],
}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("seed", range(40))
def test_all_pairs_at_30_percent_loss_dup_reorder_deliver_exactly_once_in_order(
    mode: str, seed: int
) -> None:
    bad = BadNetwork(seed, loss=0.3, dup=0.1, reorder=0.2, corrupt=0.02)
    net = with_modes(Net(3, GBN, bad), MODES[mode])
    sent, total = all_pairs(net, random.Random(seed), 24)
    check_exactly_once(net, sent, total)
    if mode == "selective":
        assert sum(recovery(net, i).get("held", 0) for i in range(3)) > 0


@settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    loss=st.floats(0, 0.4),
    dup=st.floats(0, 0.2),
    reorder=st.floats(0, 0.3),
    window=st.integers(1, 80),
    modes=st.lists(st.sampled_from(["gbn", "selective"]), min_size=2, max_size=3),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_mix_of_modes_windows_and_faults_delivers_exactly_once_in_order(
    loss: float, dup: float, reorder: float, window: int, modes: list[str], seed: int
) -> None:
    configs = [test_config(recovery=m, window=window) for m in modes]
    bad = BadNetwork(seed, loss=loss, dup=dup, reorder=reorder)
    net = with_modes(Net(len(modes), configs[0], bad), configs)
    sent, total = all_pairs(net, random.Random(seed), 12)
    check_exactly_once(net, sent, total)


def test_nicd_takes_recovery_from_its_command_line_and_defaults_to_gbn() -> None:
    from nicd.__main__ import build_parser, config_from_args

    base = ["--node-id", "0", "--run-dir", "/r"]
    assert config_from_args(build_parser().parse_args(base)).transport.recovery == "gbn"
    args = build_parser().parse_args([*base, "--recovery", "selective"])
    assert config_from_args(args).transport.recovery == "selective"
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--recovery", "sack"])
