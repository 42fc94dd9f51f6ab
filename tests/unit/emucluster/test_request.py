"""Request sets: the readiness test of Waitall."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.mpi.request.request import _AllDone

if TYPE_CHECKING:
    from emucluster.mpi.request.status import Status


class _Op:
    """A pending operation that counts how often it is asked whether it is done."""

    def __init__(self) -> None:
        self.finished = False
        self.asked = 0

    def done(self) -> bool:
        self.asked += 1
        return self.finished

    def finish(self, status: Status | None) -> object:
        return None

    def cancel(self) -> None:
        return None


def test_all_done_is_true_only_once_every_operation_is_done() -> None:
    ops = [_Op() for _ in range(4)]
    ready = _AllDone(ops)  # type: ignore[arg-type]
    assert not ready()
    ops[0].finished = ops[2].finished = True
    assert not ready()
    ops[1].finished = True
    assert not ready()
    ops[3].finished = True
    assert ready()
    assert ready()
    assert _AllDone([])()


def test_all_done_asks_each_finished_operation_once() -> None:
    ops = [_Op() for _ in range(64)]
    ready = _AllDone(ops)  # type: ignore[arg-type]
    for op in ops:  # completions one at a time, a look after each
        op.finished = True
        ready()
    assert ready()
    assert all(op.asked <= 2 for op in ops)  # once while pending, once when done
