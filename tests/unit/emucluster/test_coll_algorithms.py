"""Every registered collective algorithm on 1..17 ranks against a reference, over collsim.

Each case runs under several seeds (random delivery and resumption orders) in both send modes
(eager: complete on delivery; sync: complete on match), for several roots. Reductions are
checked with an integer sum, a commutative multiset union (counts every contribution exactly
once) and byte concatenation, which is associative but not commutative, so any reordering of
operands shows. collsim itself checks that every rank returns and nothing is left over.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from emucluster import coll
from emucluster.coll.barrier import DISSEMINATION_MAX_RANKS
from emucluster.coll.trees import ceil_log2, pof2_floor
from tests.unit.collsim import Sim, SimFailure, run_collective

if TYPE_CHECKING:
    from collections.abc import Callable

SIZES = range(1, 18)
SEEDS = (1, 2, 3)
MODES = (False, True)  # sync sends?
_INT = struct.Struct(">q")


@dataclass
class Op:
    """A `Combine` for tests, counting its calls."""

    name: str
    fn: Callable[[bytes, bytes], bytes]
    commute: bool
    calls: int = field(default=0)

    def __call__(self, left: bytes, right: bytes) -> bytes:
        self.calls += 1
        return self.fn(left, right)


def _sum(left: bytes, right: bytes) -> bytes:
    return _INT.pack(_INT.unpack(left)[0] + _INT.unpack(right)[0])


def _multiset(left: bytes, right: bytes) -> bytes:
    # Sorted big-endian 4-byte words: union keeps multiplicity, order-free.
    words = sorted(left[i : i + 4] for i in range(0, len(left), 4))
    words += [right[i : i + 4] for i in range(0, len(right), 4)]
    return b"".join(sorted(words))


def _concat(left: bytes, right: bytes) -> bytes:
    return left + right


def reduction_cases(size: int, rng: random.Random) -> list[tuple[Op, list[bytes], Callable]]:
    """(op, per-rank data, reference of a list of contributions) for each test operation."""
    ints = [_INT.pack(rng.randrange(-(10**9), 10**9)) for _ in range(size)]
    words = [struct.pack(">I", rng.randrange(1 << 32)) for _ in range(size)]
    texts = [f"<{r}:".encode() + rng.randbytes(rng.randrange(4)) + b">" for r in range(size)]
    return [
        (Op("sum", _sum, True), ints, lambda xs: _INT.pack(sum(_INT.unpack(x)[0] for x in xs))),
        (Op("multiset", _multiset, True), words, lambda xs: b"".join(sorted(xs))),
        (Op("concat", _concat, False), texts, lambda xs: b"".join(xs)),
    ]


def blocks_for(size: int, rng: random.Random) -> list[bytes]:
    """Per-rank blocks of varied lengths, empty ones included."""
    return [bytes([r % 256]) * rng.choice((0, 1, 3, 17, 100)) for r in range(size)]


def roots_for(size: int, rng: random.Random) -> list[int]:
    return sorted({0, size - 1, size // 2, rng.randrange(size)})


def runs(size: int) -> list[tuple[int, bool]]:
    return [(size * 100 + seed, sync) for seed in SEEDS for sync in MODES]


def algorithms(operation: str) -> list[str]:
    return list(coll.choices(operation))


# -- barrier ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", algorithms("barrier"))
@pytest.mark.parametrize("size", SIZES)
def test_barrier_holds_everyone_until_all_entered(name: str, size: int) -> None:
    algorithm = coll.get("barrier", name)
    for seed, sync in runs(size):
        sim = Sim(size, seed=seed, sync=sync)
        tasks = [sim.spawn(r, algorithm(sim.context(r))) for r in range(size)]
        sim.run()
        assert all(t.result is None for t in tasks)
        last_entry = max(t.entered_at for t in tasks)
        first_exit = min(t.finished_at for t in tasks)
        if size > 1:  # one rank enters and leaves in one resume
            assert last_entry < first_exit, f"seed {seed}: a rank left before all entered"
        if name == "dissemination":
            assert sim.messages == size * ceil_log2(size)
        if name == "tree":
            assert sim.messages == 2 * (size - 1)
        if name == "auto":  # dissemination up to 4 ranks, the tree above
            tree = size > DISSEMINATION_MAX_RANKS
            assert sim.messages == (2 * (size - 1) if tree else size * ceil_log2(size))


# -- bcast / scatter / gather ----------------------------------------------------------------


@pytest.mark.parametrize("name", algorithms("bcast"))
@pytest.mark.parametrize("size", SIZES)
def test_bcast(name: str, size: int) -> None:
    algorithm = coll.get("bcast", name)
    for seed, sync in runs(size):
        rng = random.Random(seed)
        for root in roots_for(size, rng):
            data = rng.randbytes(rng.choice((0, 1, 50)))
            results, sim = run_collective(
                size,
                algorithm,
                [(data if r == root else None, root) for r in range(size)],
                seed=seed,
                sync=sync,
            )
            assert results == [data] * size, f"seed {seed} root {root}"
            if name == "binomial":
                assert sim.messages == size - 1


@pytest.mark.parametrize("name", algorithms("scatter"))
@pytest.mark.parametrize("size", SIZES)
def test_scatter(name: str, size: int) -> None:
    algorithm = coll.get("scatter", name)
    for seed, sync in runs(size):
        rng = random.Random(seed)
        for root in roots_for(size, rng):
            blocks = blocks_for(size, rng)
            results, sim = run_collective(
                size,
                algorithm,
                [(blocks if r == root else None, root) for r in range(size)],
                seed=seed,
                sync=sync,
            )
            assert results == blocks, f"seed {seed} root {root}"
            assert sim.messages == size - 1


@pytest.mark.parametrize("name", algorithms("gather"))
@pytest.mark.parametrize("size", SIZES)
def test_gather(name: str, size: int) -> None:
    algorithm = coll.get("gather", name)
    for seed, sync in runs(size):
        rng = random.Random(seed)
        for root in roots_for(size, rng):
            blocks = blocks_for(size, rng)
            results, sim = run_collective(
                size,
                algorithm,
                [(blocks[r], root) for r in range(size)],
                seed=seed,
                sync=sync,
            )
            expected = [blocks if r == root else None for r in range(size)]
            assert results == expected, f"seed {seed} root {root}"
            assert sim.messages == size - 1


# -- allgather / alltoall --------------------------------------------------------------------


@pytest.mark.parametrize("name", algorithms("allgather"))
@pytest.mark.parametrize("size", SIZES)
def test_allgather(name: str, size: int) -> None:
    algorithm = coll.get("allgather", name)
    for seed, sync in runs(size):
        blocks = blocks_for(size, random.Random(seed))
        results, sim = run_collective(
            size,
            algorithm,
            [(blocks[r],) for r in range(size)],
            seed=seed,
            sync=sync,
        )
        assert results == [blocks] * size, f"seed {seed}"
        if name == "ring":
            assert sim.messages == size * (size - 1)


@pytest.mark.parametrize("name", algorithms("alltoall"))
@pytest.mark.parametrize("size", SIZES)
def test_alltoall(name: str, size: int) -> None:
    algorithm = coll.get("alltoall", name)
    for seed, sync in runs(size):
        rng = random.Random(seed)
        matrix = [
            [f"{i}>{j}".encode() * rng.randrange(3) for j in range(size)] for i in range(size)
        ]
        results, sim = run_collective(
            size,
            algorithm,
            [(matrix[r],) for r in range(size)],
            seed=seed,
            sync=sync,
        )
        expected = [[matrix[i][j] for i in range(size)] for j in range(size)]
        assert results == expected, f"seed {seed}"
        assert sim.messages == size * (size - 1)


# -- reductions --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", algorithms("reduce"))
@pytest.mark.parametrize("size", SIZES)
def test_reduce(name: str, size: int) -> None:
    algorithm = coll.get("reduce", name)
    for seed, sync in runs(size):
        rng = random.Random(seed)
        for root in roots_for(size, rng):
            for op, data, reference in reduction_cases(size, rng):
                results, sim = run_collective(
                    size,
                    algorithm,
                    [(data[r], op, root) for r in range(size)],
                    seed=seed,
                    sync=sync,
                )
                expected = [reference(data) if r == root else None for r in range(size)]
                assert results == expected, f"seed {seed} root {root} op {op.name}"
                if name == "binomial":
                    assert op.calls == size - 1
                    forward = 1 if not op.commute and root != 0 else 0
                    assert sim.messages == size - 1 + forward
                if name in ("linear", "auto"):  # auto is linear at these sizes
                    assert op.calls == size - 1
                    assert sim.messages == size - 1  # straight to the root, no forwarding


@pytest.mark.parametrize("name", algorithms("allreduce"))
@pytest.mark.parametrize("size", SIZES)
def test_allreduce(name: str, size: int) -> None:
    algorithm = coll.get("allreduce", name)
    for seed, sync in runs(size):
        rng = random.Random(seed)
        for op, data, reference in reduction_cases(size, rng):
            results, sim = run_collective(
                size,
                algorithm,
                [(data[r], op) for r in range(size)],
                seed=seed,
                sync=sync,
            )
            assert results == [reference(data)] * size, f"seed {seed} op {op.name}"
            if name == "recursive-doubling":
                pof2 = pof2_floor(size)
                rem = size - pof2
                assert sim.messages == 2 * rem + pof2 * ceil_log2(pof2)
            elif name == "reduce-bcast":
                assert sim.messages == 2 * (size - 1)


@pytest.mark.parametrize("name", algorithms("scan"))
@pytest.mark.parametrize("size", SIZES)
def test_scan(name: str, size: int) -> None:
    algorithm = coll.get("scan", name)
    for seed, sync in runs(size):
        rng = random.Random(seed)
        for op, data, reference in reduction_cases(size, rng):
            results, _ = run_collective(
                size,
                algorithm,
                [(data[r], op) for r in range(size)],
                seed=seed,
                sync=sync,
            )
            expected = [reference(data[: r + 1]) for r in range(size)]
            assert results == expected, f"seed {seed} op {op.name}"


@pytest.mark.parametrize("name", algorithms("exscan"))
@pytest.mark.parametrize("size", SIZES)
def test_exscan(name: str, size: int) -> None:
    algorithm = coll.get("exscan", name)
    for seed, sync in runs(size):
        rng = random.Random(seed)
        for op, data, reference in reduction_cases(size, rng):
            results, _ = run_collective(
                size,
                algorithm,
                [(data[r], op) for r in range(size)],
                seed=seed,
                sync=sync,
            )
            expected = [None] + [reference(data[:r]) for r in range(1, size)]
            assert results == expected, f"seed {seed} op {op.name}"


# -- several collectives on one communicator ---------------------------------------------------


def _program(ctx, size: int, data: list[bytes]):
    """A blocking program: several collectives back to back on one context (one sequence)."""
    rank = ctx.rank
    op = Op("concat", _concat, False)
    total = yield from coll.get("allreduce")(ctx, data[rank], op)
    yield from coll.get("barrier")(ctx)
    first = yield from coll.get("bcast")(ctx, total if rank == size - 1 else None, size - 1)
    part = yield from coll.get("reduce")(ctx, data[rank], op, size // 2)
    everyone = yield from coll.get("allgather")(ctx, data[rank])
    return total, first, part, everyone


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_blocking_collectives_back_to_back_on_one_context(size: int) -> None:
    data = [f"[{r}]".encode() for r in range(size)]
    whole = b"".join(data)
    for seed, sync in runs(size):
        sim = Sim(size, seed=seed, sync=sync)
        tasks = [sim.spawn(r, _program(sim.context(r), size, data)) for r in range(size)]
        sim.run()
        for r, task in enumerate(tasks):
            total, first, part, everyone = task.result
            assert (total, first, everyone) == (whole, whole, data)
            assert part == (whole if r == size // 2 else None)


@pytest.mark.parametrize("size", [2, 3, 6, 9, 16, 17])
def test_concurrent_collectives_with_distinct_sequence_numbers(size: int) -> None:
    # Nonblocking collectives outstanding at once on every rank: each call gets its own
    # sequence number (as the MPI layer's per-call CollContext does), same algorithm tags.
    for seed, sync in runs(size):
        rng = random.Random(seed)
        a, b = rng.randbytes(5), rng.randbytes(9)
        data = [f"<{r}>".encode() for r in range(size)]
        op = Op("concat", _concat, False)
        sim = Sim(size, seed=seed, sync=sync)
        tasks = [
            [
                sim.spawn(r, coll.get("bcast")(sim.context(r, 0), a if r == 0 else None, 0)),
                sim.spawn(r, coll.get("bcast")(sim.context(r, 1), b if r == 0 else None, 0)),
                sim.spawn(r, coll.get("allreduce")(sim.context(r, 2), data[r], op)),
                sim.spawn(r, coll.get("barrier")(sim.context(r, 3))),
                sim.spawn(r, coll.get("gather")(sim.context(r, 4), data[r], size - 1)),
            ]
            for r in range(size)
        ]
        sim.run()
        for r in range(size):
            got = [t.result for t in tasks[r]]
            assert got == [a, b, b"".join(data), None, data if r == size - 1 else None]


def test_without_sequence_numbers_concurrent_calls_can_mix() -> None:
    # The control for the test above: the same two broadcasts on one sequence number take
    # each other's messages under some interleaving, which is why each call needs its own.
    size, a, b = 4, b"first", b"second"
    mixed = 0
    for seed in range(40):
        sim = Sim(size, seed=seed)
        tasks = [
            [
                sim.spawn(r, coll.get("bcast")(sim.context(r), a if r == 0 else None, 0)),
                sim.spawn(r, coll.get("bcast")(sim.context(r), b if r == 0 else None, 0)),
            ]
            for r in range(size)
        ]
        sim.run()
        mixed += any([t.result for t in pair] != [a, b] for pair in tasks)
    assert mixed > 0


# -- misuse ------------------------------------------------------------------------------------


def test_misuse_raises_clear_errors() -> None:
    with pytest.raises(ValueError, match="root must supply data"):
        run_collective(2, coll.get("bcast"), [(None, 0)] * 2, seed=0)
    with pytest.raises(ValueError, match="3 blocks, got 2 blocks"):
        run_collective(3, coll.get("scatter"), [([b"", b""], 0)] * 3, seed=0)
    with pytest.raises(ValueError, match="root must supply 2 blocks, got None"):
        run_collective(2, coll.get("scatter"), [(None, 0)] * 2, seed=0)
    with pytest.raises(ValueError, match="need 3 blocks"):
        run_collective(3, coll.get("alltoall"), [([b""],)] * 3, seed=0)
    with pytest.raises(ValueError, match="rank 5 outside"):
        run_collective(3, coll.get("bcast"), [(b"x", 5)] * 3, seed=0)


def test_sim_reports_deadlock_and_leftovers() -> None:
    def recv_only(ctx):
        yield [ctx.irecv((ctx.rank + 1) % ctx.size, 0)]

    with pytest.raises(SimFailure, match="deadlock"):
        run_collective(2, recv_only, seed=0)

    def send_only(ctx):
        if ctx.rank == 0:
            yield [ctx.isend(b"x", 1, 0)]

    with pytest.raises(SimFailure, match="left over"):
        run_collective(2, send_only, seed=0)
