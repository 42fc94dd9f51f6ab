"""GRIM on the NIC (nicd.grim.service through NicCore): RM-V/RM-P/RM-RV, the translation cache with
host upcalls, statuses for every refusal, and the AM registry; two cores on netsim's virtual
network (which fails when it does not settle)."""

from __future__ import annotations

import struct

from nicd import hostlink as hl
from nicd.core.actions import ToHost
from nicd.grim.amregistry import decode_reply, encode_request
from nicd.hostlink.grim import (
    NIC_PORT,
    NOTIFY_P,
    READ_META,
    RmFlags,
    RmLanded,
    RmMapReq,
    RmStatus,
    RmStatusEvent,
    RmUnmapReq,
    RmUpcallSignals,
    RmWatch,
    RmXlateReply,
    RmXlateReq,
)
from nicd.link.wire import MsgType
from tests.unit.netsim import NicNet

ADDRS = {0: ("127.0.0.1", 1001), 1: ("127.0.0.1", 1002)}
PORT = 3
TICK = 0.001
VBASE = 0x1000_0000


class Pair(NicNet):
    """Two NICs, one host connection (conn 1, port 3) each, on the shared virtual network;
    each host answers translation upcalls from its ``kernel`` map."""

    def __init__(self) -> None:
        super().__init__(2, answer=self._upcall)
        self.memory = [bytearray(4096), bytearray(4096)]
        self.host = self.hosts
        self.kernel: list[dict[int, tuple[int, int, int]]] = [
            {},
            {},
        ]  # vaddr -> (size, region, off)
        for n, core in enumerate(self.cores):
            core.on_host(1, hl.OpenReq(PORT), now=0.0)
            core.on_host(1, hl.ProvideReq(16), now=0.0)
            req = hl.RegisterReq(1, 4096, "seg")
            assert core.on_register(1, req, memoryview(self.memory[n]), now=0.0) == [
                ToHost(1, hl.Registered(1))
            ]

    def block(self, node: int, vaddr: int, size: int, offset: int, *, static: bool) -> None:
        self.kernel[node][vaddr] = (size, 1, offset)
        if static:
            self.request(node, RmMapReq(vaddr, size, 1, offset))
            self.run()

    def host_send(
        self,
        node: int,
        dst_port: int,
        msg_type: MsgType,
        payload: bytes,
        handler: int = 0,
        args: tuple[int, int, int, int] = (0, 0, 0, 0),
        dst: int | None = None,
    ) -> None:
        dst_node = 1 - node if dst is None else dst
        self.request(node, hl.SendReq(1, dst_node, dst_port, payload, int(msg_type), handler, args))
        self.run()

    def _upcall(self, node: int, record: hl.HostRecord) -> hl.HostRecord | None:
        return self._answer(node, record) if isinstance(record, RmXlateReq) else None

    def _answer(self, node: int, rec: RmXlateReq) -> RmXlateReply:
        for vaddr, (size, region, off) in self.kernel[node].items():
            if vaddr <= rec.vaddr < vaddr + size:
                return RmXlateReply(rec.vaddr, vaddr, size, region, off)
        return RmXlateReply(rec.vaddr, 0, 0, 0, 0)

    def statuses(self, node: int) -> list[tuple[int, int]]:
        return [(r.req_id, r.status) for r in self.host[node] if isinstance(r, RmStatusEvent)]

    def xlate(self, node: int) -> dict[str, int]:
        stats = self.cores[node].stats()["grim"]
        assert isinstance(stats, dict)
        return stats["xlate"][str(PORT)]  # type: ignore[no-any-return]


def test_rm_v_static_hit_writes_data_and_notify_word_then_reports_ok() -> None:
    p = Pair()
    p.block(1, VBASE, 256, 0, static=True)
    args = (VBASE + 10, VBASE + 200, 77, 5)
    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"hello", int(RmFlags.NOTIFY), args)
    assert p.memory[1][10:15] == b"hello"
    assert struct.unpack_from("<I", p.memory[1], 200)[0] == 77
    assert p.statuses(0) == [(5, RmStatus.OK)]
    assert p.xlate(1)["hits_static"] == 2
    assert p.xlate(1)["misses"] == 0
    assert not p.host[1]  # the target host was not involved


