"""Comm.Free with operations pending (issue 17): the context id is given back only after
they ended (`emucluster.mpi.comm.free`), on a singleton engine without NIC or processes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.config import HostConfig
from emucluster.mpi.comm.free import DeferredRelease, counters, pending_on, release_when_idle
from emucluster.mpi.request.pending import CollDriver
from emucluster.offload.app_bypass import shell as appbypass
from emucluster.offload.app_bypass.core import InstanceKey
from emucluster.p2p.protocol import P2P
from emucluster.port.progress import Progress
from tests.unit.emucluster.test_mpi4py_surface import check

if TYPE_CHECKING:
    import pytest

    from emucluster.coll.context import CollGen

CONTEXT = 6  # a communicator's p2p context id (its collectives use 7)


def _engine() -> Progress:
    return Progress(None, P2P(0, 1))


class _Flag:
    """A pending operation's check that counts how often it is asked."""

    def __init__(self) -> None:
        self.ended = False
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.ended


def test_release_waits_for_every_check_and_runs_once() -> None:
    released: list[int] = []
    first, second = _Flag(), _Flag()
    task = DeferredRelease(CONTEXT, [first, second], released.append)
    assert not task.advance()
    first.ended = True
    assert not task.advance()
    assert (task.waiting(), released) == (1, [])
    asked = first.asked
    second.ended = True
    assert task.advance()
    assert first.asked == asked  # an ended operation is not asked again
    assert task.advance()  # finished: no second release
    assert (task.released, released) == (True, [CONTEXT])


def test_nothing_pending_releases_at_once() -> None:
    engine = _engine()
    engine.recv(CONTEXT + 2, 0, 1, 0, None)  # another communicator's receive
    released: list[int] = []
    assert release_when_idle(engine, CONTEXT, released.append).released
    assert released == [CONTEXT]
    assert engine.advancing == []


def test_posted_receive_defers_until_it_matches() -> None:
    engine = _engine()
    p2p_op = engine.recv(CONTEXT, 0, 1, 0, None)
    coll_op = engine.recv(CONTEXT + 1, 0, 2, 0, None)  # a collective's receive counts too
    assert len(pending_on(engine, CONTEXT)) == 2
    released: list[int] = []
    deferred = counters["deferred"]
    assert not release_when_idle(engine, CONTEXT, released.append).released
    assert counters["deferred"] == deferred + 1
    engine.send(CONTEXT, 0, 1, 0, b"p2p")
    engine.progress()
    assert p2p_op.done
    assert released == []
    engine.send(CONTEXT + 1, 0, 2, 0, b"coll")
    engine.progress()
    assert coll_op.done
    assert released == [CONTEXT]
    assert engine.advancing == []


def test_cancelled_receive_ends_the_wait() -> None:
    engine = _engine()
    op = engine.recv(CONTEXT, 0, 1, 0, None)
    released: list[int] = []
    assert not release_when_idle(engine, CONTEXT, released.append).released
    assert engine.cancel(op)
    engine.progress()
    assert released == [CONTEXT]


def test_unfinished_collective_driver_defers_until_it_finishes() -> None:
    engine = _engine()
    steps: list[str] = []

    def algorithm(context: int) -> CollGen[None]:
        yield [engine.send(context + 1, 0, 3, 0, b"x")]  # complete at once (to itself)
        steps.append(f"{context} waits")
        yield [engine.recv(context + 1, 0, 4, 0, None)]  # a receive posted between steps
        steps.append(f"{context} ended")

    driver = CollDriver(algorithm(CONTEXT), lambda value: value, context=CONTEXT)
    other = CollDriver(algorithm(CONTEXT + 2), lambda value: value, context=CONTEXT + 2)
    engine.add(driver)
    engine.add(other)
    released: list[int] = []
    assert not release_when_idle(engine, CONTEXT, released.append).released
    engine.send(CONTEXT + 1, 0, 4, 0, b"y")
    engine.progress()
    assert driver.finished
    assert released == [CONTEXT]
    assert not other.finished  # the other communicator's driver never held this release
    assert steps == [f"{CONTEXT} waits", f"{CONTEXT + 2} waits", f"{CONTEXT} ended"]


def test_outstanding_app_bypass_reduction_defers(monkeypatch: pytest.MonkeyPatch) -> None:
    """An application-bypass Reduce returned with children outstanding: its asynchronous
    part still sends and matches on the collective context."""
    monkeypatch.setattr(appbypass, "_bypass", None)  # restored after the test
    engine = _engine()
    bypass = appbypass.install(engine, HostConfig())
    descriptors = bypass.core.descriptors
    mine, other = InstanceKey(CONTEXT + 1, 5), InstanceKey(CONTEXT + 3, 5)
    descriptors[other] = None  # type: ignore[assignment]  # another communicator's
    assert pending_on(engine, CONTEXT) == []
    descriptors[mine] = None  # type: ignore[assignment]
    released: list[int] = []
    assert not release_when_idle(engine, CONTEXT, released.append).released
    engine.progress()
    assert released == []
    del descriptors[mine]  # the last child's packet completed it
    engine.progress()
    assert released == [CONTEXT]


def test_free_with_pending_irecv_keeps_the_id_until_it_completes() -> None:
    """Before the fix the Dup after Free took the id, and its message to itself completed
    the freed communicator's Irecv (then the new recv deadlocked)."""
    check(
        """
        from emucluster import MPI
        from emucluster.mpi import lifecycle
        runtime = lifecycle.current()
        old = MPI.COMM_SELF.Dup()
        pair = old._st.context // 2
        pending = old.irecv(source=0, tag=1)
        old.Free()
        assert not runtime.free_context_mask() >> pair & 1
        new = MPI.COMM_SELF.Dup()
        assert new._st.context // 2 != pair
        new.send("new", dest=0, tag=1)
        assert new.recv(source=0, tag=1) == "new"
        assert not pending.Get_status()
        pending.Cancel()
        status = MPI.Status()
        pending.Wait(status)
        assert status.Is_cancelled()
        assert runtime.free_context_mask() >> pair & 1
        assert runtime.stats()["comm_free"] == {"freed": 1, "deferred": 1, "waiting": 0}
        new.Free()
        """
    )


def test_disconnect_waits_for_pending_operations() -> None:
    """Free returns with an Irecv pending; Disconnect waits for it (on a singleton rank,
    where nothing can satisfy it, the wait raises instead of hanging)."""
    check(
        """
        from emucluster import MPI
        from emucluster.mpi import lifecycle
        runtime = lifecycle.current()
        done = MPI.COMM_SELF.Dup()
        done.Ibarrier().Wait()
        done.Disconnect()  # nothing pending: returns at once
        assert done == MPI.COMM_NULL
        comm = MPI.COMM_SELF.Dup()
        pair = comm._st.context // 2
        pending = comm.irecv(source=0, tag=1)
        try:
            comm.Disconnect()
        except MPI.Exception as exc:
            assert exc.Get_error_class() == MPI.ERR_OTHER, exc
            assert "Disconnect" in str(exc), exc
        else:
            raise AssertionError("Disconnect returned with a receive pending")
        assert not runtime.free_context_mask() >> pair & 1
        pending.Cancel()
        pending.Wait()
        assert runtime.free_context_mask() >> pair & 1
        """
    )
