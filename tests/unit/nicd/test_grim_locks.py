"""Window lock queues at the NIC: nicd.grim.locks (pure, on a fake clock) and lock requests
through two NicCores on netsim's virtual network, the target host never involved."""

from __future__ import annotations

import random
import struct

from nicd import hostlink as hl
from nicd.grim.atomics import AtomicOp, pack_meta
from nicd.grim.locks import LOCK_WAIT_S, Granted, LockTable, Refused, Waiter
from nicd.hostlink.grim import RmStatus, RmXlateReq
from nicd.link.wire import MsgType
from tests.unit.nicd.test_grim_nic import PORT, VBASE, Pair

KEY = (3, 0x1000)
A, B, C, D = (Waiter(n, 4, 100 + n) for n in range(4))


def _granted(outcomes: list[Granted | Refused]) -> list[Waiter]:
    assert all(isinstance(o, Granted) for o in outcomes), outcomes
    return [o.who for o in outcomes]


def test_shared_holders_share_and_an_exclusive_waits_for_all_of_them() -> None:
    t = LockTable()
    assert _granted(t.acquire(KEY, A, exclusive=False, now=0.0)) == [A]
    assert _granted(t.acquire(KEY, B, exclusive=False, now=0.0)) == [B]
    assert t.acquire(KEY, C, exclusive=True, now=0.0) == []
    assert t.release(KEY, A.node, A.port) == (True, [])
    assert t.release(KEY, B.node, B.port) == (True, [Granted(C)])


def test_a_shared_request_behind_a_waiting_exclusive_waits_so_writers_do_not_starve() -> None:
    t = LockTable()
    t.acquire(KEY, A, exclusive=False, now=0.0)
    assert t.acquire(KEY, B, exclusive=True, now=0.0) == []
    assert t.acquire(KEY, C, exclusive=False, now=0.0) == []  # compatible with A, yet queued
    assert t.acquire(KEY, D, exclusive=False, now=0.0) == []
    assert _granted(t.release(KEY, A.node, A.port)[1]) == [B]
    assert _granted(t.release(KEY, B.node, B.port)[1]) == [C, D]  # consecutive shared: together


def test_grants_follow_arrival_order_under_random_contention() -> None:
    """Many origins, random mixes of shared and exclusive: every request is granted, in
    arrival order, and an exclusive holder is always alone."""
    rng = random.Random(31)
    t = LockTable()
    who = [Waiter(n, 4, n) for n in range(12)]
    order: list[Waiter] = []
    holding: dict[Waiter, bool] = {}
    kind = {w: rng.random() < 0.5 for w in who}
    for w in who:
        for g in _granted(t.acquire(KEY, w, exclusive=kind[w], now=0.0)):
            order.append(g)
            holding[g] = kind[g]
    while holding:
        assert not (any(holding.values()) and len(holding) > 1)
        leaving = rng.choice(sorted(holding, key=lambda w: w.node))
        del holding[leaving]
        held, grants = t.release(KEY, leaving.node, leaving.port)
        assert held
        for g in _granted(grants):
            order.append(g)
            holding[g] = kind[g]
    assert order == who
    assert t.stats()["waiting"] == 0
    assert t.stats()["locks_held"] == 0


def test_a_waiter_is_refused_after_wait_s_and_those_behind_it_move_on() -> None:
    t = LockTable(wait_s=10.0)
    t.acquire(KEY, A, exclusive=False, now=0.0)
    t.acquire(KEY, B, exclusive=True, now=1.0)
    t.acquire(KEY, C, exclusive=False, now=2.0)
    assert t.next_deadline() == 11.0
    assert t.on_timer(now=10.5) == []
    out = t.on_timer(now=11.0)
    assert [type(o) for o in out] == [Refused, Granted]  # B refused, C shares with A
    assert out[0].who == B
    assert out[1].who == C
    assert t.next_deadline() is None
    assert t.stats()["refused_waited_too_long"] == 1


def test_a_dead_nodes_holdings_are_released_and_its_waiting_entries_dropped() -> None:
    t = LockTable()
    t.acquire(KEY, A, exclusive=True, now=0.0)
    t.acquire(KEY, B, exclusive=True, now=0.0)
    t.acquire(KEY, C, exclusive=True, now=0.0)
    assert _granted(t.peer_dead(B.node)) == []  # B waited: dropped, A still holds
    assert _granted(t.peer_dead(A.node)) == [C]
    assert t.stats()["released_for_dead_peer"] == 1
    assert t.stats()["dropped_dead_waiter"] == 1
    assert t.next_deadline() is None


