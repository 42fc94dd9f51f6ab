"""Eager and rendezvous protocol of emucluster.p2p.protocol, sans-IO: cores wired back to back."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emucluster.p2p.envelope import ANY_SOURCE, ANY_TAG
from emucluster.p2p.protocol import (
    P2P,
    RECV_MOVES,
    RTS_HEAD,
    SEND_MOVES,
    TERMINAL,
    Event,
    Grant,
    Outcome,
    ProtocolError,
    RecvOp,
    RecvState,
    Release,
    SendData,
    SendOp,
    SendState,
    Transmit,
    cts_args,
)
from nicd.link.wire import MsgType

CTX = 0
LIMIT = 64  # small eager limit so rendezvous is cheap to exercise
CHUNK = 50


class Net:
    """N cores; actions queue per destination in order (the NIC's per-stream order) and are
    delivered by `pump`. ``rm`` grants regions (RM writes) instead of GM_DATA messages."""

    def __init__(self, n: int, *, rm: bool = False) -> None:
        self.cores = [P2P(i, n, eager_limit=LIMIT, chunk_bytes=CHUNK) for i in range(n)]
        self.wire: list[tuple[int, int, object]] = []  # (src, dst, action)
        self.rm = rm
        self.released: list[tuple[int, int]] = []
        self.grants = 0
        self.chunks: list[tuple[int, SendOp]] = []  # chunks handed over, SENT not told yet
        self.auto_sent = True
        """Tell each chunk's SENT once the wire drained (as the NIC would)."""

    def do(self, src: int, actions: list[object]) -> None:
        for action in actions:
            if isinstance(action, Grant):
                self.grants += 1
                region = 7 if self.rm else 0
                args = cts_args(action.send_id, action.recv_id, region)
                self.wire.append((src, action.dst_node, ("msg", MsgType.MPI_CTS, args, b"")))
            elif isinstance(action, Transmit):
                item = ("msg", action.msg_type, action.args, bytes(action.payload))
                self.wire.append((src, action.dst_node, item))
            elif isinstance(action, SendData):
                if action.region:
                    item = ("rm", action.recv_id, action.offset, bytes(action.payload))
                else:
                    args = (action.recv_id, action.offset, 0, 0)
                    item = ("msg", MsgType.GM_DATA, args, bytes(action.payload))
                self.wire.append((src, action.dst_node, item))
                self.chunks.append((src, action.op))  # the NIC's SENT, told by `sent`
            elif isinstance(action, Release):
                self.released.append((src, action.recv_id))

    def send(self, src: int, dst: int, tag: int, data: bytes, *, sync: bool = False) -> SendOp:
        op, actions = self.cores[src].send(CTX, src, tag, dst, data, sync=sync)
        self.do(src, actions)
        return op

    def recv(self, dst: int, source: int, tag: int, size: int | None = None) -> RecvOp:
        node = None if source == ANY_SOURCE else source
        buf = None if size is None else memoryview(bytearray(size))
        op, actions = self.cores[dst].recv(CTX, source, tag, node, buf)
        self.do(dst, actions)
        return op

    def pump(self, rng: random.Random | None = None, max_rounds: int = 10_000) -> None:
        """Deliver everything; with ``rng``, interleave streams randomly (order kept per pair).
        Then, with ``auto_sent``, report every chunk handed over SENT."""
        self.step(rng, max_rounds)
        if self.wire:
            raise AssertionError("network did not drain")
        if self.auto_sent:
            self.sent()

    def sent(self) -> None:
        """The NICs report every chunk handed over so far SENT."""
        chunks, self.chunks = self.chunks, []
        for src, op in chunks:
            self.cores[src].on_chunk_sent(op)

    def step(self, rng: random.Random | None, count: int) -> None:
        """Deliver up to ``count`` items."""
        for _ in range(count):
            if not self.wire:
                return
            if rng is None:
                index = 0
            else:  # pick a random pair, then its oldest item: per-stream order is kept
                pairs = sorted({(s, d) for s, d, _ in self.wire})
                pair = rng.choice(pairs)
                index = next(i for i, (s, d, _) in enumerate(self.wire) if (s, d) == pair)
            src, dst, item = self.wire.pop(index)
            core = self.cores[dst]
            if item[0] == "rm":
                _, recv_id, offset, chunk = item
                self.do(dst, core.on_data(src, recv_id, offset, chunk))
            else:
                _, msg_type, args, payload = item
                self.do(dst, core.on_message(src, msg_type, args, payload))


def data_of(op: RecvOp) -> bytes:
    if op.buf is not None:
        return bytes(op.buf[: op.count])
    result = op.result
    assert result is not None
    return result


# -- transition tables -------------------------------------------------------------------------


def test_tables_move_only_from_live_states() -> None:
    for (state, _), _target in SEND_MOVES.items():
        assert state not in TERMINAL
    for (state, _), _target in RECV_MOVES.items():
        assert state not in TERMINAL


@pytest.mark.parametrize("event", list(Event))
def test_illegal_move_raises_protocol_error(event: Event) -> None:
    core = P2P(0, 2)
    op = SendOp(SendState.DONE, 1)
    with pytest.raises(ProtocolError):
        core._move_send(op, event)
    rop = RecvOp(None, None)
    rop.state = RecvState.DONE
    with pytest.raises(ProtocolError):
        core._move_recv(rop, event)


# -- eager --------------------------------------------------------------------------------------


def test_eager_expected_and_unexpected() -> None:
    net = Net(2)
    early = net.recv(1, 0, 5)
    s1 = net.send(0, 1, 5, b"hello")
    assert s1.done
    assert s1.state is SendState.DONE
    net.send(0, 1, 6, b"world")
    net.pump()
    assert early.done
    assert data_of(early) == b"hello"
    assert (early.msg_source, early.msg_tag, early.count) == (0, 5, 5)
    late = net.recv(1, ANY_SOURCE, ANY_TAG)
    assert late.done
    assert data_of(late) == b"world"
    assert late.msg_tag == 6
    stats = net.cores[1].stats()
    assert stats["protocol"]["eager_sent"] == 0  # type: ignore[index]
    assert net.cores[0].counters["eager_sent"] == 2
    assert net.cores[1].matcher.stats().unexpected_arrivals == 1


def test_eager_truncation_into_buffer() -> None:
    net = Net(2)
    op = net.recv(1, 0, 1, size=3)
    net.send(0, 1, 1, b"abcdef")
    net.pump()
    assert op.done
    assert op.outcome is Outcome.TRUNCATED
    assert bytes(op.buf or b"") == b"abc"
    assert op.count == 6


def test_self_send_never_touches_the_wire() -> None:
    net = Net(1)
    sop = net.send(0, 0, 3, b"me" * 100)  # above the eager limit: still local
    assert sop.done
    assert not net.wire
    rop = net.recv(0, 0, 3)
    assert rop.done
    assert data_of(rop) == b"me" * 100


def test_sync_self_send_completes_when_matched() -> None:
    net = Net(1)
    sop = net.send(0, 0, 3, b"x", sync=True)
    assert sop.state is SendState.LOCAL_WAIT
    assert not sop.done
    net.recv(0, 0, 3)
    assert sop.done


# -- rendezvous ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rm", [False, True])
@pytest.mark.parametrize("posted_first", [False, True])
def test_rendezvous_roundtrip(rm: bool, posted_first: bool) -> None:
    net = Net(2, rm=rm)
    data = bytes(range(256)) * 3  # 768 bytes: 16 chunks of 50
    rop = net.recv(1, 0, 9) if posted_first else None
    sop = net.send(0, 1, 9, data)
    assert sop.state is SendState.RTS_SENT
    assert not sop.done
    net.pump()
    if rop is None:
        assert net.grants == 0  # the RTS waits unexpected; no CTS before a match
        rop = net.recv(1, 0, 9)
        net.pump()
    assert sop.done
    assert rop.done
    assert data_of(rop) == data
    assert rop.count == len(data)
    assert net.released == [(1, rop.recv_id)]
    assert net.cores[0].counters["data_chunks_sent"] == 16


@pytest.mark.parametrize("sync", [False, True])
def test_rendezvous_send_completes_only_when_every_chunk_was_sent(sync: bool) -> None:
    net = Net(2)
    net.auto_sent = False
    rop = net.recv(1, 0, 9)
    sop = net.send(0, 1, 9, b"q" * 120, sync=sync)  # 3 chunks of 50
    net.pump()
    assert rop.done  # the data landed, but the NIC has not reported it delivered
    assert sop.state is SendState.DATA
    assert not sop.done
    assert net.cores[0].outstanding_sends() == 1
    last = net.chunks.pop()
    net.sent()
    assert not sop.done
    net.chunks.append(last)
    net.sent()
    assert sop.state is SendState.DONE
    assert sop.outcome is Outcome.OK
    assert net.cores[0].outstanding_sends() == 0


def test_a_chunk_the_receiver_aborted_fails_the_send_itself() -> None:
    net = Net(2)
    net.auto_sent = False
    net.recv(1, 0, 9)
    sop = net.send(0, 1, 9, b"q" * 120)
    net.pump()
    sender = net.cores[0]
    sender.on_chunk_sent(net.chunks[0][1])
    sender.on_send_failed(1, "aborted")  # the second chunk's ERROR (NACK ABORTED)
    assert sop.state is SendState.FAILED
    assert (sop.outcome, sop.reason) == (Outcome.PEER_FAILED, "aborted")
    assert sender.outstanding_sends() == 0
    net.sent()  # the third chunk's SENT changes nothing
    assert sop.state is SendState.FAILED
    assert sender.counters["failed"] == 1


def test_rendezvous_truncates_but_completes_sender() -> None:
    net = Net(2)
    rop = net.recv(1, 0, 1, size=100)
    sop = net.send(0, 1, 1, b"z" * 500)
    net.pump()
    assert sop.done
    assert sop.outcome is Outcome.OK
    assert rop.outcome is Outcome.TRUNCATED
    assert rop.count == 500
    assert bytes(rop.buf or b"") == b"z" * 100


def test_ssend_small_is_acknowledged() -> None:
    net = Net(2)
    sop = net.send(0, 1, 2, b"tiny", sync=True)
    net.pump()
    assert not sop.done  # no receive yet
    rop = net.recv(1, 0, 2)
    assert rop.done
    assert data_of(rop) == b"tiny"
    net.pump()
    assert sop.done


def test_probe_reports_rendezvous_size() -> None:
    net = Net(2)
    net.send(0, 1, 4, b"q" * 300)
    net.pump()
    info = net.cores[1].probe(CTX, ANY_SOURCE, ANY_TAG)
    assert info is not None
    assert (info.source, info.tag, info.count) == (0, 4, 300)


def test_cancel_posted_receive() -> None:
    net = Net(2)
    rop = net.recv(1, 0, 1)
    assert net.cores[1].cancel(rop)
    assert rop.done
    assert rop.outcome is Outcome.CANCELLED
    assert not net.cores[1].cancel(rop)


# -- failures and bad peers ------------------------------------------------------------------


def test_dead_peer_fails_dependent_operations() -> None:
    net = Net(3)
    sop = net.send(0, 1, 1, b"x" * 200)  # RTS to node 1: waits for a CTS
    from_1 = net.recv(0, 1, 1)
    wild = net.recv(0, ANY_SOURCE, 2)
    from_2 = net.recv(0, 2, 3)
    net.cores[0].on_send_failed(1, "peer_dead")
    assert sop.outcome is Outcome.PEER_FAILED
    assert sop.done
    assert from_1.outcome is Outcome.PEER_FAILED
    assert wild.outcome is Outcome.PEER_FAILED
    assert not from_2.done  # node 2 is fine
    later = net.send(0, 1, 1, b"y")
    assert later.done
    assert later.outcome is Outcome.PEER_FAILED


@pytest.mark.parametrize(
    ("msg_type", "args", "payload", "reason"),
    [
        (99, (0, 0, 0, 0), b"", "unknown_msg_type"),
        (MsgType.MPI_RTS, (0, 0, 0, 0), b"\x00", "rts_short"),
        (MsgType.MPI_CTS, (42, 1, 0, 0), b"", "cts_unknown_send"),
        (MsgType.GM_DATA, (42, 0, 0, 0), b"zz", "data_unknown_receive"),
    ],
)
def test_bad_peer_messages_are_counted_drops(
    msg_type: int, args: tuple[int, int, int, int], payload: bytes, reason: str
) -> None:
    core = P2P(0, 2)
    assert core.on_message(1, msg_type, args, payload) == []
    assert core.dropped == {reason: 1}


@pytest.mark.parametrize("msg_type", [MsgType.MPI_EAGER, MsgType.MPI_RTS])
@pytest.mark.parametrize(
    "args", [(0, 1 << 20, 0, 0), (0, 0xFFFFFFFF, 0, 0), (0, 0, 1 << 31, 0), (0, 0, 0xFFFFFFFF, 0)],
    ids=["source-past-max", "source-u32", "tag-past-max", "tag-u32"],
)  # fmt: skip
def test_a_malformed_envelope_is_a_counted_drop(
    msg_type: int, args: tuple[int, int, int, int]
) -> None:
    """Audit test 16: a peer's out-of-range source or tag never raises in the rank."""
    core = P2P(0, 2)
    payload = b"x" if msg_type == MsgType.MPI_EAGER else RTS_HEAD.pack(1, 7, 0)
    assert core.on_message(1, msg_type, args, payload) == []
    assert core.on_unsequenced(1, args, b"y") == []
    assert core.dropped == {"bad_envelope": 2}
    assert core.stats()["dropped"] == {"bad_envelope": 2}
    op, _ = core.recv(CTX, ANY_SOURCE, ANY_TAG, None, None)  # nothing bad was queued
    assert not op.done


_u32 = st.integers(0, 0xFFFFFFFF)
_peer_messages = st.tuples(
    st.sampled_from([int(t) for t in MsgType]) | st.integers(0, 255),
    st.tuples(_u32 | st.integers(0, 3), _u32 | st.integers(0, 3), _u32 | st.integers(0, 3), _u32),
    st.binary(max_size=40),
)


def test_an_rts_announcing_more_than_a_count_of_bytes_is_dropped_not_allocated() -> None:
    core = P2P(0, 2)
    core.recv(CTX, ANY_SOURCE, ANY_TAG, None, None)  # would take it into a fresh buffer
    rts = RTS_HEAD.pack(1 << 40, 7, 0)  # a terabyte: bytearray() would raise MemoryError
    assert core.on_message(1, MsgType.MPI_RTS, (CTX, 1, 0, 0), rts) == []
    assert core.dropped == {"rts_too_large": 1}


@settings(max_examples=200, deadline=None)
@given(st.lists(_peer_messages, max_size=20))
def test_any_peer_messages_never_raise(
    messages: list[tuple[int, tuple[int, int, int, int], bytes]],
) -> None:
    core = P2P(0, 2)
    posted = [core.recv(CTX, ANY_SOURCE, ANY_TAG, None, None)[0] for _ in range(3)]
    for msg_type, args, payload in messages:
        core.on_message(1, msg_type, args, payload)
        core.on_data(1, args[0], args[1], payload)
    assert len(posted) == 3


# -- ordering -------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    plan=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.sampled_from([1, 30, 64, 65, 200])),
        min_size=1,
        max_size=25,
    ),
)
def test_non_overtaking_under_any_interleaving(seed: int, plan: list[tuple[int, int, int]]) -> None:
    """Senders 0..2 send to node 3 with tags 0..2, eager and rendezvous mixed; node 3 receives
    with wildcards in random order. Per (source, tag) the messages arrive in send order."""
    rng = random.Random(seed)
    net = Net(4)
    sent: dict[tuple[int, int], list[bytes]] = {}
    for i, (src, tag, size) in enumerate(plan):
        data = (f"{src}:{tag}:{i}:".encode() * size)[:size]
        sent.setdefault((src, tag), []).append(data)
        net.send(src, 3, tag, data)
    got: dict[tuple[int, int], list[bytes]] = {}
    ops = []
    for _ in plan:
        ops.append(net.recv(3, ANY_SOURCE, ANY_TAG))
        if rng.random() < 0.5:
            net.step(rng, rng.randint(1, 5))
    net.pump(rng)
    for op in ops:
        assert op.done
        assert op.outcome is Outcome.OK
        got.setdefault((op.msg_source, op.msg_tag), []).append(data_of(op))
    assert got == sent
    assert net.cores[3].counters["out_of_order"] == 0


def test_nodes_started_at_run_time_get_sequence_numbers_on_first_use() -> None:
    """MPI.Comm.Spawn: a rank that knew 2 nodes sends to and hears from node 5 and node 7."""
    early = P2P(0, 2)
    _, actions = early.send(8, 0, 3, 7, b"to a new node")
    assert [a.dst_node for a in actions if isinstance(a, Transmit)] == [7]
    assert early.num_nodes == 8
    late = P2P(5, 8)
    op, _ = early.recv(8, 0, 4, 5, None)
    [transmit] = [
        a for a in late.send(8, 0, 4, 0, b"from a new node")[1] if isinstance(a, Transmit)
    ]
    early.on_message(5, transmit.msg_type, transmit.args, bytes(transmit.payload))
    assert op.done
    assert data_of(op) == b"from a new node"
    assert early.counters["out_of_order"] == 0
    grown = P2P(0, 2)
    grown.on_message(9, transmit.msg_type, transmit.args, bytes(transmit.payload))
    assert grown.num_nodes == 10
