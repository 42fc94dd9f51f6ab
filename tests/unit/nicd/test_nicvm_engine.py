"""The NICVM engine inside NicCore, on netsim's virtual network: module lifecycle, the
receive-path hook, Fig 4.8 sends, deferred and consumed delivery, failures, garbage and remote
uploads."""

from __future__ import annotations

from dataclasses import replace

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from nicd import hostlink as hl
from nicd.config import NicConfig, NicvmConfig
from nicd.core.actions import NicAction, ToHost, Transmit
from nicd.errors import ProtocolViolation
from nicd.link.wire import MsgType
from nicd.nicvm.limits import DEFAULT_FUEL
from nicd.nicvm.modules import BCAST_BINARY_TREE, NOOP
from nicd.nicvm.packet import encode_preamble
from tests.unit.netsim import NicNet

PORT = 2
CONN = 1
LOOP = "func main()\n    while 1 do\n    end while;\n    return NICVM_RESULT_SUCCESS;\nend func;\n"
CONSUME = "func main()\n    return NICVM_RESULT_PACKET_CONSUMED;\nend func;\n"
DATA = int(MsgType.NICVM_DATA)


class Net(NicNet):
    """N NicCores with NICVM on netsim's virtual network, recording hosts."""

    def __init__(self, n: int, nicvm: NicvmConfig | None = None) -> None:
        config = NicConfig(0, "/tmp", nicvm=nicvm or NicvmConfig())
        super().__init__([replace(config, node_id=i) for i in range(n)], conn=CONN)
        for core in self.cores:
            self.host(core.node_id, hl.OpenReq(PORT))
            self.host(core.node_id, hl.ProvideReq(8))
        for host in self.hosts:
            host.clear()

    def host(self, node: int, record: hl.HostRecord) -> None:
        """Host ``node`` sends ``record`` to its NIC; everything it causes runs to the end."""
        self.request(node, record)
        self.run()

    def direct(self, node: int, record: hl.HostRecord) -> list[tuple[int, NicAction]]:
        """Like `host`, but return the NIC's direct outputs unprocessed."""
        return [(node, a) for a in self.cores[node].on_host(CONN, record, now=self.now)]

    def pump(self, work: list[tuple[int, NicAction]]) -> None:
        """Carry out ``work`` in order, then run the network until it settles."""
        for node, action in work:
            self.apply(node, [action])
        self.run()

    def reply(self, node: int) -> hl.NicvmReply:
        [reply] = self.records(node, hl.NicvmReply)
        self.hosts[node].clear()
        assert isinstance(reply, hl.NicvmReply)
        return reply


def test_default_fuel_matches_the_vm_limit() -> None:
    assert NicvmConfig().fuel == DEFAULT_FUEL


def test_load_list_purge_lifecycle_and_purge_at_close() -> None:
    net = Net(1)
    net.host(0, hl.NicvmLoadReq("a", NOOP))
    assert net.reply(0).ok
    net.host(0, hl.NicvmLoadReq("b", BCAST_BINARY_TREE, persist=True))
    assert net.reply(0).ok
    net.host(0, hl.NicvmListReq())
    listing = net.reply(0).modules
    assert listing is not None
    assert {m["name"]: m["persist"] for m in listing} == {"a": False, "b": True}
    net.host(0, hl.NicvmPurgeReq("a"))
    assert net.reply(0).ok
    net.host(0, hl.NicvmPurgeReq("a"))
    assert not net.reply(0).ok
    net.host(0, hl.NicvmLoadReq("c", NOOP))
    net.hosts[0].clear()
    net.cores[0].on_disconnect(CONN, now=0.0)  # the loading port closes
    engine = net.cores[0].nicvm
    assert engine is not None
    assert sorted(engine.modules) == ["b"]  # only the persistent module outlives it


def test_bad_module_refused_with_line_and_column() -> None:
    net = Net(1)
    net.host(0, hl.NicvmLoadReq("bad", "func main()\n    x = 1;\nend func;\n"))
    reply = net.reply(0)
    assert not reply.ok
    assert (reply.line, reply.column) == (2, 5)
    assert "x" in reply.error
    net.host(0, hl.NicvmLoadReq("", NOOP))
    assert not net.reply(0).ok


