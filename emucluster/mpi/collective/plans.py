"""Buffer collectives as plans: which algorithm to run on which packed blocks, and what to do
with its result. One plan serves the blocking call (run, then ``post``) and the nonblocking
one (``start``; the Request runs ``post`` when the algorithm completes), so the I-calls are
progress-driven exactly as the blocking ones run.

Send data is packed when the plan is made (one copy per block, through the datatype's type
map); results are unpacked into the receive buffers by ``post``. Specs are parsed by
`emucluster.mpi.collective.layout` (simple, vector and ``w`` forms, zero-length blocks included).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from emucluster.mpi.buffer.spec import MessageSpecError
from emucluster.mpi.collective.layout import Layout, simple, vector, vector_w
from emucluster.mpi.collective.ops import BufferCombine, Op
from emucluster.mpi.constants import in_place
from emucluster.mpi.errors import ERR_ARG, ERR_BUFFER, ERR_COUNT, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.state import CommState

__all__ = [
    "Plan",
    "allgather",
    "allgatherv",
    "alltoall",
    "alltoallv",
    "alltoallw",
    "gather",
    "gatherv",
    "reduce_scatter",
    "reduce_scatter_block",
    "scatter",
    "scatterv",
]


class Plan(NamedTuple):
    """One buffer collective call, ready to run."""

    operation: str
    args: tuple[object, ...]
    post: Callable[[Any], None]


def _nothing(_: object) -> None:
    return None


def _fill_all(layout: Layout) -> Callable[[list[bytes]], None]:
    def post(blocks: list[bytes]) -> None:
        for i, block in enumerate(blocks):
            layout.unpack(i, block)

    return post


def gather(st: CommState, sendbuf: Any, recvbuf: Any, root: int, *, v: bool = False) -> Plan:
    """Gather / Gatherv: every rank's block into the root's receive layout."""
    recv = None
    if st.rank == root:
        recv = (vector if v else simple)(recvbuf, readonly=False, blocks=st.size)
    if in_place(sendbuf) and recv is not None:
        data = recv.pack(root)
    else:
        data = simple(sendbuf, readonly=True).pack(0)

    def post(blocks: list[bytes] | None) -> None:
        if recv is not None and blocks is not None:
            for i, block in enumerate(blocks):
                if not (i == root and in_place(sendbuf)):
                    recv.unpack(i, block)

    return Plan("gather", (data, root), post)


def gatherv(st: CommState, sendbuf: Any, recvbuf: Any, root: int) -> Plan:
    """Gatherv (counts and displacements in the root's receive spec)."""
    return gather(st, sendbuf, recvbuf, root, v=True)


def scatter(st: CommState, sendbuf: Any, recvbuf: Any, root: int, *, v: bool = False) -> Plan:
    """Scatter / Scatterv: block ``rank`` of the root's send layout into every receive buffer."""
    blocks = None
    if st.rank == root:
        send = (vector if v else simple)(sendbuf, readonly=True, blocks=st.size)
        blocks = [send.pack(i) for i in range(st.size)]
    if in_place(recvbuf) and st.rank == root:
        # a root without a receive buffer keeps nothing of its own block (as MPICH does)
        return Plan("scatter", (blocks, root), _nothing)
    recv = simple(recvbuf, readonly=False)
    return Plan("scatter", (blocks, root), lambda data: recv.unpack(0, data))


def scatterv(st: CommState, sendbuf: Any, recvbuf: Any, root: int) -> Plan:
    """Scatterv (counts and displacements in the root's send spec)."""
    return scatter(st, sendbuf, recvbuf, root, v=True)


def allgather(st: CommState, sendbuf: Any, recvbuf: Any, *, v: bool = False) -> Plan:
    """Allgather / Allgatherv."""
    recv = (vector if v else simple)(recvbuf, readonly=False, blocks=st.size)
    data = recv.pack(st.rank) if in_place(sendbuf) else simple(sendbuf, readonly=True).pack(0)
    return Plan("allgather", (data,), _fill_all(recv))


def allgatherv(st: CommState, sendbuf: Any, recvbuf: Any) -> Plan:
    """Allgatherv."""
    return allgather(st, sendbuf, recvbuf, v=True)


def alltoall(st: CommState, sendbuf: Any, recvbuf: Any, *, kind: str = "") -> Plan:
    """Alltoall (kind ""), Alltoallv ("v") or Alltoallw ("w")."""
    parse = {"": simple, "v": vector, "w": vector_w}[kind]
    recv = parse(recvbuf, readonly=False, blocks=st.size)
    send = recv if in_place(sendbuf) else parse(sendbuf, readonly=True, blocks=st.size)
    blocks = [send.pack(i) for i in range(st.size)]
    return Plan("alltoall", (blocks,), _fill_all(recv))


def alltoallv(st: CommState, sendbuf: Any, recvbuf: Any) -> Plan:
    """Alltoallv."""
    return alltoall(st, sendbuf, recvbuf, kind="v")


def alltoallw(st: CommState, sendbuf: Any, recvbuf: Any) -> Plan:
    """Alltoallw."""
    return alltoall(st, sendbuf, recvbuf, kind="w")


def reduce_scatter_block(st: CommState, sendbuf: Any, recvbuf: Any, op: Op) -> Plan:
    """Reduce_scatter_block: an allreduce of ``size`` equal blocks, keeping block ``rank``."""
    if not in_place(sendbuf):
        recv = simple(recvbuf, readonly=False)
        send = simple(sendbuf, readonly=True)
        if not _aliased(send, recv):
            return _reduce_scatter(st, send, recv, recv.counts * st.size, op)
    whole = simple(recvbuf, readonly=False, blocks=st.size)
    counts = whole.counts
    send = simple(recvbuf, readonly=False)
    recv = Layout(whole.view, [0], [counts[0]], [whole.datatypes[0]])
    return _reduce_scatter(st, send, recv, counts, op)


def reduce_scatter(st: CommState, sendbuf: Any, recvbuf: Any, recvcounts: Any, op: Op,
                   gather_counts: Callable[[int], list[int]]) -> Plan:  # fmt: skip
    """Reduce_scatter: an allreduce, keeping this rank's ``recvcounts[rank]`` elements."""
    alone = in_place(sendbuf)
    if not alone:
        recv = simple(recvbuf, readonly=False)
        send = simple(sendbuf, readonly=True)
        alone = _aliased(send, recv)
    if alone:
        send = simple(recvbuf, readonly=False)
        if recvcounts is None:
            raise MPIException(ERR_ARG, "Reduce_scatter with IN_PLACE needs recvcounts")
        counts = [int(c) for c in recvcounts]
        recv = Layout(send.view, [0], [counts[st.rank]], [send.datatypes[0]])
    elif recvcounts is None:
        counts = gather_counts(recv.counts[0])
    else:
        counts = [operator.index(c) for c in recvcounts]
    if len(counts) != st.size:
        raise MessageSpecError(ERR_ARG, f"expecting {st.size} recvcounts, got {len(counts)}")
    _check_reduce_scatter(alone, send, recv, counts, st.rank)
    return _reduce_scatter(st, send, recv, counts, op)


def _aliased(send: Layout, recv: Layout) -> bool:
    """Whether the send and receive buffers start at one address: mpi4py (after 4.1.2) then
    reduces in place, as with IN_PLACE (``Reduce_scatter(buf, buf, counts)``)."""
    if not send.view.nbytes or not recv.view.nbytes:
        return False
    return _address(send.view) == _address(recv.view)


def _address(view: memoryview) -> int:
    return int(np.frombuffer(view, np.uint8).ctypes.data)


def _check_reduce_scatter(in_place: bool, send: Layout, recv: Layout, counts: list[int],
                          rank: int) -> None:  # fmt: skip
    """mpi4py's for_reduce_scatter checks (ValueError-compatible MPI.Exceptions)."""
    total = sum(counts)
    if in_place:
        if send.counts[0] != total:
            raise MessageSpecError(ERR_COUNT, f"mismatch in receive count {send.counts[0]} "
                                              f"and sum(counts) {total}")  # fmt: skip
        return
    if send.datatypes[0] != recv.datatypes[0]:
        raise MessageSpecError(ERR_TYPE, "mismatch in send and receive MPI datatypes")
    if send.counts[0] != total:
        raise MessageSpecError(ERR_COUNT, f"mismatch in send count {send.counts[0]} "
                                          f"and sum(counts) {total}")  # fmt: skip
    if recv.counts[0] != counts[rank]:
        raise MessageSpecError(ERR_COUNT, f"mismatch in receive count {recv.counts[0]} "
                                          f"and counts[{rank}] {counts[rank]}")  # fmt: skip


def _reduce_scatter(st: CommState, send: Layout, recv: Layout, counts: list[int],
                    op: Op) -> Plan:  # fmt: skip
    datatype = send.datatypes[0]
    total = sum(counts)
    if send.counts[0] < total:
        raise MPIException(
            ERR_BUFFER, f"Reduce_scatter: {send.counts[0]} send elements, {total} needed"
        )
    data = datatype.pack_from(send.view, send.offsets[0], total)
    size = datatype.size
    start = sum(counts[: st.rank]) * size
    end = start + counts[st.rank] * size

    def post(result: bytes) -> None:
        recv.unpack(0, memoryview(result)[start:end])

    return Plan("allreduce", (data, BufferCombine(op, datatype)), post)