def test_rm_v_miss_asks_the_host_once_fills_the_dynamic_region_and_then_hits() -> None:
    p = Pair()
    p.block(1, VBASE, 256, 512, static=False)
    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"abc", 0, (VBASE + 1, 0, 0, 9))
    assert p.memory[1][513:516] == b"abc"
    assert [r for r in p.host[1] if isinstance(r, RmXlateReq)] == [RmXlateReq(VBASE + 1, 3)]
    assert p.statuses(0) == [(9, RmStatus.OK)]
    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"xyz", 0, (VBASE + 100, 0, 0, 10))
    assert p.memory[1][612:615] == b"xyz"
    x = p.xlate(1)
    assert x["fills"] == 1
    assert x["hits_dynamic"] >= 2
    assert x["misses"] >= 1


def test_an_upcall_signals_the_host_after_its_record_only_while_the_port_asked() -> None:
    """The NIC's interrupt for a translation upcall (a host computing outside the library
    answers it from its SIGUSR1 handler): SIGUSR1 at the stated pid, after the upcall record,
    once per upcall, and never on a port that did not ask or stopped asking."""
    p = Pair()
    for offset, base in enumerate((VBASE, VBASE + 0x1000, VBASE + 0x2000)):
        p.block(1, base, 64, 64 * offset, static=False)
    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"a", 0, (VBASE, 0, 0, 1))
    assert p.signals[1] == []  # not asked: the upcall is answered, no signal
    p.request(1, RmUpcallSignals(True, 4242))
    p.run()
    before = len(p.host[1])
    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"b", 0, (VBASE + 0x1000, 0, 0, 2))
    assert [(s.conn, s.pid) for s in p.signals[1]] == [(1, 4242)]
    assert RmXlateReq(VBASE + 0x1000, 1) in p.host[1][before:]
    assert p.statuses(0) == [(1, RmStatus.OK), (2, RmStatus.OK)]
    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"c", 0, (VBASE + 0x1000, 0, 0, 3))
    assert len(p.signals[1]) == 1  # a hit: no upcall, no signal
    p.request(1, RmUpcallSignals(False, 4242))
    p.run()
    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"d", 0, (VBASE + 0x2000, 0, 0, 4))
    assert len(p.signals[1]) == 1
    assert p.statuses(0)[-1] == (4, RmStatus.OK)


def test_a_watched_port_hears_of_every_write_landing_plain_or_notify_and_only_then() -> None:
    """A host waiting on its memory arms a watch: the NIC answers at once (so what landed
    before is in memory by then), then reports each RM-V / RM-P write landing there, with a
    notify word or without; unwatched, a plain write tells the target host nothing."""
    p = Pair()
    p.block(1, VBASE, 256, 0, static=True)

    def landed() -> int:
        return sum(isinstance(r, RmLanded) for r in p.host[1])

    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"a", 0, (VBASE, 0, 0, 1))
    assert landed() == 0
    p.request(1, RmWatch(True))
    p.run()
    assert landed() == 1  # the armed marker
    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"b", 0, (VBASE + 1, 0, 0, 2))
    assert landed() == 2
    p.host_send(
        0, PORT, MsgType.RM_WRITE_V, b"c", int(RmFlags.NOTIFY), (VBASE + 2, VBASE + 8, 9, 3)
    )
    assert landed() == 3
    flags = int(RmFlags.RM_API)
    p.host_send(0, PORT, MsgType.RM_WRITE_P, b"d", flags, (1, 16, 4, 0))
    assert landed() == 4
    assert bytes(p.memory[1][0:3]) == b"abc"
    assert p.memory[1][16:17] == b"d"
    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"e", 0, (VBASE + 0x1000, 0, 0, 5))
    assert landed() == 4  # refused (no translation): nothing landed
    p.request(1, RmWatch(False))
    p.run()
    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"f", 0, (VBASE + 3, 0, 0, 6))
    assert landed() == 4
    assert [s for _, s in p.statuses(0)] == [0, 0, 0, 0, RmStatus.NO_TRANSLATION, 0]


