"""Application-bypass Reduce checked against the host-based one (run under emurun).

``ab_reduce.py correct SEED``: random skews, many reductions outstanding at once, varied roots,
a non-commutative user Op, objects, several communicators, then exit with reductions still
outstanding; every rank prints ``ab ok <rank> <json counters>``.
``ab_reduce.py late``: 4+ ranks; rank 2 (internal, child 3) returns from Reduce before 3 sends,
then busy-loops without calling MPI until the signal path has combined 3's late message; then,
with nothing outstanding at 2, 3's packet of the next reduce arrives early while 2 computes
outside MPI: it raises no signal and waits in the unexpected queue until 2's Reduce consumes
it; prints ``late ok <rank> <json counters>``.
"""

from __future__ import annotations

import json
import select
import sys
import time

import numpy as np

from emucluster import MPI
from emucluster.offload.app_bypass import shell as appbypass

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
AB = "app-bypass"
P = 1009
WAIT_S = 60.0


def matmul(inbuf: memoryview, inoutbuf: memoryview, datatype: object) -> None:
    """inout = in @ inout (mod P) on 2x2 int64 matrices: associative, not commutative."""
    a = np.frombuffer(inbuf, dtype=np.int64).reshape(2, 2)
    b = np.frombuffer(inoutbuf, dtype=np.int64).reshape(2, 2)
    np.frombuffer(inoutbuf, dtype=np.int64)[:] = ((a @ b) % P).ravel()


MATMUL = MPI.Op.Create(matmul, commute=False)


def concat(x: str, y: str, datatype: object) -> str:
    return x + y


CONCAT = MPI.Op.Create(concat, commute=False)


def matrix(r: int, i: int) -> np.ndarray:
    return np.array([[1, r + i + 1], [r * 7 % P, 1 + i]], dtype=np.int64) % P