def _bcast(n: int, pipelined: bool) -> Net:
    net = Net(n, NicvmConfig(pipelined=pipelined))
    for node in range(n):
        net.host(node, hl.NicvmLoadReq("bc", BCAST_BINARY_TREE))
        net.host(node, hl.NicvmCommReq(5, tuple(range(n))))
        net.hosts[node].clear()
    return net


def test_fig_4_3_broadcast_reaches_every_host_once_and_the_root_consumes() -> None:
    for n in (2, 3, 5, 8):
        for root in (0, n - 1):
            net = _bcast(n, pipelined=False)
            net.host(root, hl.NicvmDelegateReq(9, "bc", root, 5, b"payload", (7, 0, 0, 0)))
            assert net.records(root, hl.NicvmDone) == [hl.NicvmDone(9, "ok", 1)]
            assert net.records(root, hl.RecvEvent) == []  # consumed at the root
            for node in range(n):
                if node != root:
                    [event] = net.records(node, hl.RecvEvent)
                    assert isinstance(event, hl.RecvEvent)
                    assert (event.payload, event.args, event.am_handler, event.mcast_group) == (
                        b"payload", (7, 0, 0, 0), root, 5)  # fmt: skip


def test_sends_one_at_a_time_or_pipelined() -> None:
    for pipelined, expected in ((False, 1), (True, 2)):
        net = _bcast(4, pipelined)
        out = net.direct(0, hl.NicvmDelegateReq(1, "bc", 0, 5, b"x"))
        data = [a for _, a in out if isinstance(a, Transmit) and not a.control]
        assert len(data) == expected


def test_host_delivery_waits_for_the_module_sends() -> None:
    """Node 1 (children 3 and 4 of 5) forwards before its host sees the message."""
    net = _bcast(5, pipelined=False)
    out = net.direct(0, hl.NicvmDelegateReq(1, "bc", 0, 5, b"x"))
    [first] = [a for _, a in out if isinstance(a, Transmit) and not a.control]
    at_node1 = net.cores[1].on_datagram(first.datagram, net.addrs[0], now=net.now)
    assert not [a for a in at_node1 if isinstance(a, ToHost)]  # deferred
    assert [a for a in at_node1 if isinstance(a, Transmit) and not a.control]  # to node 3
    net.pump([(1, a) for a in at_node1] + [(0, a) for _, a in out if a is not first])
    assert len(net.records(1, hl.RecvEvent)) == 1
    engine = net.cores[1].nicvm
    assert engine is not None
    assert engine.modules["bc"].counters["sends"] == 2


def test_fuel_exhaustion_is_reported_and_the_packet_still_delivered() -> None:
    net = Net(2, NicvmConfig(fuel=500))
    net.host(1, hl.NicvmLoadReq("loop", LOOP))
    net.hosts[1].clear()
    body = encode_preamble("loop", 0, 0) + b"data"
    net.host(0, hl.SendReq(3, 1, PORT, body, msg_type=DATA, args=(1, 2, 3, 4)))
    events = net.records(1, hl.RecvEvent)
    assert events == [hl.RecvEvent(0, PORT, b"data", DATA, 0, (1, 2, 3, 4), 0)]
    [report] = net.records(1, hl.NicvmReport)
    assert report == hl.NicvmReport("loop", "out_of_fuel", "out of fuel after 500 instructions", 2)
    # A delegation to it fails with an answer, not a hang.
    net.hosts[1].clear()
    net.host(1, hl.NicvmDelegateReq(4, "loop", 1, 0, b""))
    [done] = net.records(1, hl.NicvmDone)
    assert isinstance(done, hl.NicvmDone)
    assert (done.handle, done.outcome) == (4, "out_of_fuel")
    engine = net.cores[1].nicvm
    assert engine is not None
    assert engine.counters["out_of_fuel"] == 2
    # nicd keeps serving other traffic
    net.host(0, hl.SendReq(5, 1, PORT, b"plain"))
    assert hl.RecvEvent(0, PORT, b"plain") in net.hosts[1]


