"""``Request`` sets, persistent and buffered requests on an in-process job
(tests/unit/mpisim.py): what completes, in which slot, with which status."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.unit.mpisim import MPI, run


def _send_after_go(comm: Any, tags: list[int]) -> None:
    """Rank 0: wait for rank 1's go, then send ``("m", tag)`` on each tag, in order."""
    comm.recv(source=1, tag=999)
    for tag in tags:
        comm.send(("m", tag), dest=1, tag=tag)


def test_waitall_returns_every_object_in_request_order() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            _send_after_go(comm, [3, 1, 2])
            return None
        reqs = [comm.irecv(source=0, tag=t) for t in (1, 2, 3)]
        testall_before = MPI.Request.testall(reqs)
        comm.send("go", dest=0, tag=999)
        statuses: list[Any] = []
        objects = MPI.Request.waitall(reqs, statuses)
        return testall_before, objects, [s.Get_tag() for s in statuses]

    assert run(2, body)[1] == ((False, None), [("m", 1), ("m", 2), ("m", 3)], [1, 2, 3])


def test_waitany_hands_out_each_request_once_then_undefined() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            _send_after_go(comm, [2, 0, 1])
            return None
        reqs = [comm.irecv(source=0, tag=t) for t in (0, 1, 2)]
        comm.send("go", dest=0, tag=999)
        seen = []
        status = MPI.Status()
        for _ in range(3):
            index, obj = MPI.Request.waitany(reqs, status)
            seen.append((index, obj, status.Get_tag()))
        after = MPI.Request.waitany(reqs)
        return sorted(seen), after, [r == MPI.REQUEST_NULL for r in reqs]

    seen, after, nulls = run(2, body)[1]
    assert seen == [(0, ("m", 0), 0), (1, ("m", 1), 1), (2, ("m", 2), 2)]
    assert after == (MPI.UNDEFINED, None)
    assert nulls == [True, True, True]


def test_waitsome_and_testsome_return_the_completed_indices() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            _send_after_go(comm, [1])
            comm.recv(source=1, tag=998)
            comm.send(("m", 0), dest=1, tag=0)
            comm.send(("m", 2), dest=1, tag=2)
            return None
        reqs = [comm.irecv(source=0, tag=t) for t in (0, 1, 2)]
        nothing = MPI.Request.testsome(reqs)
        comm.send("go", dest=0, tag=999)
        first = MPI.Request.Waitsome(reqs)
        comm.send("more", dest=0, tag=998)
        rest: list[int] = []
        while len(rest) < 2:
            rest += MPI.Request.Waitsome(reqs) or []
        done = MPI.Request.Testsome(reqs)
        return nothing, first, sorted(rest), done

    nothing, first, rest, done = run(2, body)[1]
    assert nothing == ([], [])
    assert first == [1]
    assert rest == [0, 2]
    assert done is None  # every request is REQUEST_NULL now


def test_testany_and_testall_complete_what_is_done() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            _send_after_go(comm, [5, 6])
            return None
        reqs = [comm.irecv(source=0, tag=t) for t in (5, 6)]
        idle = MPI.Request.testany(reqs)
        comm.send("go", dest=0, tag=999)
        while not MPI.Request.Get_status_all(reqs):
            pass
        index, flag, obj = MPI.Request.testany(reqs)
        flag_all, objs = MPI.Request.testall(reqs)
        return idle, (index, flag, obj), flag_all, objs

    idle, first, flag_all, objs = run(2, body)[1]
    assert idle == (MPI.UNDEFINED, False, None)
    assert first == (0, True, ("m", 5))
    assert flag_all is True
    assert objs == [None, ("m", 6)]  # the first was completed by testany: now REQUEST_NULL


def test_request_null_in_a_set_is_ignored() -> None:
    def body(comm: Any) -> Any:
        peer = 1 - comm.rank
        reqs = [MPI.REQUEST_NULL, comm.isend(comm.rank, dest=peer), comm.irecv(source=peer)]
        objects = MPI.Request.waitall(reqs)
        flag, none = MPI.Request.testall([MPI.REQUEST_NULL])
        return objects, flag, none, MPI.Request.Waitsome([MPI.REQUEST_NULL])

    assert run(2, body) == [
        ([None, None, 1], True, [None], None),
        ([None, None, 0], True, [None], None),
    ]