def test_unmap_makes_later_writes_fail_with_no_translation() -> None:
    p = Pair()
    p.block(1, VBASE, 64, 0, static=True)
    del p.kernel[1][VBASE]
    p.request(1, RmUnmapReq(VBASE))
    p.run()
    p.host_send(0, PORT, MsgType.RM_WRITE_V, b"no", 0, (VBASE, 0, 0, 3))
    assert p.statuses(0) == [(3, RmStatus.NO_TRANSLATION)]
    assert p.memory[1] == bytearray(4096)


def test_refusals_report_their_reason_and_write_nothing() -> None:
    p = Pair()
    p.block(1, VBASE, 64, 0, static=True)
    cases = [
        (MsgType.RM_WRITE_V, b"x" * 8, 0, (VBASE + 60, 0, 0, 1), RmStatus.OUT_OF_RANGE),
        (MsgType.RM_WRITE_V, b"x", 0, (VBASE + 4096, 0, 0, 2), RmStatus.NO_TRANSLATION),
        (
            MsgType.RM_WRITE_V,
            b"x",
            int(RmFlags.NOTIFY),
            (VBASE, VBASE + 900, 1, 3),
            RmStatus.BAD_NOTIFY,
        ),
        (MsgType.RM_WRITE_P, b"x", int(RmFlags.RM_API), (9, 0, 4, 0), RmStatus.NO_REGION),
        (MsgType.RM_WRITE_P, b"x" * 8, int(RmFlags.RM_API), (1, 4090, 5, 0), RmStatus.OUT_OF_RANGE),
        (
            MsgType.RM_WRITE_P,
            NOTIFY_P.pack(7, 0) + b"x",
            int(RmFlags.RM_API | RmFlags.NOTIFY),
            (1, 0, 6, 0),
            RmStatus.BAD_NOTIFY,
        ),
        (
            MsgType.RM_WRITE_P,
            b"",
            int(RmFlags.RM_API | RmFlags.NOTIFY),
            (1, 0, 7, 0),
            RmStatus.BAD_NOTIFY,
        ),
    ]
    for msg_type, payload, flags, args, _ in cases:
        p.host_send(0, PORT, msg_type, payload, flags, args)
    assert p.statuses(0) == [
        (c[3][3] if c[0] is MsgType.RM_WRITE_V else c[3][2], c[4]) for c in cases
    ]
    assert p.memory[1] == bytearray(4096)


def test_rm_p_places_without_translation_and_sets_the_physical_notify_word() -> None:
    p = Pair()
    payload = NOTIFY_P.pack(1, 100) + b"phys"
    p.host_send(
        0,
        PORT,
        MsgType.RM_WRITE_P,
        payload,
        int(RmFlags.RM_API | RmFlags.NOTIFY),
        (1, 40, 8, 0xDEADBEEF),
    )
    assert p.memory[1][40:44] == b"phys"
    assert struct.unpack_from("<I", p.memory[1], 100)[0] == 0xDEADBEEF
    assert p.statuses(0) == [(8, RmStatus.OK)]
    assert p.xlate(1)["misses"] == 0
    assert p.xlate(1)["hits"] == 0


def test_rm_rv_read_fetches_remote_data_into_the_readers_block_with_notify() -> None:
    p = Pair()
    p.memory[1][300:310] = b"0123456789"
    p.block(1, VBASE, 1024, 0, static=True)
    p.block(0, VBASE, 1024, 0, static=False)  # the reply address misses at the reader
    meta = READ_META.pack(VBASE + 900, 42)
    p.host_send(0, PORT, MsgType.RM_READ, meta, 0, (VBASE + 302, 6, VBASE + 16, 11))
    assert p.memory[0][16:22] == b"234567"
    assert struct.unpack_from("<I", p.memory[0], 900)[0] == 42
    assert p.statuses(0) == [(11, RmStatus.OK)]
    assert p.xlate(0)["misses"] >= 1
    assert p.xlate(0)["fills"] >= 1


