"""NicCore under hypothesis (audit test 7): valid-CRC packets of every message type from a
routed peer (GRIM, NIC_PORT, multicast, NICVM, control, management), interleaved with any
host record from two connections and with timers. Nothing raises, and the NIC's state stays
within its bounds."""

from __future__ import annotations

from dataclasses import replace

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nicd import hostlink as hl
from nicd.config import NicConfig, NicvmConfig
from nicd.core.nic import NicCore
from nicd.grim.amregistry import encode_request
from nicd.hostlink.grim import NIC_PORT
from nicd.link.wire import (
    CONTROL_TYPES,
    ControlPacket,
    DataPacket,
    FragFlags,
    MsgType,
    NackReason,
    encode,
)
from nicd.nicvm.modules import BCAST_BINARY_TREE
from nicd.nicvm.packet import encode_preamble
from tests.unit.hostlink_strategies import records

ROUTES = {0: ("127.0.0.1", 1000), 1: ("127.0.0.1", 1001), 2: ("127.0.0.1", 1002)}
PEER = 1
CONFIG = NicConfig(
    0,
    "/tmp",
    max_message=1 << 16,
    max_nic_sends=8,
    max_nic_send_bytes=1 << 18,
    nicvm=NicvmConfig(allow_remote_upload=True, max_sends_outstanding=16),
)

u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
ports = st.sampled_from([0, 1, 2, NIC_PORT]) | u16
few_ports = st.sampled_from([0, 1, NIC_PORT])
seqs = st.integers(0, 6) | u32
payloads = st.one_of(
    st.binary(max_size=64),
    st.builds(
        lambda op, req, names: encode_request(op, req, names),
        st.sampled_from(["sync", "lookup"]),
        u32,
        st.lists(st.text(max_size=12), max_size=4),
    ),
    st.builds(
        lambda obj: msgpack.packb(obj),
        st.recursive(
            st.none() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8) | st.floats(),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=4), inner, max_size=3)
            ),
            max_leaves=8,
        ),
    ),
    st.builds(
        lambda name, comm, root, hops, body: encode_preamble(name, comm, root, hops) + body,
        st.sampled_from(["bc", "x"]),
        st.integers(-3, 3),
        st.integers(-1, 3),
        st.integers(0, 70),
        st.binary(max_size=16),
    ),
    st.just(BCAST_BINARY_TREE.encode()),
)
DATA_TYPES = [t for t in MsgType if t not in CONTROL_TYPES]


@st.composite
def data_packets(draw: st.DrawFn) -> DataPacket:
    payload = draw(payloads)
    whole = draw(st.booleans())  # one whole message, or any fragment
    offset = 0 if whole else draw(st.sampled_from([0, 1, 4096]))
    extra = 0 if whole else draw(st.sampled_from([0, 1, 100_000, 1 << 20]))
    return DataPacket(
        msg_type=draw(st.sampled_from(DATA_TYPES)),
        flags=FragFlags.ONLY if whole else FragFlags(draw(st.integers(0, 3))),
        token=draw(u16),
        seq=draw(seqs),
        src_node=PEER,
        src_port=draw(few_ports | ports),
        dst_node=0,
        dst_port=draw(few_ports | ports),
        msg_len=offset + len(payload) + extra,
        offset=offset,
        payload=payload,
        mcast_group=draw(st.integers(0, 3) | u16),
        am_handler=draw(st.integers(0, 3) | u16),
        args=draw(st.tuples(u32, u32, u32, u32)),
    )


@st.composite
def control_packets(draw: st.DrawFn) -> ControlPacket:
    msg_type = draw(st.sampled_from(sorted(CONTROL_TYPES)))
    reason = draw(st.sampled_from(list(NackReason))) if msg_type is MsgType.NACK else None
    return ControlPacket(
        msg_type,
        draw(seqs),
        PEER,
        0,
        draw(ports),
        draw(ports),
        reason,
        sack=draw(st.integers(0, 0xFFFFFFFF)) if msg_type is MsgType.SACK else 0,
    )


steps = st.one_of(
    st.tuples(st.just("in_order"), data_packets()),  # its seq is made the stream's next
    st.tuples(st.just("packet"), data_packets() | control_packets()),
    st.tuples(st.just("host"), st.tuples(st.sampled_from([1, 2]), records)),
    st.tuples(st.just("time"), st.floats(0.0, 2.0) | st.sampled_from([31.0, 61.0])),
)


def _start() -> NicCore:
    core = NicCore(CONFIG)
    core.set_routes(ROUTES)
    for conn, port in ((1, 0), (2, 1)):
        core.on_host(conn, hl.OpenReq(port), now=0.0)
        core.on_host(conn, hl.ProvideReq(4), now=0.0)
    core.on_host(1, hl.NicvmLoadReq("bc", BCAST_BINARY_TREE), now=0.0)
    return core


def _check_bounds(core: NicCore, inputs: int) -> None:
    quota = core.nic_sends.stats()
    assert quota["in_flight"] <= CONFIG.max_nic_sends
    assert quota["bytes_in_flight"] <= CONFIG.max_nic_send_bytes
    transport = core.transport.stats()
    assert isinstance(transport["streams_in"], int)
    assert isinstance(transport["streams_out"], int)
    assert transport["streams_in"] <= inputs  # a receiver only for a packet that came
    assert transport["streams_out"] <= inputs
    for port in (0, 1):
        state = core.ports.get(port)
        if state is not None:
            assert 0 <= state.send_tokens <= CONFIG.send_tokens
    assert not core.control_queue  # only a busy link fills it
    engine = core.nicvm
    assert engine is not None
    assert len(engine._contexts) <= CONFIG.nicvm.max_sends_outstanding + inputs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, max_size=40))
def test_nothing_a_peer_or_host_sends_raises_and_state_stays_bounded(
    script: list[tuple[str, object]],
) -> None:
    core = _start()
    now = 0.0
    next_seq: dict[tuple[int, int], int] = {}
    for n, (kind, what) in enumerate(script, start=1):
        if kind == "in_order":
            assert isinstance(what, DataPacket)
            key = (what.src_port, what.dst_port)
            seq = next_seq.get(key, 0)
            next_seq[key] = seq + 1
            what, kind = replace(what, seq=seq), "packet"
        if kind == "packet":
            assert isinstance(what, DataPacket | ControlPacket)
            core.on_datagram(encode(what), ROUTES[PEER], now=now)
            core.flush(now=now)
        elif kind == "host":
            assert isinstance(what, tuple)
            conn, record = what
            core.on_host(conn, record, now=now)
        else:
            assert isinstance(what, float)
            now += what
            deadline = core.next_deadline()
            if deadline is not None and deadline <= now:
                core.on_timer(now=now)
        _check_bounds(core, n)
    core.stats()  # every counter JSON-able, nothing raises
