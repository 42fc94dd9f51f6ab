"""GbnReceiver alone, and the sequence arithmetic both sides share: scripted packets, exact
counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from nicd.core.actions import Deliver, SendPacket
from nicd.core.stats import TransportStats
from nicd.link.reliable import (
    REFUSAL_HOLD,
    SEQ_MASK,
    Admission,
    GbnReceiver,
    Verdict,
    unwrap,
)
from nicd.link.wire import ControlPacket, DataPacket, FragFlags, MsgType, NackReason
from tests.unit.factories import data_packet
from tests.unit.netsim import test_config

if TYPE_CHECKING:
    from collections.abc import Sequence

CONFIG = test_config(window=4, ack_every=3)
ME, PEER = 1, 3  # sender node, receiver node (factories use 1:2 -> 3:4)


def receiver(**overrides: object) -> tuple[GbnReceiver, TransportStats]:
    config = test_config(**{"window": 4, "ack_every": 3, **overrides})
    stats = TransportStats()
    r = GbnReceiver(node_id=PEER, src_node=ME, src_port=2, dst_port=4, config=config, stats=stats)
    return r, stats


def only_control(actions: Sequence[object]) -> ControlPacket:
    [action] = actions
    assert isinstance(action, SendPacket)
    assert action.node == ME
    assert isinstance(action.packet, ControlPacket)
    return action.packet


class OkAdmit:
    def __init__(self, *answers: Admission) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[int, int, int, int]] = []

    def __call__(self, first: DataPacket) -> Verdict:
        self.calls.append((first.dst_port, first.src_node, first.src_port, first.msg_len))
        return (self.answers.pop(0) if self.answers else Admission.OK), []


# -- sequence numbers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "ref", "expected"),
    [
        (5, 5, 5),
        (7, 5, 7),
        (3, 5, 3),
        (0, SEQ_MASK, SEQ_MASK + 1),
        (SEQ_MASK, SEQ_MASK + 1, SEQ_MASK),
        (2, (5 << 32) - 1, (5 << 32) + 2),
    ],
)
def test_unwrap_picks_the_nearest_unbounded_seq(wire: int, ref: int, expected: int) -> None:
    assert unwrap(wire, ref) == expected


def test_receiver_follows_the_sequence_across_the_32_bit_wrap() -> None:
    r, _ = receiver(ack_every=1)
    r.expected = SEQ_MASK  # as if 2**32 - 1 packets went before
    admit = OkAdmit()
    out = r.on_data(data_packet(seq=SEQ_MASK, payload=b"a"), now=0.0, admit=admit)
    out += r.on_data(data_packet(seq=0, payload=b"b"), now=0.0, admit=admit)
    delivered = [a.payload for a in out if isinstance(a, Deliver)]
    assert delivered == [b"a", b"b"]
    acks = [a.packet.seq for a in out if isinstance(a, SendPacket)]
    assert acks == [0, 1]


# -- receiver -----------------------------------------------------------------------------


def test_in_order_fragments_are_reassembled_and_delivered_at_last() -> None:
    r, stats = receiver(ack_every=10)
    admit = OkAdmit()
    frags = [
        data_packet(seq=0, flags=FragFlags.FIRST, payload=b"ab", msg_len=5, args=(1, 2, 3, 4)),
        data_packet(seq=1, flags=FragFlags.NONE, offset=2, payload=b"cd", msg_len=5),
        data_packet(seq=2, flags=FragFlags.LAST, offset=4, payload=b"e", msg_len=5),
    ]  # fmt: skip
    assert r.on_data(frags[0], now=0.0, admit=admit) == []
    assert r.on_data(frags[1], now=0.0, admit=admit) == []
    [delivery] = r.on_data(frags[2], now=0.0, admit=admit)
    assert delivery == Deliver(4, ME, 2, MsgType.GM_DATA, b"abcde", 0, (1, 2, 3, 4), 0)
    assert admit.calls == [(4, ME, 2, 5)]
    assert r.ack_pending
    ack = r.take_ack(0.0)
    assert ack is not None
    assert ack.packet == ControlPacket(MsgType.ACK, 3, PEER, ME, 2, 4)
    assert r.take_ack(0.0) is None
    assert stats.delivered == 1


def test_ack_every_acks_at_once_otherwise_at_flush() -> None:
    r, stats = receiver(ack_every=3)
    admit = OkAdmit()
    assert r.on_data(data_packet(seq=0), now=0.0, admit=admit)[1:] == []
    assert r.on_data(data_packet(seq=1), now=0.0, admit=admit)[1:] == []
    out = r.on_data(data_packet(seq=2), now=0.0, admit=admit)
    ack = out[-1]
    assert isinstance(ack, SendPacket)
    assert ack.packet.msg_type is MsgType.ACK
    assert ack.packet.seq == 3
    assert not r.ack_pending
    r.on_data(data_packet(seq=3), now=0.0, admit=admit)
    assert r.ack_pending
    assert stats.acks_sent == 1


def test_duplicate_is_dropped_and_re_acked() -> None:
    r, stats = receiver()
    admit = OkAdmit()
    r.on_data(data_packet(seq=0), now=0.0, admit=admit)
    assert only_control([r.take_ack(0.0)]).seq == 1
    assert r.on_data(data_packet(seq=0), now=0.0, admit=admit) == []
    assert r.ack_pending
    assert only_control([r.take_ack(0.0)]).seq == 1
    assert stats.drops["duplicate"] == 1
    assert len(admit.calls) == 1  # admit once per message, never for a duplicate


def test_gap_is_nacked_once_per_expected_seq() -> None:
    r, stats = receiver()
    admit = OkAdmit()
    r.on_data(data_packet(seq=0), now=0.0, admit=admit)
    nack = only_control(r.on_data(data_packet(seq=2), now=0.0, admit=admit))
    assert (nack.msg_type, nack.reason, nack.seq) == (MsgType.NACK, NackReason.GAP, 1)
    assert not r.ack_pending  # the NACK carries the cumulative ACK
    assert r.on_data(data_packet(seq=3), now=0.0, admit=admit) == []
    assert r.on_data(data_packet(seq=2), now=0.0, admit=admit) == []
    r.on_data(data_packet(seq=1), now=0.0, admit=admit)
    nack = only_control(r.on_data(data_packet(seq=3), now=0.0, admit=admit))
    assert nack.seq == 2  # a new gap
    assert stats.nacks_sent["gap"] == 2
    assert stats.drops["out_of_order"] == 4


def test_no_buffer_refuses_once_then_silently_until_resume() -> None:
    r, stats = receiver()
    admit = OkAdmit(Admission.NO_BUFFER)
    nack = only_control(r.on_data(data_packet(seq=0), now=0.0, admit=admit))
    assert (nack.reason, nack.seq) == (NackReason.NO_BUFFER, 0)
    assert r.on_data(data_packet(seq=1), now=0.0, admit=admit) == []  # no GAP NACK either
    assert r.on_data(data_packet(seq=0), now=0.0001, admit=admit) == []  # within the hold
    assert len(admit.calls) == 1
    resume = only_control([r.resume()])
    assert (resume.reason, resume.seq) == (NackReason.RESUME, 0)
    assert r.resume() is None
    [delivery] = r.on_data(data_packet(seq=0), now=0.0002, admit=admit)
    assert isinstance(delivery, Deliver)
    assert stats.nacks_sent == {"no_buffer": 1, "resume": 1}


def test_refused_receiver_tries_again_on_a_retransmission_after_the_hold() -> None:
    r, _ = receiver()
    admit = OkAdmit(Admission.NO_PORT, Admission.NO_PORT)
    only_control(r.on_data(data_packet(seq=0), now=0.0, admit=admit))
    hold = REFUSAL_HOLD * CONFIG.no_buffer_retry_s
    nack = only_control(r.on_data(data_packet(seq=0), now=hold, admit=admit))
    assert nack.reason is NackReason.NO_PORT
    [delivery] = r.on_data(data_packet(seq=0), now=2 * hold, admit=admit)
    assert isinstance(delivery, Deliver)
    assert r.refusal is None
    assert len(admit.calls) == 3


def test_too_long_message_is_aborted_and_its_skipped_fragments_keep_the_stream() -> None:
    r, stats = receiver(max_message=3)
    admit = OkAdmit()
    frags = [
        data_packet(seq=0, flags=FragFlags.FIRST, offset=0, payload=b"ab", msg_len=4),
        data_packet(seq=1, flags=FragFlags.LAST, offset=2, payload=b"cd", msg_len=4),
    ]
    nack = only_control(r.on_data(frags[0], now=0.0, admit=admit))
    assert (nack.reason, nack.seq) == (NackReason.ABORTED, 0)  # the sender fails it
    assert r.on_data(frags[1], now=0.0, admit=admit) == []  # not taken: no ACK can cover it
    assert admit.calls == []
    assert r.expected == 0
    assert stats.drops["too_large"] == 1
    for frag in frags:  # what the sender sends once it heard
        skipped = data_packet(seq=frag.seq, flags=frag.flags, offset=frag.offset, payload=b"",
                              msg_len=4, skip=True)  # fmt: skip
        assert [a for a in r.on_data(skipped, now=0.0, admit=admit) if isinstance(a, Deliver)] == []
    assert r.expected == 2  # the stream goes on
    out = r.on_data(data_packet(seq=2, payload=b"ok"), now=0.0, admit=admit)
    assert [a.payload for a in out if isinstance(a, Deliver)] == [b"ok"]


@pytest.mark.parametrize(
    "bad",
    [
        {"offset": 3},  # not where the message stands
        {"msg_len": 9},  # another length
        {"msg_type": MsgType.AM_DATA},  # another type
    ],
)
def test_inconsistent_fragment_is_a_counted_drop(bad: dict[str, object]) -> None:
    r, stats = receiver()
    admit = OkAdmit()
    first = data_packet(seq=0, flags=FragFlags.FIRST, offset=0, payload=b"ab", msg_len=5)
    r.on_data(first, now=0.0, admit=admit)
    fields: dict[str, object] = {"seq": 1, "flags": FragFlags.LAST, "offset": 2, "msg_len": 5}
    fields.update(bad)
    fields.setdefault("payload", b"cde"[: int(fields["msg_len"]) - int(fields["offset"])])  # type: ignore[call-overload]
    assert r.on_data(data_packet(**fields), now=0.0, admit=admit) == []
    assert stats.drops["inconsistent"] == 1
    assert r.expected == 1


def test_continuation_without_a_first_fragment_is_a_counted_drop() -> None:
    r, stats = receiver()
    p = data_packet(seq=0, flags=FragFlags.LAST, offset=2, payload=b"c", msg_len=3)
    assert r.on_data(p, now=0.0, admit=OkAdmit()) == []
    assert stats.drops["inconsistent"] == 1


def test_first_fragment_mid_message_abandons_the_partial_one() -> None:
    r, stats = receiver()
    admit = OkAdmit()
    r.on_data(
        data_packet(seq=0, flags=FragFlags.FIRST, payload=b"ab", msg_len=5), now=0.0, admit=admit
    )
    [d] = r.on_data(data_packet(seq=1, payload=b"new"), now=0.0, admit=admit)
    assert isinstance(d, Deliver)
    assert d.payload == b"new"
    assert stats.drops["abandoned"] == 1


def test_an_aborted_partial_is_refused_until_the_sender_skips_the_rest() -> None:
    r, stats = receiver(nack_repeat_s=0.01)
    admit = OkAdmit()
    r.on_data(
        data_packet(seq=0, flags=FragFlags.FIRST, payload=b"ab", msg_len=4), now=0.0, admit=admit
    )
    nack = only_control([r.abort("port_closed", now=0.0)])
    assert (nack.reason, nack.seq) == (NackReason.ABORTED, 1)  # seq 0 arrived, 1 on refused
    assert r.abort("port_closed", now=0.0) is None  # nothing partial any more
    middle = data_packet(seq=1, flags=FragFlags.NONE, offset=2, payload=b"c", msg_len=4)
    last = data_packet(seq=2, flags=FragFlags.LAST, offset=3, payload=b"d", msg_len=4)
    assert r.on_data(middle, now=0.001, admit=admit) == []  # rate-limited
    assert r.on_data(last, now=0.002, admit=admit) == []
    again = only_control(r.on_data(middle, now=0.011, admit=admit))  # the sender did not hear
    assert (again.reason, again.seq) == (NackReason.ABORTED, 1)
    assert r.expected == 1
    for p in (middle, last):
        r.on_data(
            data_packet(seq=p.seq, flags=p.flags, offset=p.offset, payload=b"", msg_len=4,
                        skip=True),
            now=0.02, admit=admit,
        )  # fmt: skip
    assert r.expected == 3
    assert not r.aborting
    [d] = [a for a in r.on_data(data_packet(seq=3, payload=b"x"), now=0.03, admit=admit)
           if isinstance(a, Deliver)]  # fmt: skip
    assert d.payload == b"x"
    assert stats.drops["port_closed"] == 1
    assert stats.drops["aborted"] == 3
    assert stats.recovery["skipped"] == 2
    assert stats.nacks_sent["aborted"] == 2
    assert stats.delivered == 1
