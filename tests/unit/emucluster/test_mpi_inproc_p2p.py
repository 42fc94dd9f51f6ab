"""Point-to-point calls of ``Comm`` on an in-process job (tests/unit/mpisim.py): matching
order, wildcards, probes, cancellation, errors and truncation, over the real protocol (eager
and rendezvous) and the real NIC cores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.unit.mpisim import MPI, run
from tests.unit.netsim import BadNetwork

SMALL_EAGER = 256  # an eager limit under which the 1 KiB arrays below go by rendezvous


def _payload(i: int, big: bool) -> Any:
    """Message ``i``: a small object, or one over the small eager limit."""
    return ("big", i, b"x" * 2000) if big else ("small", i)


@pytest.mark.parametrize("seed", [None, 1, 2])
def test_messages_on_one_source_and_tag_are_received_in_send_order(seed: int | None) -> None:
    """Non-overtaking: eager and rendezvous messages interleaved on one (source, tag) match
    in the order they were sent, whatever the schedule."""

    def body(comm: Any) -> Any:
        if comm.rank == 0:
            for i in range(12):
                comm.send(_payload(i, big=i % 3 == 1), dest=1, tag=7)
            return None
        return [comm.recv(source=0, tag=7)[1] for _ in range(12)]

    assert run(2, body, seed=seed, eager_limit=SMALL_EAGER)[1] == list(range(12))


def test_order_holds_per_tag_when_tags_are_received_out_of_order() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            for i in range(10):
                comm.send((i % 2, i), dest=1, tag=100 + i % 2)
            return None
        odd = [comm.recv(source=0, tag=101) for _ in range(5)]
        even = [comm.recv(source=0, tag=100) for _ in range(5)]
        return odd, even

    odd, even = run(2, body, eager_limit=SMALL_EAGER)[1]
    assert odd == [(1, i) for i in (1, 3, 5, 7, 9)]
    assert even == [(0, i) for i in (0, 2, 4, 6, 8)]


def test_any_tag_takes_messages_of_one_source_in_send_order() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 1:
            for i, tag in enumerate([5, 1, 9, 1, 3]):
                comm.send(i, dest=0, tag=tag)
            return None
        status = MPI.Status()
        got = []
        for _ in range(5):
            got.append((comm.recv(source=1, tag=MPI.ANY_TAG, status=status), status.Get_tag()))
        return got

    assert run(2, body)[0] == [(0, 5), (1, 1), (2, 9), (3, 1), (4, 3)]


@pytest.mark.parametrize("n", [3, 4, 5])
def test_any_source_keeps_each_sources_order(n: int) -> None:
    def body(comm: Any) -> Any:
        if comm.rank:
            for i in range(4):
                comm.send((comm.rank, i), dest=0, tag=3)
            return None
        status = MPI.Status()
        got = []
        for _ in range(4 * (n - 1)):
            value = comm.recv(source=MPI.ANY_SOURCE, tag=3, status=status)
            assert status.Get_source() == value[0]
            got.append(value)
        return got

    for seed in (None, 3, 4):
        got = run(n, body, seed=seed)[0]
        assert sorted(got) == [(r, i) for r in range(1, n) for i in range(4)]
        for r in range(1, n):
            assert [i for src, i in got if src == r] == [0, 1, 2, 3]


def test_a_specific_receive_posted_first_wins_over_a_later_wildcard() -> None:
    """Posted receives are matched in the order they were posted."""

    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.barrier()
            comm.send("first", dest=1, tag=4)
            comm.send("second", dest=1, tag=4)
            return None
        specific = comm.irecv(source=0, tag=4)
        wildcard = comm.irecv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
        comm.barrier()
        return specific.wait(), wildcard.wait()

    assert run(2, body)[1] == ("first", "second")


def test_contexts_separate_messages_with_the_same_envelope() -> None:
    """A message sent on a duplicate is never received on its parent, whatever the order."""

    def body(comm: Any) -> Any:
        dup = comm.Dup()
        if comm.rank == 0:
            dup.send("on dup", dest=1, tag=0)
            comm.send("on world", dest=1, tag=0)
            out = None
        else:
            out = (comm.recv(source=0, tag=0), dup.recv(source=0, tag=0))
        dup.Free()
        return out

    assert run(2, body)[1] == ("on world", "on dup")


@pytest.mark.parametrize("size", [0, 1, 255, 256, 257, 5000, 70_000])
@pytest.mark.parametrize("rndv_rm", [True, False])
def test_buffers_of_every_size_arrive_whole(size: int, rndv_rm: bool) -> None:
    """Around the eager limit and past the MTU, by remote-memory write or port messages."""

    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.Send(np.arange(size, dtype=np.uint8) * 7, dest=1, tag=2)
            return None
        buf = np.zeros(size, dtype=np.uint8)
        status = MPI.Status()
        comm.Recv(buf, source=0, tag=2, status=status)
        return buf, status.Get_count(MPI.BYTE), status.Get_source(), status.Get_tag()

    buf, count, source, tag = run(2, body, eager_limit=256, rndv_rm=rndv_rm)[1]
    assert (count, source, tag) == (size, 0, 2)
    assert np.array_equal(buf, np.arange(size, dtype=np.uint8) * 7)


def test_messages_survive_a_lossy_reordering_network() -> None:
    def body(comm: Any) -> Any:
        peer = 1 - comm.rank
        out = np.zeros(3000, dtype=np.int32)
        for i in range(4):
            comm.Sendrecv(np.arange(3000, dtype=np.int32) + 10 * comm.rank + i, dest=peer,
                          recvbuf=out, source=peer)  # fmt: skip
            assert np.array_equal(out, np.arange(3000, dtype=np.int32) + 10 * peer + i)
        return comm.allreduce(comm.rank + 1)

    route = BadNetwork(5, loss=0.05, dup=0.05, reorder=0.2, corrupt=0.02)
    assert run(2, body, route=route, seed=5, eager_limit=SMALL_EAGER) == [3, 3]
    assert route.counts["lost"] > 0
    assert route.counts["reordered"] > 0


def test_a_rank_sends_to_itself() -> None:
    def body(comm: Any) -> Any:
        req = comm.isend({"me": comm.rank}, dest=comm.rank, tag=1)
        got = comm.recv(source=comm.rank, tag=1)
        req.wait()
        big = np.arange(10_000, dtype=np.float64)
        out = np.empty_like(big)
        comm.Sendrecv(big, dest=comm.rank, recvbuf=out, source=comm.rank)
        return got, bool(np.array_equal(out, big))

    assert run(1, body) == [({"me": 0}, True)]
    assert run(3, body) == [({"me": r}, True) for r in range(3)]


def test_proc_null_completes_at_once() -> None:
    def body(comm: Any) -> Any:
        comm.send("lost", dest=MPI.PROC_NULL)
        status = MPI.Status()
        got = comm.recv(source=MPI.PROC_NULL, status=status)
        buf = np.full(4, 9, dtype=np.int32)
        comm.Recv(buf, source=MPI.PROC_NULL)
        return got, status.Get_source(), status.Get_tag(), status.Get_count(), buf.tolist()

    assert run(2, body) == [(None, MPI.PROC_NULL, MPI.ANY_TAG, 0, [9, 9, 9, 9])] * 2


def test_sendrecv_replace_rotates_a_ring() -> None:
    def body(comm: Any) -> Any:
        n, r = comm.size, comm.rank
        buf = np.array([r, r * r], dtype=np.int64)
        comm.Sendrecv_replace(buf, dest=(r + 1) % n, source=(r - 1) % n)
        obj = comm.sendrecv(("from", r), dest=(r - 1) % n, source=(r + 1) % n)
        return buf.tolist(), obj

    n = 5
    assert run(n, body) == [
        ([(r - 1) % n, ((r - 1) % n) ** 2], ("from", (r + 1) % n)) for r in range(n)
    ]


def test_synchronous_send_completes_only_once_matched() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            req = comm.Issend(np.arange(4, dtype=np.int32), dest=1, tag=3)
            before = req.Test()
            comm.send("go", dest=1, tag=9)  # rank 1 posts its receive only after this
            req.Wait()
            return before
        comm.recv(source=0, tag=9)
        buf = np.empty(4, dtype=np.int32)
        comm.Recv(buf, source=0, tag=3)
        return buf.tolist()

    assert run(2, body) == [False, [0, 1, 2, 3]]


# -- probes -----------------------------------------------------------------------------------


def test_probe_reports_the_envelope_and_size_and_leaves_the_message() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.Send(np.arange(6, dtype=np.int32), dest=1, tag=11)
            return None
        status = MPI.Status()
        comm.Probe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        seen = status.Get_source(), status.Get_tag(), status.Get_count(MPI.INT)
        buf = np.empty(status.Get_count(MPI.INT), dtype=np.int32)
        comm.Recv(buf, source=status.Get_source(), tag=status.Get_tag())
        return seen, buf.tolist()

    assert run(2, body)[1] == ((0, 11, 6), [0, 1, 2, 3, 4, 5])


def test_iprobe_is_false_until_a_message_is_there() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.barrier()
            comm.send("late", dest=1, tag=2)
            return None
        before = comm.iprobe(source=0, tag=2)
        comm.barrier()
        comm.probe(source=0, tag=2)
        after = comm.iprobe(source=0, tag=2), comm.iprobe(source=0, tag=3)
        return before, after, comm.recv(source=0, tag=2)

    assert run(2, body)[1] == (False, (True, False), "late")


def test_mprobe_takes_the_message_out_of_matching() -> None:
    """A matched probe removes the message: a receive posted afterwards gets the next one."""

    def body(comm: Any) -> Any:
        if comm.rank == 0:
            for word in ("one", "two", "three"):
                comm.send(word, dest=1, tag=5)
            return None
        status = MPI.Status()
        first = comm.mprobe(source=0, tag=5, status=status)
        second = comm.recv(source=0, tag=5)
        third = comm.improbe(source=0, tag=5)
        while third is None:  # a Test-like loop: the harness lets the world move
            third = comm.improbe(source=0, tag=5)
        return first.recv(), second, third.recv(), status.Get_source(), status.Get_tag()

    assert run(2, body)[1] == ("one", "two", "three", 0, 5)


def test_mprobe_of_a_buffer_with_its_count() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 1:
            comm.Send(np.arange(70_000, dtype=np.uint8), dest=0, tag=1)  # rendezvous
            return None
        status = MPI.Status()
        msg = comm.Mprobe(source=1, tag=1, status=status)
        buf = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
        msg.Recv(buf)
        return buf.size, bool(np.array_equal(buf, np.arange(70_000, dtype=np.uint8)))

    assert run(2, body, eager_limit=SMALL_EAGER)[0] == (70_000, True)


def test_improbe_of_proc_null_is_the_no_proc_message() -> None:
    def body(comm: Any) -> Any:
        msg = comm.improbe(source=MPI.PROC_NULL)
        return msg is not None and msg.recv() is None

    assert run(2, body) == [True, True]


# -- cancellation ----------------------------------------------------------------------------


def test_cancelling_a_pending_receive_leaves_the_message_for_the_next_one() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.barrier()
            comm.send("payload", dest=1, tag=8)
            return None
        buf = np.empty(8, dtype=np.uint8)
        req = comm.Irecv(buf, source=0, tag=8)
        req.Cancel()
        status = MPI.Status()
        req.Wait(status)
        comm.barrier()
        return status.Is_cancelled(), comm.recv(source=0, tag=8), req == MPI.REQUEST_NULL

    assert run(2, body)[1] == (True, "payload", True)


def test_cancelling_a_lowercase_receive() -> None:
    def body(comm: Any) -> Any:
        req = comm.irecv(source=MPI.ANY_SOURCE, tag=42)
        req.cancel()
        status = MPI.Status()
        req.wait(status)
        return status.Is_cancelled()

    assert run(3, body) == [True, True, True]


def test_cancelling_a_completed_receive_has_no_effect() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.send(5, dest=1)
            return None
        req = comm.irecv(source=0)
        while not req.Get_status():  # completes without being waited for (a Test loop)
            pass
        req.cancel()
        status = MPI.Status()
        value = req.wait(status)
        return value, status.Is_cancelled()

    assert run(2, body)[1] == (5, False)


@pytest.mark.parametrize("polls", [0, 1, 2])
@pytest.mark.parametrize("seed", [None, 1])
def test_cancel_racing_a_rendezvous_either_cancels_or_completes_whole(
    polls: int, seed: int | None
) -> None:
    """Cancel after the RTS may have matched the receive: it is cancelled and the message
    stays for the next receive, or it completed with all the data; never half of each."""

    def body(comm: Any) -> Any:
        if comm.rank == 1:
            comm.Send(np.arange(10_000, dtype=np.int64), dest=0, tag=1)
            return None
        buf = np.zeros(10_000, dtype=np.int64)
        req = comm.Irecv(buf, source=MPI.ANY_SOURCE, tag=1)
        for _ in range(polls):
            req.Get_status()
        req.Cancel()
        status = MPI.Status()
        req.Wait(status)
        if status.Is_cancelled():
            comm.Recv(buf, source=1, tag=1)
        return status.Is_cancelled(), int(buf.sum())

    cancelled, total = run(2, body, seed=seed, eager_limit=SMALL_EAGER)[0]
    assert total == sum(range(10_000))
    assert cancelled == (polls == 0)  # one poll lets the whole rendezvous through here


# -- errors ------------------------------------------------------------------------------------


def _error_class(call: Any) -> int | None:
    try:
        call()
    except MPI.Exception as exc:
        return int(exc.Get_error_class())
    return None


def test_invalid_ranks_and_tags_raise_the_right_error_class() -> None:
    def body(comm: Any) -> Any:
        n = comm.size
        buf = np.zeros(1, dtype=np.int32)
        return [
            _error_class(lambda: comm.send(1, dest=n)),
            _error_class(lambda: comm.send(1, dest=-7)),
            _error_class(lambda: comm.Send(buf, dest=n + 3)),
            _error_class(lambda: comm.recv(source=n)),
            _error_class(lambda: comm.Irecv(buf, source=-9)),
            _error_class(lambda: comm.send(1, dest=0, tag=-3)),
            _error_class(lambda: comm.send(1, dest=0, tag=MPI.ANY_TAG)),
            _error_class(lambda: comm.Isend(buf, dest=0, tag=MPI.TAG_UB_VALUE + 1)),
            _error_class(lambda: comm.recv(source=0, tag=-5)),
        ]

    rank_, tag_ = MPI.ERR_RANK, MPI.ERR_TAG
    want = [rank_, rank_, rank_, rank_, rank_, tag_, tag_, tag_, tag_]
    assert run(2, body) == [want, want]


def test_a_truncated_receive_raises_err_truncate() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.Send(np.arange(10, dtype=np.int32), dest=1, tag=1)
            comm.Send(np.arange(5000, dtype=np.int32), dest=1, tag=2)  # rendezvous
            return None
        small = np.zeros(4, dtype=np.int32)
        classes = [_error_class(lambda t=t: comm.Recv(small, source=0, tag=t)) for t in (1, 2)]
        return classes, comm.rank

    assert run(2, body, eager_limit=SMALL_EAGER)[1] == ([MPI.ERR_TRUNCATE] * 2, 1)


def test_a_bsend_larger_than_the_attached_buffer_raises_err_buffer() -> None:
    def body(comm: Any) -> Any:
        MPI.Attach_buffer(bytearray(200))
        error = _error_class(lambda: comm.bsend(b"x" * 1000, dest=0))
        MPI.Detach_buffer()
        return error

    assert run(1, body) == [MPI.ERR_BUFFER]


def test_a_truncated_nonblocking_receive_fails_at_wait() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.Send(np.arange(10, dtype=np.int64), dest=1)
            return None
        req = comm.Irecv(np.zeros(3, dtype=np.int64), source=0)
        return _error_class(req.Wait)

    assert run(2, body)[1] == MPI.ERR_TRUNCATE