def test_consumed_packet_is_not_delivered_and_its_receive_token_comes_back() -> None:
    net = Net(2)
    net.host(1, hl.NicvmLoadReq("eat", CONSUME))
    net.hosts[1].clear()
    state = net.cores[1].ports.get(PORT)
    assert state is not None
    tokens = state.receive_tokens
    for i in range(20):  # more than the 8 receive tokens: each comes back
        net.host(0, hl.SendReq(i + 1, 1, PORT, encode_preamble("eat", 0, 0) + b"x",
                               msg_type=DATA))  # fmt: skip
    assert net.records(1, hl.RecvEvent) == []
    assert state.receive_tokens == tokens


def test_garbage_nicvm_packets_are_counted_and_dropped() -> None:
    net = Net(2)
    for i, junk in enumerate(
        [b"", b"\x00", b"\x00\x00\x00\x00\x09ab", b"\x00\x00\x00\x00\x02\xff\xfe"]
    ):
        net.host(0, hl.SendReq(i + 1, 1, PORT, junk, msg_type=DATA))
    assert net.records(1, hl.RecvEvent) == []
    engine = net.cores[1].nicvm
    assert engine is not None
    assert engine.counters["garbage"] == 4
    state = net.cores[1].ports.get(PORT)
    assert state is not None
    assert state.receive_tokens == 8


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=80), st.tuples(*[st.integers(0, 2**32 - 1)] * 4))
def test_any_nicvm_packet_never_crashes_the_nic(junk: bytes, args: tuple[int, ...]) -> None:
    net = Net(2)
    net.host(1, hl.NicvmLoadReq("bc", BCAST_BINARY_TREE))
    a0, a1, a2, a3 = args
    net.host(0, hl.SendReq(1, 1, PORT, junk, msg_type=DATA, args=(a0, a1, a2, a3)))
    net.host(0, hl.SendReq(2, 1, PORT, encode_preamble("bc", 1, 0) + junk, msg_type=DATA))
    net.host(0, hl.SendReq(3, 1, PORT, b"still served"))
    assert hl.RecvEvent(0, PORT, b"still served") in net.hosts[1]


def test_unknown_module_or_communicator_still_delivers() -> None:
    net = Net(2)
    net.host(0, hl.SendReq(1, 1, PORT, encode_preamble("nope", 0, 0) + b"a", msg_type=DATA))
    net.host(1, hl.NicvmLoadReq("bc", BCAST_BINARY_TREE))
    net.host(0, hl.SendReq(2, 1, PORT, encode_preamble("bc", 0, 77) + b"b", msg_type=DATA))
    payloads = [r.payload for r in net.records(1, hl.RecvEvent) if isinstance(r, hl.RecvEvent)]
    assert payloads == [b"a", b"b"]
    net.host(0, hl.NicvmDelegateReq(3, "nope", 0, 0, b""))
    [done] = net.records(0, hl.NicvmDone)
    assert isinstance(done, hl.NicvmDone)
    assert done.outcome == "no_module"


def test_remote_upload_refused_by_default_and_allowed_by_flag() -> None:
    upload = msgpack.packb(["remote", NOOP, False])
    src = int(MsgType.NICVM_SOURCE)
    for allow in (False, True):
        net = Net(2, NicvmConfig(allow_remote_upload=allow))
        net.host(0, hl.SendReq(1, 1, PORT, upload, msg_type=src))
        engine = net.cores[1].nicvm
        assert engine is not None
        assert ("remote" in engine.modules) is allow
        assert engine.counters["remote_upload_refused"] == (not allow)
        assert net.records(1, hl.RecvEvent) == []


def test_disabled_nicvm_refuses_records_and_passes_packets_through() -> None:
    net = Net(2, NicvmConfig(enabled=False))
    net.host(1, hl.NicvmLoadReq("a", NOOP))
    assert not net.reply(1).ok
    body = encode_preamble("a", 0, 0) + b"z"
    net.host(0, hl.SendReq(1, 1, PORT, body, msg_type=DATA))
    assert net.records(1, hl.RecvEvent) == [hl.RecvEvent(0, PORT, body, DATA)]
    net.host(0, hl.NicvmDelegateReq(2, "a", 0, 0, b""))
    [done] = net.records(0, hl.NicvmDone)
    assert isinstance(done, hl.NicvmDone)
    assert done.outcome == "disabled"