def test_get_status_does_not_complete_the_request() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            comm.send("x", dest=1, tag=4)
            return None
        req = comm.irecv(source=0, tag=4)
        status = MPI.Status()
        while not req.Get_status(status):
            pass
        again = req.Get_status()
        return status.Get_source(), status.Get_tag(), again, req.wait(), req == MPI.REQUEST_NULL

    assert run(2, body)[1] == (0, 4, True, "x", True)


def test_cancel_and_free_of_request_null_raise_err_request() -> None:
    def body(comm: Any) -> Any:
        classes = []
        for call in (MPI.REQUEST_NULL.Cancel, MPI.REQUEST_NULL.Free):
            try:
                call()
                classes.append(None)
            except MPI.Exception as exc:
                classes.append(exc.Get_error_class())
        return classes

    assert run(1, body) == [[MPI.ERR_REQUEST, MPI.ERR_REQUEST]]


def test_a_freed_send_request_still_delivers() -> None:
    def body(comm: Any) -> Any:
        if comm.rank == 0:
            req = comm.Isend(np.arange(3, dtype=np.int32), dest=1)
            req.Free()
            return req == MPI.REQUEST_NULL
        buf = np.empty(3, dtype=np.int32)
        comm.Recv(buf, source=0)
        return buf.tolist()

    assert run(2, body) == [True, [0, 1, 2]]


# -- persistent requests ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["Send_init", "Ssend_init", "Bsend_init", "Rsend_init"])
def test_persistent_requests_restart_with_the_buffer_contents(kind: str) -> None:
    def body(comm: Any) -> Any:
        buf = np.zeros(4, dtype=np.int32)
        if comm.rank == 0:
            if kind == "Bsend_init":
                MPI.Attach_buffer(bytearray(4096))
            req = getattr(comm, kind)(buf, dest=1, tag=6)
            for i in range(3):
                comm.recv(source=1, tag=1)  # rank 1 posted its receive (Rsend needs it)
                buf[:] = np.arange(4) + 10 * i
                req.Start()
                req.Wait()
            req.Free()
            if kind == "Bsend_init":
                MPI.Detach_buffer()
            return None
        req = comm.Recv_init(buf, source=0, tag=6)
        got = []
        for _ in range(3):
            req.Start()
            comm.send("posted", dest=0, tag=1)
            status = MPI.Status()
            req.Wait(status)
            got.append((buf.tolist(), status.Get_count(MPI.INT)))
        req.Free()
        return got

    assert run(2, body)[1] == [([10 * i, 10 * i + 1, 10 * i + 2, 10 * i + 3], 4) for i in range(3)]


def test_startall_and_an_inactive_persistent_request() -> None:
    def body(comm: Any) -> Any:
        peer = 1 - comm.rank
        out = np.array([comm.rank], dtype=np.int64)
        into = np.array([-1], dtype=np.int64)
        reqs = [comm.Send_init(out, dest=peer, tag=2), comm.Recv_init(into, source=peer, tag=2)]
        inactive = MPI.Request.Testall(reqs)  # inactive persistent requests count as done
        results = []
        for round_ in range(2):
            out[0] = 100 * round_ + comm.rank
            MPI.Prequest.Startall(reqs)
            MPI.Request.Waitall(reqs)
            results.append(int(into[0]))
        for req in reqs:
            req.Free()
        return inactive, results

    assert run(2, body) == [(True, [1, 101]), (True, [0, 100])]


def test_buffered_sends_from_an_attached_buffer_per_rank() -> None:
    """Each rank has its own attached buffer (process state, kept apart by the harness)."""

    def body(comm: Any) -> Any:
        MPI.Attach_buffer(bytearray(1 << 16))
        peer = (comm.rank + 1) % comm.size
        for i in range(3):
            comm.bsend((comm.rank, i), dest=peer, tag=i)
        got = [comm.recv(source=(comm.rank - 1) % comm.size, tag=i) for i in range(3)]
        detached = MPI.Detach_buffer()
        return got, len(detached)

    n = 3
    assert run(n, body) == [([((r - 1) % n, i) for i in range(3)], 1 << 16) for r in range(n)]
