"""PortState: tokens, handles, receive tokens, event queues and record routing (pure)."""

from __future__ import annotations

import pytest

from emucluster.port.state import PortState, RecordRefused, UnexpectedRecord
from nicd import hostlink as hl
from nicd.hostlink import ErrorEvent, McastErrorEvent, RecvEvent, RmWriteEvent, SentEvent


def test_start_send_takes_a_token_and_a_fresh_handle_until_none_is_free() -> None:
    state = PortState(2, auto_replenish=False)
    assert state.start_send() == 1
    assert state.start_send() == 2
    assert state.start_send() is None
    assert state.free_send_tokens == 0
    assert state.outstanding == {1, 2}


def test_sent_error_and_batch_records_give_tokens_back_and_complete_handles() -> None:
    state = PortState(3, auto_replenish=False)
    handles = [state.start_send() for _ in range(3)]
    assert handles == [1, 2, 3]
    assert state.on_record(SentEvent(1)) == []
    assert state.on_record(ErrorEvent(2, 1, "peer_dead")) == []
    assert (state.free_send_tokens, state.outstanding) == (2, {3})
    state.on_record(hl.SentBatch((3,)))
    assert (state.free_send_tokens, state.outstanding) == (3, set())
    assert state.take_events() == [SentEvent(1), ErrorEvent(2, 1, "peer_dead"), SentEvent(3)]


def test_handles_wrap_past_32_bits_and_skip_zero() -> None:
    state = PortState(5, auto_replenish=False)
    state._next_handle = 0xFFFFFFFF
    assert state.start_send() == 0xFFFFFFFF
    assert state.start_send() == 1


def test_take_failure_returns_the_first_failure_else_absorbs_sent_events() -> None:
    state = PortState(4, auto_replenish=False)
    for _ in range(3):
        state.start_send()
    state.on_record(SentEvent(1))
    state.on_record(McastErrorEvent(7, 3, "dead"))
    state.on_record(ErrorEvent(2, 1, "no_route"))
    assert state.take_failure() == McastErrorEvent(7, 3, "dead")
    assert state.take_failure() == ErrorEvent(2, 1, "no_route")
    assert state.take_failure() is None
    assert state.next_event() is None  # the SENT was absorbed


def test_events_come_out_messages_first_then_rm_writes_then_completions() -> None:
    state = PortState(1, auto_replenish=False)
    state.start_send()
    rm = RmWriteEvent(1, 2, 3, 0, 4, (3, 0, 9, 0))
    recv = RecvEvent(1, 2, b"x")
    for record in (SentEvent(1), rm, recv):
        state.on_record(record)
    assert [state.next_event() for _ in range(4)] == [recv, rm, SentEvent(1), None]


def test_auto_replenish_gives_receive_tokens_back_one_batch_at_a_time() -> None:
    state = PortState(1, auto_replenish=True)
    assert state.provide(8) == hl.ProvideReq(8)
    state.provide_batch = 2
    assert state.on_record(RecvEvent(1, 2, b"a")) == []
    assert state.on_record(RecvEvent(1, 2, b"b")) == [hl.ProvideReq(2)]
    assert (state.nic_buffers, state.owed_buffers) == (8, 0)


def test_give_back_low_only_waits_until_the_nic_runs_short() -> None:
    state = PortState(1, auto_replenish=True)
    state.provide(4)
    state.provide_batch = 3
    state.on_record(RecvEvent(1, 2, b"a"))
    assert state.give_back(low_only=True) is None  # the NIC still holds 3
    state.on_record(RecvEvent(1, 2, b"b"))
    assert state.give_back(low_only=True) == hl.ProvideReq(2)
    assert state.give_back(low_only=False) is None  # nothing owed


def test_a_registered_sink_takes_its_record_type() -> None:
    state = PortState(1, auto_replenish=False)
    got: list[hl.NicvmDone] = []
    state.register_sink(hl.NicvmDone, got.append)
    state.on_record(hl.NicvmDone(4, "ok", 7))
    assert got == [hl.NicvmDone(4, "ok", 7)]
    assert state.next_event() is None


def test_nicvm_records_without_a_client_are_counted_drops() -> None:
    state = PortState(1, auto_replenish=False)
    state.on_record(hl.NicvmDone(4, "ok"))
    assert state.dropped == {"no_nicvm_client_NicvmDone": 1}


def test_confirmations_are_noted() -> None:
    state = PortState(1, auto_replenish=False)
    state.on_record(hl.Registered(3))
    state.on_record(hl.McastGroupOk(9))
    assert (state.registered, state.groups_ok) == ({3}, {9})


def test_refused_and_unroutable_records_raise() -> None:
    state = PortState(1, auto_replenish=False)
    with pytest.raises(RecordRefused, match="no such region"):
        state.on_record(hl.Refused("no such region"))
    with pytest.raises(UnexpectedRecord):
        state.on_record(hl.OpenReq(2))