def test_nicvm_host_records_round_trip_and_malformed_ones_are_violations() -> None:
    records: list[hl.HostRecord] = [
        hl.NicvmLoadReq("a", "src", True), hl.NicvmPurgeReq("a"), hl.NicvmListReq(),
        hl.NicvmCommReq(3, (0, 1, 2)), hl.NicvmDelegateReq(5, "bc", 1, 2, b"xyz", (1, 2, 3, 4)),
        hl.NicvmReply(False, "bad", 3, 4), hl.NicvmReply(True, modules=[{"name": "a"}]),
        hl.NicvmDone(7, "ok", 1), hl.NicvmReport("a", "fault", "division by zero", 3),
    ]  # fmt: skip
    for record in records:
        [raw] = hl.encode_record(record)
        assert hl.Assembler().feed(raw) == record
    for bad in (bytes([hl.HostOp.NICVM_LOAD]) + msgpack.packb([1, 2]),
                bytes([hl.HostOp.NICVM_COMM]) + msgpack.packb([1, [70000]]),
                bytes([hl.HostOp.NICVM_DELEGATE, 0, 0])):  # fmt: skip
        try:
            hl.Assembler().feed(bad)
        except ProtocolViolation:
            continue
        raise AssertionError(f"{bad!r} was accepted")


def test_port_closing_with_module_sends_in_flight_drops_them_cleanly() -> None:
    net = _bcast(4, pipelined=False)
    out = net.direct(0, hl.NicvmDelegateReq(1, "bc", 0, 5, b"x"))
    closed = net.cores[0].on_disconnect(CONN, now=net.now)
    net.pump(out + [(0, a) for a in closed])
    assert net.records(0, hl.NicvmDone) == []  # nobody left to tell
    engine = net.cores[0].nicvm
    assert engine is not None
    assert engine.stats()["sends_outstanding"] == 0
    assert engine.modules == {}  # purged with its port


# A module that sends every packet it gets to the other rank and to itself ... forever: the
# audit's amplification (finding 4). Each invocation doubles the traffic.
PING_PONG = (
    "func main()\n"
    "    mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, 1 - mpi_get_rank());\n"
    "    mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, 1 - mpi_get_rank());\n"
    "    return NICVM_RESULT_PACKET_CONSUMED;\n"
    "end func;\n"
)


def test_a_module_cannot_amplify_across_nics_forever() -> None:
    net = Net(2, NicvmConfig(pipelined=True, max_hops=6))
    for node in (0, 1):
        net.host(node, hl.NicvmLoadReq("pp", PING_PONG))
        assert net.reply(node).ok
    net.host(0, hl.SendReq(1, 1, PORT, encode_preamble("pp", 0, 0) + b"x", msg_type=DATA))
    engines = [core.nicvm for core in net.cores]
    assert all(e is not None for e in engines)
    invocations = sum(e.modules["pp"].counters["invocations"] for e in engines if e)
    assert invocations == 2**7 - 1  # hops 0..6: a binary tree of depth 6, then nothing
    assert sum(e.counters["hop_limit"] for e in engines if e) == 2 * 2**6
    assert all(e.stats()["sends_outstanding"] == 0 for e in engines if e)


def test_module_sends_outstanding_at_once_are_bounded() -> None:
    net = Net(2, NicvmConfig(pipelined=True, max_hops=40, max_sends_outstanding=8))
    for node in (0, 1):
        net.host(node, hl.NicvmLoadReq("pp", PING_PONG))
        assert net.reply(node).ok
    net.host(0, hl.SendReq(1, 1, PORT, encode_preamble("pp", 0, 0) + b"x", msg_type=DATA))
    engines = [e for e in (core.nicvm for core in net.cores) if e is not None]
    assert sum(e.counters["send_budget"] for e in engines) > 0
    assert all(e.counters["max_sends_outstanding"] <= 8 for e in engines)
