"""GM port table: ownership, send tokens, receive tokens and admission."""

from __future__ import annotations

import pytest

from nicd.errors import UsageError
from nicd.gm.ports import PortTable
from nicd.link.channels import Admission
from nicd.link.wire import DataPacket, MsgType
from tests.unit.factories import data_packet


def table() -> PortTable:
    return PortTable(max_ports=4, send_tokens=2)


def test_open_any_takes_lowest_free_and_refuses_when_full() -> None:
    t = table()
    assert [t.open(c, None).port for c in range(4)] == [0, 1, 2, 3]
    with pytest.raises(UsageError, match="all 4 ports"):
        t.open(9, None)


def test_open_specific_refuses_taken_out_of_range_and_second_port() -> None:
    t = table()
    t.open(1, 2)
    with pytest.raises(UsageError, match="already open"):
        t.open(2, 2)
    with pytest.raises(UsageError, match="outside"):
        t.open(3, 4)
    with pytest.raises(UsageError, match="already owns"):
        t.open(1, 3)


def test_send_tokens_are_bounded_and_returned() -> None:
    t = table()
    state = t.open(1, 0)
    t.take_send_token(state)
    t.take_send_token(state)
    with pytest.raises(UsageError):
        t.take_send_token(state)
    t.return_send_token(0)
    assert state.send_tokens == 1
    t.return_send_token(0)
    t.return_send_token(0)  # one too many: ignored, never above the initial count
    assert state.send_tokens == 2


def first(**overrides: object) -> DataPacket:
    return data_packet(**{"dst_port": 0, "payload": b"x" * 10, **overrides})


def test_admission_consumes_receive_tokens() -> None:
    t = table()
    state = t.open(1, 0)
    assert t.admit(first()) is Admission.NO_BUFFER
    t.provide(state, 2)
    assert t.admit(first()) is Admission.OK
    assert t.admit(first()) is Admission.OK
    assert t.admit(first()) is Admission.NO_BUFFER
    assert t.stats()["refused_no_buffer"] == 2


def test_a_port_never_opened_is_not_ready_yet_but_a_closed_one_is_gone() -> None:
    t = table()
    assert t.admit(first()) is Admission.NO_BUFFER  # its host is still starting
    t.open(1, 0)
    t.close_conn(1)
    assert t.admit(first()) is Admission.NO_PORT
    assert t.admit(first(dst_port=1)) is Admission.NO_BUFFER  # port 1 was never open
    assert (t.stats()["refused_not_open"], t.stats()["refused_no_port"]) == (2, 1)


def test_remote_memory_writes_need_a_region_not_a_token() -> None:
    t = table()
    state = t.open(1, 0)
    rm = {"msg_type": MsgType.RM_WRITE_P, "payload": b"y" * 8}
    assert t.admit(first(**rm, args=(3, 0, 0, 0))) is Admission.NO_PORT
    t.register(state, 3, memoryview(bytearray(16)))
    assert t.admit(first(**rm, args=(3, 8, 0, 0))) is Admission.OK
    assert t.admit(first(**rm, args=(3, 9, 0, 0))) is Admission.NO_PORT  # past the end
    assert state.receive_tokens == 0


def test_close_frees_the_port() -> None:
    t = table()
    t.open(1, 0)
    closed = t.close_conn(1)
    assert closed is not None
    assert closed.port == 0
    assert t.close_conn(1) is None
    assert t.open(2, 0).port == 0


def test_regions_register_once_and_leave_with_the_port() -> None:
    t = table()
    state = t.open(1, 0)
    memory = memoryview(bytearray(16))
    t.register(state, 3, memory)
    with pytest.raises(UsageError, match="already registered"):
        t.register(state, 3, memory)
    assert t.stats()["ports"]["0"]["regions"] == {"3": 16}
    assert t.deregister(state, 3) is memory
    assert t.deregister(state, 3) is None
    t.register(state, 4, memory)
    closed = t.close_conn(1)
    assert closed is not None
    assert closed.regions == {4: memory}