def test_rm_rv_refusals_at_the_target_and_at_the_reader() -> None:
    p = Pair()
    p.block(1, VBASE, 64, 0, static=True)
    meta = READ_META.pack(0, 0)
    p.host_send(0, PORT, MsgType.RM_READ, meta, 0, (VBASE + 60, 8, VBASE, 1))
    p.host_send(0, PORT, MsgType.RM_READ, meta, 0, (VBASE + 999, 8, VBASE, 2))
    p.host_send(0, PORT, MsgType.RM_READ, meta, 0, (VBASE, 8, VBASE + 5000, 3))  # reader: none
    p.host_send(0, PORT, MsgType.RM_READ, b"short", 0, (VBASE, 8, VBASE, 4))
    assert p.statuses(0) == [
        (1, RmStatus.OUT_OF_RANGE),
        (2, RmStatus.NO_TRANSLATION),
        (3, RmStatus.BAD_REPLY),
        (4, RmStatus.BAD_NOTIFY),
    ]
    assert p.memory[0] == bytearray(4096)


def test_mpi_rendezvous_rm_write_p_keeps_its_meaning() -> None:
    p = Pair()
    p.host_send(0, PORT, MsgType.RM_WRITE_P, b"mpi", 0, (1, 8, 5, 6))
    assert p.memory[1][8:11] == b"mpi"
    assert hl.RmWriteEvent(0, PORT, 1, 8, 3, (1, 8, 5, 6)) in p.host[1]


def test_registry_on_node_zero_assigns_ids_and_drops_garbage() -> None:
    p = Pair()
    p.host_send(1, NIC_PORT, MsgType.AM_DATA, encode_request("sync", 4, ["a", "b"]))
    p.host_send(0, NIC_PORT, MsgType.AM_DATA, encode_request("sync", 5, ["b", "c"]), dst=0)
    p.host_send(1, NIC_PORT, MsgType.AM_DATA, b"\xc1garbage")
    replies = [
        decode_reply(r.payload)
        for n in (0, 1)
        for r in p.host[n]
        if isinstance(r, hl.RecvEvent) and r.src_port == NIC_PORT
    ]
    assert (4, {"a": 1, "b": 2}) in replies
    assert (5, {"a": 1, "b": 2, "c": 3}) in replies
    counts = p.cores[0].stats()["grim"]
    assert isinstance(counts, dict)
    assert counts["counts"]["registry_drop_registry_request"] == 1


def test_registry_requests_to_another_node_fail_no_port() -> None:
    p = Pair()
    req = hl.SendReq(4, 1, NIC_PORT, b"x", int(MsgType.AM_DATA))
    p.request(0, req)
    p.run()
    errors = [r for r in p.host[0] if isinstance(r, hl.ErrorEvent)]
    assert [e.reason for e in errors] == ["no_port"]


def test_closing_a_port_forgets_its_translations() -> None:
    p = Pair()
    p.block(1, VBASE, 64, 0, static=True)
    assert p.xlate(1)["static_entries"] == 1
    p.cores[1].on_disconnect(1, now=p.now)
    grim = p.cores[1].stats()["grim"]
    assert isinstance(grim, dict)
    assert str(PORT) not in grim["xlate"]


def test_a_read_longer_than_the_transport_carries_is_refused() -> None:
    p = Pair()
    p.block(1, VBASE, 1024, 0, static=True)
    p.block(0, VBASE, 1024, 0, static=True)
    p.cores[1].grim.max_message = 4
    p.host_send(0, PORT, MsgType.RM_READ, READ_META.pack(0, 0), 0, (VBASE, 6, VBASE, 12))
    assert p.statuses(0) == [(12, RmStatus.OUT_OF_RANGE)]