def busy(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def counters() -> dict[str, object]:
    bypass = appbypass.active()
    assert bypass is not None
    return bypass.stats()


def correct(seed: int) -> None:
    rng = np.random.default_rng(seed * 1000 + rank)
    # 1. Integer SUM under random skew, varied roots: equal to the host-based result.
    for i in range(30):
        root = i % size
        data = np.arange(4, dtype=np.int64) * (rank + 1) + i
        ab = np.zeros(4, dtype=np.int64)
        host = np.zeros(4, dtype=np.int64)
        busy(float(rng.uniform(0, 2000)))
        comm.Reduce(data, ab, MPI.SUM, root, algorithm=AB)
        comm.Reduce(data, host, MPI.SUM, root, algorithm="binomial")
        if rank == root:
            expect = np.arange(4, dtype=np.int64) * (size * (size + 1) // 2) + i * size
            assert (ab == host).all()
            assert (ab == expect).all(), (i, ab, host, expect)
    # 2. Many outstanding: back to back without waiting, skewed, two ops, checked at the end.
    results = []
    for i in range(60):
        root = (i * 3) % size
        data = np.full(8, rank * 10 + i, dtype=np.float64)
        out = np.zeros(8, dtype=np.float64)
        if rng.random() < 0.3:
            busy(float(rng.uniform(0, 500)))
        op = MPI.MAX if i % 2 else MPI.SUM
        comm.Reduce(data, out, op, root)  # EMU_REDUCE=app-bypass picks it
        results.append((root, op, i, out))
    for root, op, i, out in results:
        if rank == root:
            values = [r * 10 + i for r in range(size)]
            expect = max(values) if op is MPI.MAX else sum(values)
            assert np.allclose(out, expect), (i, out, expect)
    # 3. A non-commutative user Op on buffers, and objects: rank order is kept.
    for i in range(10):
        root = (i * 5 + 1) % size
        ab = np.zeros(4, dtype=np.int64)
        busy(float(rng.uniform(0, 1000)))
        comm.Reduce(matrix(rank, i).ravel(), ab, MATMUL, root, algorithm=AB)
        text = comm.reduce(f"<{rank}>", CONCAT, root, algorithm=AB)
        total = comm.reduce({"n": rank}["n"], MPI.SUM, root, algorithm=AB)
        if rank == root:
            expect = matrix(0, i)
            for r in range(1, size):
                expect = (expect @ matrix(r, i)) % P
            assert (ab == expect.ravel()).all(), (i, ab, expect)
            assert text == "".join(f"<{r}>" for r in range(size)), text
            assert total == size * (size - 1) // 2
    # 4. Several communicators interleaved, no barrier between them.
    halves = comm.Split(rank % 2, rank)
    dup = comm.Dup()
    pending = []
    for i in range(20):
        for c in (halves, dup):
            root = i % c.size
            out = np.zeros(2, dtype=np.int64)
            busy(float(rng.uniform(0, 300)))
            c.Reduce(np.array([c.rank + 1, i], dtype=np.int64), out, MPI.SUM, root, algorithm=AB)
            pending.append((c.rank == root, c.size, i, out))
    for is_root, n, i, out in pending:
        if is_root:
            assert list(out) == [n * (n + 1) // 2, i * n], (out, n, i)
    comm.Barrier()
    # Nothing outstanding now: signals are off everywhere.
    stats = counters()
    assert stats["outstanding"] == 0, stats
    assert not stats["signals_enabled"], stats
    # 5. Exit with reductions outstanding (the last is late at internal nodes): Finalize at
    # exit completes them first, and the root gets every result.
    last = []
    for _ in range(5):
        out = np.zeros(1, dtype=np.int64)
        if rank == size - 1:
            busy(3000)
        comm.Reduce(np.array([rank], dtype=np.int64), out, MPI.SUM, 0, algorithm=AB)
        last.append(out)
    if rank == 0:
        assert all(int(o[0]) == size * (size - 1) // 2 for o in last), last
    print(f"ab ok {rank} {json.dumps(counters())}", flush=True)


def reduce_checked(data: np.ndarray, out: np.ndarray) -> None:
    """An application-bypass Reduce to root 0, its sum checked there."""
    comm.Reduce(data, out, MPI.SUM, 0, algorithm=AB)
    if rank == 0:
        assert out[0] == size * (size + 1) / 2, out


def late() -> None:
    """Rank 2 is internal with child 3 (root 0); 3 sends only after 2 has left Reduce."""
    data = np.array([rank + 1.0])
    out = np.zeros(1)
    comm.Barrier()
    if rank == 2:
        comm.Reduce(data, out, MPI.SUM, 0, algorithm=AB)
        after_return = counters()
        comm.send("returned", 3, tag=7)
        # Busy outside MPI (no library call) until the signal path has done its work.
        core = appbypass.active().core  # type: ignore[union-attr]
        deadline = time.monotonic() + WAIT_S
        spins = 0
        while core.counters["async_completed"] == 0 and time.monotonic() < deadline:
            spins += 1
        done = counters()
        assert after_return["outstanding"] == 1, after_return
        assert after_return["late"] == 0, after_return
        assert done["late"] == 1, done
        assert done["async_completed"] == 1, done
        assert done["signal_runs"] >= 1, done
        assert done["signals"] >= 1, done
        assert done["outstanding"] == 0, done
        assert not done["signals_enabled"], done
    elif rank == 3:
        assert comm.recv(source=2, tag=7) == "returned"
        comm.Reduce(data, out, MPI.SUM, 0, algorithm=AB)
    else:
        reduce_checked(data, out)
    comm.Barrier()
    # Nothing outstanding at 2 now: 3's packet of the next reduce reaches 2's host while 2
    # computes outside MPI (2 watches its NIC socket become readable without taking anything
    # in); no signal is raised, and 2's Reduce then combines the waiting packet.
    if rank == 2:
        comm.send("idle", 3, tag=8)
        assert comm.recv(source=3, tag=8) == "ready"
        before = counters()
        assert before["outstanding"] == 0, before
        assert not before["signals_enabled"], before
        nic = appbypass.active().engine.port.fileno()  # type: ignore[union-attr]
        deadline = time.monotonic() + WAIT_S
        while not select.select([nic], [], [], 0)[0] and time.monotonic() < deadline:
            busy(200)
        busy(100_000)  # time for a signal, if the NIC raised one
        idle = counters()
        assert idle["signals"] == before["signals"], (before, idle)
        assert idle["seen"] == before["seen"], (before, idle)  # nothing was taken in
        comm.Reduce(data, out, MPI.SUM, 0, algorithm=AB)
        after = counters()
        arrived = ("early", "expected")
        assert sum(after[k] - before[k] for k in arrived) == 1, (before, after)  # type: ignore[operator]
        assert after["late"] == before["late"], after
        assert after["signals"] == before["signals"], after
        assert after["outstanding"] == 0, after
        assert not after["signals_enabled"], after
    elif rank == 3:
        assert comm.recv(source=2, tag=8) == "idle"
        comm.send("ready", 2, tag=8)
        busy(20_000)
        comm.Reduce(data, out, MPI.SUM, 0, algorithm=AB)
    else:
        reduce_checked(data, out)
    comm.Barrier()
    stats = counters()
    if rank in (0, 1, 3):  # the root and leaves never enable signals or get any
        assert stats["enables"] == 0, stats
        assert stats["signals"] == 0, stats
    print(f"late ok {rank} {json.dumps(stats)}", flush=True)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "correct"
    if mode == "late":
        late()
    else:
        correct(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
