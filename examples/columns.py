"""A matrix in uneven row blocks: vector datatypes and v-collectives.

``emurun -np 4 python examples/columns.py`` (any node count up to ROWS). The same program
with ``from mpi4py import MPI`` runs unchanged under ``emurun --mpi4py``.

The matrix ``A[i, j] = i * COLS + j`` (ROWS x COLS doubles) is split by rows into blocks of
uneven height, one per rank. Three steps, each checked against the serial answer:

1. ``Gatherv``: rank 0 gathers the whole matrix from blocks of different sizes.
2. A column as a vector datatype: every rank sends column ``rank % COLS`` of its block
   straight out of the row-major array with ``Create_vector(rows, 1, COLS)`` (no copy by the
   program); rank 0 receives each into a contiguous array.
3. ``Alltoallv``: a distributed transpose by column blocks of uneven width. Rank r sends to
   rank s the columns s owns of its rows; afterwards rank s holds those columns for all rows.

Rank 0 prints one line per step and ``columns: OK``; any mismatch raises, so the job fails.
"""

from __future__ import annotations

import numpy as np

from emucluster import MPI

ROWS = 37
COLS = 11


def split(total: int, parts: int) -> list[int]:
    """``total`` items in ``parts`` blocks whose sizes differ by at most one (the first ones
    bigger): uneven whenever ``parts`` does not divide ``total``."""
    base, extra = divmod(total, parts)
    return [base + (1 if p < extra else 0) for p in range(parts)]


def offsets(counts: list[int]) -> list[int]:
    return [sum(counts[:p]) for p in range(len(counts))]


def whole() -> np.ndarray:
    return np.arange(ROWS * COLS, dtype=np.float64).reshape(ROWS, COLS)


def gather_rows(comm: MPI.Intracomm, mine: np.ndarray, heights: list[int]) -> None:
    counts = [h * COLS for h in heights]
    full = np.empty((ROWS, COLS)) if comm.rank == 0 else None
    recv = [full, counts, offsets(counts), MPI.DOUBLE] if comm.rank == 0 else None
    comm.Gatherv([mine, MPI.DOUBLE], recv, root=0)
    if comm.rank == 0:
        assert full is not None
        np.testing.assert_array_equal(full, whole())
        print(f"Gatherv: {ROWS}x{COLS} from row blocks {heights}", flush=True)


def send_columns(comm: MPI.Intracomm, mine: np.ndarray, heights: list[int]) -> None:
    column_type = MPI.DOUBLE.Create_vector(mine.shape[0], 1, COLS).Commit()
    try:
        column = comm.rank % COLS
        start = mine.reshape(-1)[column:]  # contiguous 1-D view from the column's first element
        request = comm.Isend([start, 1, column_type], dest=0, tag=column)
        if comm.rank == 0:
            first = offsets(heights)
            for source in range(comm.size):
                got = np.empty(heights[source])
                comm.Recv([got, MPI.DOUBLE], source=source, tag=source % COLS)
                want = whole()[first[source] : first[source] + heights[source], source % COLS]
                np.testing.assert_array_equal(got, want)
            print(f"vector datatype: {comm.size} strided columns received", flush=True)
        request.Wait()
    finally:
        column_type.Free()


def transpose_blocks(comm: MPI.Intracomm, mine: np.ndarray, heights: list[int]) -> None:
    widths = split(COLS, comm.size)
    starts = offsets(widths)
    height = mine.shape[0]
    # what goes to rank s: my rows, columns starts[s] .. starts[s] + widths[s], row-major
    outgoing = np.concatenate(
        [mine[:, starts[s] : starts[s] + widths[s]].ravel() for s in range(comm.size)]
    )
    send_counts = [height * w for w in widths]
    mine_width = widths[comm.rank]
    recv_counts = [h * mine_width for h in heights]
    incoming = np.empty(sum(recv_counts))
    comm.Alltoallv(
        [outgoing, send_counts, offsets(send_counts), MPI.DOUBLE],
        [incoming, recv_counts, offsets(recv_counts), MPI.DOUBLE],
    )
    # blocks arrive in rank order, i.e. in row order: together they are my columns, all rows
    columns = incoming.reshape(ROWS, mine_width)
    start = starts[comm.rank]
    np.testing.assert_array_equal(columns, whole()[:, start : start + mine_width])
    checked = comm.allreduce(1)
    if comm.rank == 0:
        print(f"Alltoallv: column blocks {widths} checked on {checked} ranks", flush=True)


def main() -> None:
    comm = MPI.COMM_WORLD
    heights = split(ROWS, comm.size)
    first = offsets(heights)[comm.rank]
    mine = np.ascontiguousarray(whole()[first : first + heights[comm.rank]])
    gather_rows(comm, mine, heights)
    send_columns(comm, mine, heights)
    transpose_blocks(comm, mine, heights)
    comm.Barrier()
    if comm.rank == 0:
        print("columns: OK", flush=True)


if __name__ == "__main__":
    main()