def test_a_read_flood_at_a_refusing_reader_keeps_the_targets_replies_bounded() -> None:
    """Audit test 15: read replies take no host send token; a reader whose host never
    answers its translation upcall refuses them all, and the target used to queue every one
    (up to 16 MiB each). Now at most ``max_nic_sends`` are in flight; a refused read is
    answered BUSY while a slot is free, and dropped (counted) when none is."""
    p = Pair()
    p.block(1, VBASE, 4096, 0, static=True)
    silent = p.answer
    p.answer = lambda node, rec: None if node == 0 else silent(node, rec)  # type: ignore[misc]
    quota = p.cores[1].nic_sends
    quota.max_sends, quota.max_bytes = 8, 4 * 1024
    meta = READ_META.pack(0, 0)
    reads = 100
    for req in range(reads):
        p.request(0, hl.SendReq(1, 1, PORT, meta, int(MsgType.RM_READ), 0,
                                (VBASE, 1024, VBASE + 8192 + req, req)))  # fmt: skip
    run_for(p, 5.0)
    stats = quota.stats()
    assert stats["in_flight"] <= 8
    assert stats["bytes_in_flight"] <= 4 * 1024
    refused = stats.get("refused_sends", 0) + stats.get("refused_bytes", 0)
    assert stats["admitted"] + refused > reads  # every read and every BUSY asked for a slot
    assert p.cores[1].link.drops["nic_send_quota"] > 0
    p.answer = silent  # the reader's host wakes up: no translation there, replies refused
    for rec in [r for r in p.host[0] if isinstance(r, RmXlateReq)]:
        p.request(0, p._answer(0, rec))
    run_for(p, 30.0)
    assert p.cores[1].nic_sends.stats()["in_flight"] == 0  # nothing stays queued


def run_for(net: NicNet, seconds: float) -> None:
    """Step the network for ``seconds`` of virtual time (or until it is idle)."""
    end = net.now + seconds
    for _ in range(200_000):
        if net.now >= end or not net.step():
            return
    raise AssertionError("the network did not get through the time")


def test_a_peer_probing_many_addresses_cannot_grow_upcalls_or_answers_without_bound() -> None:
    """Audit finding 6e: every vaddr a peer probes (each on its own stream) used to add an
    upcall and, once answered 'nothing there', a remembered answer, without limit."""
    from nicd.grim.service import MAX_NEGATIVE, MAX_UPCALLS_PER_PORT
    from nicd.link.wire import DataPacket, FragFlags

    p = Pair()
    grim = p.cores[1].grim
    upcalls = 0
    for i in range(MAX_UPCALLS_PER_PORT * 3):
        first = DataPacket(MsgType.RM_WRITE_V, FragFlags(0), 0, 0, 0, i % 200 + 1, 1, PORT, 1,
                           0, b"x", args=(VBASE + 16 * i, 0, 0, i))  # fmt: skip
        verdict = grim.admit(first)
        assert verdict is not None
        upcalls += len(verdict[1])
    assert upcalls == MAX_UPCALLS_PER_PORT
    assert grim.counts["upcalls_deferred"] == MAX_UPCALLS_PER_PORT * 2
    state = p.cores[1].ports.get(PORT)
    assert state is not None
    for i in range(MAX_NEGATIVE + 100):  # answers the NIC never asked for: still bounded
        grim.on_host(state, RmXlateReply(VBASE + i, 0, 0, 0, 0), now=p.now)
    assert len(grim._negative) <= MAX_NEGATIVE
    assert grim.counts["negative_evicted"] >= 100


def test_a_registry_table_past_the_message_size_is_never_sent_truncated_or_dropped() -> None:
    """Audit test 14: a name flood at a NIC whose largest message is 2 KiB. Every request is
    answered with a reply that fits; the names that do not fit are refused and counted."""
    from dataclasses import replace as dc_replace

    from nicd.config import NicConfig

    small = NicConfig(0, "/tmp", max_message=2048)
    net = NicNet([small, dc_replace(small, node_id=1)])
    for core in net.cores:
        core.on_host(1, hl.OpenReq(PORT), now=0.0)
        core.on_host(1, hl.ProvideReq(64), now=0.0)
    for req in range(1, 11):
        names = [f"flood_{req}_{i}_" + "n" * 20 for i in range(12)]
        net.request(1, hl.SendReq(req, 0, NIC_PORT, encode_request("sync", req, names),
                                  int(MsgType.AM_DATA)))  # fmt: skip
        net.run()
    replies = [r for r in net.hosts[1] if isinstance(r, hl.RecvEvent) and r.src_port == NIC_PORT]
    assert sorted(decode_reply(r.payload)[0] for r in replies) == list(range(1, 11))
    assert all(len(r.payload) <= 2048 for r in replies)
    stats = net.cores[0].stats()
    assert stats["link"]["drops"].get("grim_reply_unsendable", 0) == 0
    assert stats["grim"]["registry"]["refused_full"] > 0
