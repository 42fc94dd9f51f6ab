"""Active-message handler table, overflow queue and credit policing."""

from __future__ import annotations

import pytest

from emucluster.grim.amcore import HandlerTable, Outbox, OutMsg


def noop(src: int, args: tuple[int, int, int, int], payload: bytes) -> None:
    pass


def test_register_sync_merge_and_dispatch() -> None:
    h = HandlerTable()
    h.register("a", noop)
    h.register("b", noop)
    assert h.unsynced() == ["a", "b"]
    h.merge({"a": 1, "b": 2, "z": 3}, ["a", "b"])
    assert h.unsynced() == []
    assert h.id_of("z") == 3
    assert h.name_of(2) == "b"
    assert h.dispatch(1).handler is noop
    assert h.dispatch(3).name == "z"
    assert h.dispatch(3).handler is None
    assert h.dispatch(99).name is None
    with pytest.raises(RuntimeError, match="changed the id"):
        h.merge({"a": 5})


def test_register_rejects_bad_names_and_handlers() -> None:
    h = HandlerTable()
    with pytest.raises(ValueError, match="non-empty"):
        h.register("", noop)
    with pytest.raises(TypeError, match="not callable"):
        h.register("x", 5)  # type: ignore[arg-type]


def msg(i: int) -> OutMsg:
    return OutMsg(1, 3, 2, b"", i)


def test_overflow_keeps_order_and_nothing_passes_it() -> None:
    o = Outbox()
    assert o.admit(msg(1), free_tokens=1, outstanding=0)
    assert not o.admit(msg(2), free_tokens=0, outstanding=1)
    assert not o.admit(msg(3), free_tokens=5, outstanding=0)  # queue not empty: behind it
    assert o.drainable(free_tokens=1, outstanding=0) == 1
    assert [m.am_handler for m in o.take(5)] == [2, 3]
    assert o.counts == {"overflowed": 2, "drained": 2}
    assert o.overflow_peak == 2


def test_credits_limit_outstanding_messages() -> None:
    o = Outbox(credits=2)
    assert o.may_send(free_tokens=10, outstanding=1)
    assert not o.may_send(free_tokens=10, outstanding=2)
    for i in range(4):
        o.overflow.append(msg(i))
    assert o.drainable(free_tokens=10, outstanding=0) == 2
    assert o.drainable(free_tokens=1, outstanding=0) == 1
