"""GM port table: ownership, send tokens, receive tokens and admission."""

from __future__ import annotations

import pytest

from nicd.channels import Admission
from nicd.errors import UsageError
from nicd.gm import PortTable


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


def test_admission_consumes_receive_tokens() -> None:
    t = table()
    assert t.admit(0, 5, 0, 10) is Admission.NO_PORT
    state = t.open(1, 0)
    assert t.admit(0, 5, 0, 10) is Admission.NO_BUFFER
    t.provide(state, 2)
    assert t.admit(0, 5, 0, 10) is Admission.OK
    assert t.admit(0, 5, 0, 10) is Admission.OK
    assert t.admit(0, 5, 0, 10) is Admission.NO_BUFFER
    assert t.stats()["refused_no_buffer"] == 2
    assert t.stats()["refused_no_port"] == 1


def test_close_frees_the_port() -> None:
    t = table()
    t.open(1, 0)
    assert t.close_conn(1) == 0
    assert t.close_conn(1) is None
    assert t.open(2, 0).port == 0
