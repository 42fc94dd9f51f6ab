"""Communicator creation and release on an in-process job (tests/unit/mpisim.py): Dup, Split,
Create_group, Create, Create_cart and Free, their groups and ranks, and traffic kept apart."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.unit.mpisim import MPI, run

SIZES = (1, 2, 3, 4, 5)


@pytest.mark.parametrize("n", SIZES)
def test_dup_has_the_same_group_and_a_new_context(n: int) -> None:
    def body(comm: Any) -> Any:
        dup = comm.Dup()
        result = (
            dup.Get_size(),
            dup.Get_rank(),
            MPI.Comm.Compare(comm, dup),
            MPI.Comm.Compare(comm, comm),
            dup.allreduce(comm.rank),
            dup.Get_group().Get_rank(),
        )
        dup.Free()
        return result, dup == MPI.COMM_NULL

    assert run(n, body) == [
        ((n, r, MPI.CONGRUENT, MPI.IDENT, n * (n - 1) // 2, r), True) for r in range(n)
    ]


@pytest.mark.parametrize("n", SIZES)
def test_split_by_colour_orders_by_key_then_old_rank(n: int) -> None:
    def body(comm: Any) -> Any:
        r = comm.rank
        colour = MPI.UNDEFINED if r == 1 else r % 2
        sub = comm.Split(colour, key=-r)  # reversed order within each colour
        if sub == MPI.COMM_NULL:
            return None
        result = sub.Get_rank(), sub.Get_size(), sub.allgather(r), sub.bcast(r, root=0)
        sub.Free()
        return result

    got = run(n, body)
    for r in range(n):
        if r == 1:
            assert got[r] is None
            continue
        members = sorted((m for m in range(n) if m != 1 and m % 2 == r % 2), reverse=True)
        assert got[r] == (members.index(r), len(members), members, members[0])


def test_split_with_equal_keys_keeps_the_old_order_and_many_splits_agree() -> None:
    def body(comm: Any) -> Any:
        out = []
        for _ in range(6):  # context ids are agreed anew each time and reused after Free
            sub = comm.Split(comm.rank // 2, key=0)
            out.append((sub.Get_rank(), sub.allreduce(comm.rank)))
            sub.Free()
        return out

    got = run(5, body)
    want = {0: (0, 1), 1: (1, 1), 2: (0, 5), 3: (1, 5), 4: (0, 4)}
    assert got == [[want[r]] * 6 for r in range(5)]


@pytest.mark.parametrize("n", [3, 4, 5])
def test_create_group_is_collective_over_the_group_only(n: int) -> None:
    """Only the odd ranks call Create_group; the others go on without them."""

    def body(comm: Any) -> Any:
        r = comm.rank
        odd = comm.Get_group().Incl([i for i in range(n) if i % 2 == 1])
        if r % 2 == 0:
            return odd.Get_rank() == MPI.UNDEFINED
        sub = comm.Create_group(odd, tag=7)
        result = sub.Get_rank(), sub.Get_size(), sub.allgather(r), sub.Get_group().Get_rank()
        sub.Free()
        odd.Free()
        return result

    odds = [i for i in range(n) if i % 2 == 1]
    assert run(n, body) == [
        True if r % 2 == 0 else (odds.index(r), len(odds), odds, odds.index(r)) for r in range(n)
    ]


def test_create_gives_comm_null_outside_the_group() -> None:
    def body(comm: Any) -> Any:
        group = comm.Get_group().Excl([0, 2])
        sub = comm.Create(group)
        if sub == MPI.COMM_NULL:
            return None
        result = sub.Get_rank(), sub.allreduce(comm.rank), MPI.Comm.Compare(sub, comm)
        sub.Free()
        return result

    assert run(4, body) == [None, (0, 4, MPI.UNEQUAL), None, (1, 4, MPI.UNEQUAL)]


def test_group_translation_and_comparison_per_rank() -> None:
    def body(comm: Any) -> Any:
        world = comm.Get_group()
        rev = world.Incl(list(reversed(range(comm.size))))
        return (
            world.Get_rank(),
            rev.Get_rank(),
            MPI.Group.Translate_ranks(rev, [0, 1], world),
            MPI.Group.Compare(world, rev),
        )

    assert run(3, body) == [(r, 2 - r, [2, 1], MPI.SIMILAR) for r in range(3)]


@pytest.mark.parametrize(("n", "dims", "periods"), [
    (1, [1], [True]),
    (4, [2, 2], [True, False]),
    (5, [5], [False]),
    (4, [4, 1], [True, True]),
])  # fmt: skip
def test_create_cart_coords_shift_and_sub(n: int, dims: list[int], periods: list[bool]) -> None:
    def body(comm: Any) -> Any:
        cart = comm.Create_cart(dims, periods=periods, reorder=False)
        r = cart.Get_rank()
        coords = cart.Get_coords(r)
        shift = cart.Shift(0, 1)
        sub = cart.Sub([True] + [False] * (len(dims) - 1))
        # a halo exchange along dimension 0 over the shift's neighbours
        left, right = shift
        got = cart.sendrecv(r, dest=right, source=left)
        result = (
            cart.Get_topo(),
            coords,
            cart.Get_cart_rank(coords) == r,
            shift,
            got,
            sub.Get_size(),
            sub.allgather(r),
        )
        sub.Free()
        cart.Free()
        return result

    results = run(n, body)
    for r, (topo, coords, back, shift, got, sub_size, sub_members) in enumerate(results):
        assert topo == (dims, periods, coords)
        strides = [int(np.prod(dims[k + 1 :])) for k in range(len(dims))]
        assert coords == [(r // strides[k]) % dims[k] for k in range(len(dims))]
        assert back
        c0 = coords[0]
        up = c0 + 1 if c0 + 1 < dims[0] else (0 if periods[0] else None)
        down = c0 - 1 if c0 > 0 else (dims[0] - 1 if periods[0] else None)
        rank_at = [r + (c - c0) * strides[0] if c is not None else MPI.PROC_NULL
                   for c in (down, up)]  # fmt: skip
        assert shift == (rank_at[0], rank_at[1])
        assert got == (None if rank_at[0] == MPI.PROC_NULL else rank_at[0])
        assert sub_size == dims[0]
        assert sub_members == [r + (c - c0) * strides[0] for c in range(dims[0])]


def test_cart_outside_the_grid_gets_comm_null() -> None:
    def body(comm: Any) -> Any:
        cart = comm.Create_cart([2], periods=[False])
        if cart == MPI.COMM_NULL:
            return None
        result = cart.Get_rank(), cart.allreduce(1)
        cart.Free()
        return result

    assert run(3, body) == [(0, 2), (1, 2), None]


def test_freed_communicators_give_their_context_back() -> None:
    """Far more Dup/Free cycles than a rank could hold at once if ids were never reused."""

    def body(comm: Any) -> Any:
        total = 0
        for _ in range(40):
            dup = comm.Dup()
            total += dup.allreduce(1)
            dup.Free()
        return total

    assert run(3, body) == [120, 120, 120]


def test_traffic_on_sibling_communicators_stays_apart() -> None:
    """Two duplicates and the parent carry same-envelope messages, received in reverse
    communicator order."""

    def body(comm: Any) -> Any:
        a, b = comm.Dup(), comm.Dup()
        if comm.rank == 0:
            for c, word in ((comm, "world"), (a, "a"), (b, "b")):
                c.send(word, dest=1, tag=1)
            out = None
        else:
            out = [c.recv(source=0, tag=1) for c in (b, a, comm)]
        a.Free()
        b.Free()
        return out

    assert run(2, body)[1] == ["b", "a", "world"]


def test_free_with_a_pending_receive_completes_later() -> None:
    """Free is collective and lets pending operations finish (MPI 4.0 sec. 6.4.3)."""

    def body(comm: Any) -> Any:
        dup = comm.Dup()
        if comm.rank == 0:
            req = dup.irecv(source=1, tag=2)
            dup.Free()
            comm.send("freed", dest=1)
            return req.wait()
        comm.recv(source=0)
        dup.send("after free", dest=0, tag=2)  # rank 1 has not freed its handle yet
        dup.Free()
        return None

    assert run(2, body)[0] == "after free"


def test_idup_and_split_type_shared() -> None:
    def body(comm: Any) -> Any:
        dup, request = comm.Idup()  # mpi4py: (the new communicator, its request)
        request.Wait()
        shared = comm.Split_type(MPI.COMM_TYPE_SHARED)
        result = dup.allreduce(comm.rank), shared.Get_size(), shared.allreduce(1)
        dup.Free()
        shared.Free()
        return result

    got = run(3, body)
    assert [g[0] for g in got] == [3, 3, 3]
    assert all(size == total for _, size, total in got)


def test_invalid_communicator_calls_raise() -> None:
    def body(comm: Any) -> Any:
        classes = []
        for call in (
            lambda: MPI.COMM_NULL.Get_size(),
            lambda: MPI.COMM_NULL.send(1, dest=0),
            lambda: comm.Create_cart([comm.size + 1]),
            lambda: comm.Split(-5),
        ):
            try:
                call()
                classes.append(None)
            except MPI.Exception as exc:
                classes.append(exc.Get_error_class())
        return classes

    got = run(2, body)
    assert got[0] == got[1]
    assert got[0][:2] == [MPI.ERR_COMM, MPI.ERR_COMM]
    assert got[0][2] in (MPI.ERR_ARG, MPI.ERR_DIMS)
    assert got[0][3] in (MPI.ERR_ARG, MPI.ERR_COMM)  # an invalid colour: MPI names no class