def test_a_closed_port_refuses_its_waiters_at_the_next_timer() -> None:
    t = LockTable()
    t.acquire(KEY, A, exclusive=True, now=0.0)
    t.acquire(KEY, B, exclusive=False, now=0.0)
    t.port_closed(KEY[0])
    assert t.next_deadline() == 0.0
    out = t.on_timer(now=5.0)
    assert [(type(o), o.who) for o in out] == [(Refused, B)]
    assert t.stats()["waiting"] == 0
    assert t.stats()["locks_held"] == 0


def test_bounded_queue_and_double_requests_are_refused_and_counted() -> None:
    t = LockTable(max_waiters=1)
    t.acquire(KEY, A, exclusive=True, now=0.0)
    assert t.acquire(KEY, B, exclusive=True, now=0.0) == []
    assert isinstance(t.acquire(KEY, C, exclusive=True, now=0.0)[0], Refused)
    assert isinstance(t.acquire(KEY, A, exclusive=False, now=0.0)[0], Refused)
    assert t.release(KEY, C.node, C.port) == (False, [])
    stats = t.stats()
    counted = (stats["refused_queue_full"], stats["lock_twice"], stats["release_not_held"])
    assert counted == (1, 1, 1)


def test_locks_are_separate_per_word() -> None:
    t = LockTable()
    assert _granted(t.acquire(KEY, A, exclusive=True, now=0.0)) == [A]
    assert _granted(t.acquire((3, 0x2000), B, exclusive=True, now=0.0)) == [B]
    assert _granted(t.acquire((4, 0x1000), C, exclusive=True, now=0.0)) == [C]


# -- through two NicCores ------------------------------------------------------------------


def _lock_op(p: Pair, node: int, op: AtomicOp, req: int, until: object = None) -> None:
    """Host ``node`` sends a lock op for node 1's lock word; run until ``until()`` (default:
    ``req``'s status is back)."""
    meta = pack_meta(op, "q", fetch=False)
    record = hl.SendReq(1, 1, PORT, bytes(8), int(MsgType.RM_ATOMIC), 0, (VBASE, 0, req, meta))
    p.request(node, record)
    p.run(until if callable(until) else lambda: req in dict(p.statuses(node)))


def _waiting(p: Pair) -> int:
    return p.cores[1].grim.locks.stats()["waiting"]


def test_the_target_nic_queues_and_grants_locks_without_its_host() -> None:
    """Node 0 and node 1 (locking its own window through its NIC) contend for node 1's lock:
    the second request's status comes only when the first holder unlocks."""
    p = Pair()
    p.block(1, VBASE, 64, 0, static=True)
    _lock_op(p, 0, AtomicOp.LOCK_EXCLUSIVE, 1)
    assert p.statuses(0) == [(1, RmStatus.OK)]
    _lock_op(p, 1, AtomicOp.LOCK_SHARED, 2, until=lambda: _waiting(p) == 1)
    assert p.statuses(1) == []  # waits at the NIC
    _lock_op(p, 0, AtomicOp.UNLOCK, 3, until=lambda: p.statuses(1))
    assert p.statuses(1) == [(2, RmStatus.OK)]  # granted by node 1's NIC
    p.run(lambda: len(p.statuses(0)) == 2)
    assert p.statuses(0)[-1] == (3, RmStatus.OK)
    _lock_op(p, 0, AtomicOp.UNLOCK, 4)  # node 0 no longer holds it
    assert p.statuses(0)[-1] == (4, RmStatus.NOT_LOCKED)
    assert struct.unpack_from("<q", p.memory[1], 0)[0] == 0  # memory untouched
    assert not [r for r in p.host[1] if isinstance(r, RmXlateReq)]  # no host help asked


def test_a_waiter_behind_a_holder_that_never_unlocks_gets_an_error_not_a_hang() -> None:
    p = Pair()
    p.block(1, VBASE, 64, 0, static=True)
    _lock_op(p, 1, AtomicOp.LOCK_EXCLUSIVE, 1)
    _lock_op(p, 0, AtomicOp.LOCK_EXCLUSIVE, 2)  # the virtual clock runs to its deadline
    assert p.statuses(0) == [(2, RmStatus.LOCK_FAILED)]
    assert p.now >= LOCK_WAIT_S


def test_a_lock_op_with_fetch_or_outside_registered_memory_is_refused() -> None:
    p = Pair()
    p.block(1, VBASE, 64, 0, static=True)
    meta = pack_meta(AtomicOp.LOCK_EXCLUSIVE, "q", fetch=True)
    p.host_send(0, PORT, MsgType.RM_ATOMIC, bytes(8), 0, (VBASE, VBASE, 5, meta))
    assert p.statuses(0) == [(5, RmStatus.BAD_OP)]
    meta = pack_meta(AtomicOp.LOCK_EXCLUSIVE, "q", fetch=False)
    p.host_send(0, PORT, MsgType.RM_ATOMIC, bytes(8), 0, (VBASE + 60, 0, 6, meta))
    assert p.statuses(0)[-1] == (6, RmStatus.OUT_OF_RANGE)
