"""Intercommunicators on an in-process job (tests/unit/mpisim.py): creation from two halves of
a communicator, point-to-point across, Merge in both orders, Dup, Split, Compare and Free."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.mpisim import MPI, run


def _halves(comm: Any) -> tuple[Any, Any, int]:
    """(the half intracommunicator, the intercommunicator to the other half, color)."""
    low = comm.rank < comm.size // 2
    color = 0 if low else 1
    half = comm.Split(color, key=comm.rank)
    remote_leader = comm.size // 2 if low else 0
    inter = half.Create_intercomm(0, comm, remote_leader, tag=11)
    return half, inter, color


@pytest.mark.parametrize("n", [2, 3, 5])
def test_intercomm_sizes_groups_and_point_to_point_across(n: int) -> None:
    def body(comm: Any) -> Any:
        half, inter, color = _halves(comm)
        local, remote = inter.Get_group(), inter.Get_remote_group()
        facts = (inter.Is_inter(), inter.Is_intra(), inter.size, inter.rank,
                 inter.remote_size, local.size, remote.size)  # fmt: skip
        # every process sends its world rank to each remote rank; receives name remote ranks
        reqs = [inter.isend(comm.rank, dest=r, tag=3) for r in range(inter.remote_size)]
        got = [inter.recv(source=r, tag=3) for r in range(inter.remote_size)]
        MPI.Request.waitall(reqs)
        status = MPI.Status()
        inter.send("last", dest=0, tag=4)
        if inter.rank == 0:
            for _ in range(inter.remote_size):
                inter.recv(source=MPI.ANY_SOURCE, tag=4, status=status)
        inter.Free()
        half.Free()
        return color, facts, got, inter == MPI.COMM_NULL

    low = n // 2
    for rank, (color, facts, got, freed) in enumerate(run(n, body)):
        mine, theirs = (low, n - low) if color == 0 else (n - low, low)
        local_rank = rank if color == 0 else rank - low
        assert facts == (True, False, mine, local_rank, theirs, mine, theirs)
        assert got == (list(range(low, n)) if color == 0 else list(range(low)))
        assert freed


@pytest.mark.parametrize(("low_high", "high_high"), [(False, True), (True, False), (True, True)])
def test_merge_puts_the_low_group_first(low_high: bool, high_high: bool) -> None:
    n = 5

    def body(comm: Any) -> Any:
        half, inter, color = _halves(comm)
        merged = inter.Merge(high=low_high if color == 0 else high_high)
        total = merged.allreduce(comm.rank)
        result = (merged.size, merged.rank, total, merged.Is_inter())
        merged.Free()
        inter.Free()
        half.Free()
        return result

    results = run(n, body)
    low_first = (low_high, 0) < (high_high, n // 2)
    for rank, (size, merged_rank, total, is_inter) in enumerate(results):
        assert (size, total, is_inter) == (n, sum(range(n)), False)
        if low_first:
            assert merged_rank == rank
        else:
            assert merged_rank == (rank - n // 2) % n


def test_dup_split_compare_and_free_give_contexts_back() -> None:
    def body(comm: Any) -> Any:
        before = comm._state().runtime.free_context_mask()
        half, inter, color = _halves(comm)
        dup = inter.Dup()
        compare = (inter.Compare(inter), inter.Compare(dup), inter.Compare(half))
        dup.send(("dup", comm.rank), dest=0, tag=1)
        on_dup = dup.recv(source=MPI.ANY_SOURCE, tag=1) if dup.rank == 0 else None
        if dup.rank == 0:
            for _ in range(dup.remote_size - 1):
                dup.recv(source=MPI.ANY_SOURCE, tag=1)
        split = inter.Split(inter.rank % 2, key=-inter.rank)
        split_facts = None
        if split != MPI.COMM_NULL:
            split_facts = (split.size, split.rank, split.remote_size)
            split.Free()
        with pytest.raises(MPI.Exception):
            inter.Create(inter.Get_group())
        for c in (dup, inter, half):
            c.Free()
        comm.Barrier()
        after = comm._state().runtime.free_context_mask()
        return color, compare, on_dup, split_facts, before == after

    n = 5  # halves of 2 (ranks 0, 1) and 3 (ranks 2, 3, 4)
    for rank, (color, compare, on_dup, split_facts, restored) in enumerate(run(n, body)):
        assert compare == (MPI.IDENT, MPI.CONGRUENT, MPI.UNEQUAL)
        if rank in (0, 2):
            assert on_dup[0] == "dup"
            assert on_dup[1] in ((2, 3, 4) if color == 0 else (0, 1))
        local_rank = rank if color == 0 else rank - 2
        # color local_rank % 2: evens 0 | 0, 2; odds 1 | 3; keys reverse the order
        expected = {0: (1, 0, 2), 1: (1, 0, 1), 2: (2, 1, 1), 3: (1, 0, 1), 4: (2, 0, 1)}[rank]
        assert split_facts == expected, (rank, local_rank)
        assert restored


@pytest.mark.parametrize("n", [2, 3, 5])
def test_collectives_across_an_intercommunicator(n: int) -> None:
    """Barrier, bcast/Bcast from a root of one group to the other, allreduce/Allreduce (each
    group gets the other's reduction) and allgather (the other group's objects); a root
    outside the remote group is ERR_ROOT (every collective: test_mpi_inproc_intercoll.py)."""

    def body(comm: Any) -> Any:
        import numpy as np

        half, inter, color = _halves(comm)
        inter.Barrier()
        inter.barrier()
        # group 0's rank 0 broadcasts to group 1
        if color == 0:
            root = MPI.ROOT if inter.rank == 0 else MPI.PROC_NULL
            sent = inter.bcast({"from": comm.rank}, root=root)
            inter.Bcast(np.arange(4, dtype=np.int64) * 7, root=root)
            buf = None
        else:
            sent = inter.bcast(None, root=0)
            buf = np.zeros(4, dtype=np.int64)
            inter.Bcast(buf, root=0)
        total = inter.allreduce(comm.rank, MPI.SUM)
        out = np.zeros(2, dtype=np.int64)
        inter.Allreduce(np.array([comm.rank, 1], dtype=np.int64), out, MPI.SUM)
        others = inter.allgather(comm.rank)
        with pytest.raises(MPI.Exception) as err:  # a root beyond the remote group
            inter.Gather(np.zeros(1), None, root=inter.remote_size)
        inter.Free()
        half.Free()
        return (color, sent, None if buf is None else buf.tolist(), total, out.tolist(), others,
                err.value.Get_error_class())  # fmt: skip

    low = n // 2
    for color, sent, buf, total, out, others, refused in run(n, body):
        theirs = list(range(low, n)) if color == 0 else list(range(low))
        if color == 1:
            assert sent == {"from": 0}
            assert buf == [0, 7, 14, 21]
        else:
            assert sent is None
        assert total == sum(theirs)
        assert out == [sum(theirs), len(theirs)]
        assert others == theirs
        assert refused == MPI.ERR_ROOT


@pytest.mark.parametrize(("n", "low"), [(2, 1), (5, 2), (5, 3)])
def test_create_from_groups_and_split_type(n: int, low: int) -> None:
    """Create_from_groups gives an intercommunicator congruent to Create_intercomm's (leaders
    other than rank 0, no parent); Split_type by node is COMM_NULL (every emulated node is its
    own domain), as is UNDEFINED."""

    def body(comm: Any) -> Any:
        half, inter, color = _halves_at(comm, low)
        world = comm.Get_group()
        groups = (world.Range_incl([(0, low - 1, 1)]), world.Range_incl([(low, n - 1, 1)]))
        mine, theirs = groups[color], groups[1 - color]
        made = MPI.Intercomm.Create_from_groups(mine, mine.size - 1, theirs, theirs.size - 1)
        facts = (made.rank, made.size, made.remote_size, inter.Compare(made))
        total = made.allreduce(comm.rank)  # the new intercommunicator carries traffic
        shared = inter.Split_type(MPI.COMM_TYPE_SHARED)
        undefined = inter.Split_type(MPI.UNDEFINED)
        nulls = (shared == MPI.COMM_NULL, undefined == MPI.COMM_NULL)
        for c in (made, inter, half):
            c.Free()
        return color, facts, total, nulls

    for rank, (color, facts, total, nulls) in enumerate(run(n, body)):
        mine = list(range(low)) if color == 0 else list(range(low, n))
        theirs = sorted(set(range(n)) - set(mine))
        assert facts == (mine.index(rank), len(mine), len(theirs), MPI.CONGRUENT)
        assert total == sum(theirs)
        assert nulls == (True, True)


def _halves_at(comm: Any, low: int) -> tuple[Any, Any, int]:
    """Like `_halves`, with ``low`` processes in the low group."""
    color = 0 if comm.rank < low else 1
    half = comm.Split(color, key=comm.rank)
    inter = half.Create_intercomm(0, comm, low if color == 0 else 0, tag=12)
    return half, inter, color


@pytest.mark.parametrize("n", [2, 3, 5])
def test_an_intercommunicator_and_its_local_group_have_different_contexts(n: int) -> None:
    """The local intracommunicator's context is claimed from a mask read before the
    intercommunicator's own claim: it must still leave that pair out (it once took the same
    one), and every member of a group must pick the same two."""

    def body(comm: Any) -> Any:
        half, inter, color = _halves(comm)
        st = inter._state()
        contexts = (st.context, st.local.context)
        inter.Free()
        half.Free()
        return color, contexts

    results = run(n, body)
    for _, (inter_ctx, inner_ctx) in results:
        assert inter_ctx // 2 != inner_ctx // 2
    assert len({ctx[0] for _, ctx in results}) == 1  # one context across both groups
    for color in (0, 1):
        assert len({ctx[1] for c, ctx in results if c == color}) == 1
