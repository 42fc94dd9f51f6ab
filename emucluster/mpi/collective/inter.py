"""The algorithms of the collectives on an intercommunicator (MPI 4.0 sec. 6.2.2, MPICH's
intercommunicator algorithms): generators over two channels, so one algorithm serves the
blocking call (driven to completion), the nonblocking one (a Request the progress engine
advances) and the persistent one (``Start`` begins the nonblocking one).

One call sees `Channels`: ``remote``, the intercommunicator's collective context (``rank``
this process's rank in its group, ``size`` the remote group's size, ranks naming processes of
the remote group), and ``local``, the collective context of the library's own
intracommunicator of the local group (`CommState.local`). Both are made when the call starts,
so every member numbers its calls alike on both, and no message of one call can match
another's or the program's. Local steps run the baseline intracommunicator algorithms of
`emucluster.coll`; the remote steps use one algorithm tag (`Tag.INTER`, never 0, the tag the
leaders' context-id agreements use on the same context).

Semantics (the result always comes from the *other* group):

* rooted calls (bcast, gather, scatter, reduce): in the root's group the root passes ``ROOT``
  and the others ``PROC_NULL`` (they take no part); the other group passes the root's rank in
  the root's group;
* gather/scatter move each block straight between the root and its process; bcast, reduce,
  allreduce, allgather and the reduce-scatters go through each group's leader (rank 0): a
  local reduce or gather to it, the leaders' exchange, a local bcast or scatter from it;
* alltoall: every process sends block j to the remote group's process j and receives block j
  from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from emucluster import coll
from emucluster.coll.payload import pack_blocks, unpack_blocks
from emucluster.coll.tags import Tag
from emucluster.mpi.collective.calls import CallContext
from emucluster.mpi.constants import PROC_NULL, ROOT

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emucluster.coll.context import CollContext, CollGen, Combine
    from emucluster.mpi.comm.state import CommState

__all__ = [
    "Channels",
    "allgather",
    "allreduce",
    "alltoall",
    "barrier",
    "bcast",
    "channels",
    "gather",
    "reduce",
    "reduce_scatter",
    "scatter",
]

LEADER = 0
"""Rank of each group's leader."""
_TAG = int(Tag.INTER)


class Channels(NamedTuple):
    """One intercommunicator collective call's two channels (see the module docstring)."""

    remote: CollContext
    local: CollContext


def channels(st: CommState) -> Channels:
    """The channels of a new call on intercommunicator ``st`` (numbers the call on both)."""
    assert st.local is not None  # an intercommunicator's state
    return Channels(CallContext(st), CallContext(st.local))


def _baseline(operation: str) -> Any:
    return coll.get(operation, coll.BASELINES[operation])


def _swap(ch: Channels, data: bytes) -> CollGen[bytes]:
    """The leaders trade ``data`` for the remote leader's (call at the leader only)."""
    sent = ch.remote.isend(data, LEADER, _TAG)
    got = ch.remote.irecv(LEADER, _TAG)
    yield [sent, got]
    assert got.result is not None
    return got.result


def _local_bcast(ch: Channels, data: bytes | None) -> CollGen[bytes]:
    """The leader's ``data`` at every process of the local group."""
    result: bytes = yield from _baseline("bcast")(ch.local, data, LEADER)
    return result


def barrier(ch: Channels) -> CollGen[None]:
    """Return once every process of both groups has entered."""
    yield from _baseline("barrier")(ch.local)
    if ch.local.rank == LEADER:
        yield from _swap(ch, b"")
    yield from _local_bcast(ch, b"" if ch.local.rank == LEADER else None)


def bcast(ch: Channels, data: bytes | None, root: int) -> CollGen[bytes | None]:
    """The root's ``data`` at every process of the other group; None in the root's group."""
    if root == PROC_NULL:
        return None
    if root == ROOT:
        assert data is not None
        yield [ch.remote.isend(data, LEADER, _TAG)]
        return None
    got = None
    if ch.local.rank == LEADER:
        request = ch.remote.irecv(root, _TAG)
        yield [request]
        got = request.result
    result: bytes = yield from _local_bcast(ch, got)
    return result


def gather(ch: Channels, data: bytes | None, root: int) -> CollGen[list[bytes] | None]:
    """Every block of the other group, in its rank order, at the root; None elsewhere."""
    if root == PROC_NULL:
        return None
    if root == ROOT:
        requests = [ch.remote.irecv(i, _TAG) for i in range(ch.remote.size)]
        yield list(requests)
        return [r.result or b"" for r in requests]
    assert data is not None
    yield [ch.remote.isend(data, root, _TAG)]
    return None


def scatter(ch: Channels, blocks: Sequence[bytes] | None, root: int) -> CollGen[bytes | None]:
    """Block ``i`` of the root's ``blocks`` at process ``i`` of the other group."""
    if root == PROC_NULL:
        return None
    if root == ROOT:
        assert blocks is not None
        yield [ch.remote.isend(block, i, _TAG) for i, block in enumerate(blocks)]
        return None
    request = ch.remote.irecv(root, _TAG)
    yield [request]
    return request.result or b""


def allgather(ch: Channels, data: bytes) -> CollGen[list[bytes]]:
    """Every block of the other group, in its rank order, at every process."""
    mine = yield from _baseline("gather")(ch.local, data, LEADER)
    theirs = None
    if ch.local.rank == LEADER:
        theirs = yield from _swap(ch, pack_blocks(mine))
    payload = yield from _local_bcast(ch, theirs)
    return unpack_blocks(payload, ch.remote.size)


def alltoall(ch: Channels, blocks: Sequence[bytes]) -> CollGen[list[bytes]]:
    """Block ``j`` to the other group's process ``j``; its block for this process back."""
    sends = [ch.remote.isend(block, j, _TAG) for j, block in enumerate(blocks)]
    recvs = [ch.remote.irecv(j, _TAG) for j in range(ch.remote.size)]
    yield sends + recvs
    return [r.result or b"" for r in recvs]


def reduce(ch: Channels, data: bytes | None, combine: Combine | None,
           root: int) -> CollGen[bytes | None]:  # fmt: skip
    """The reduction of the other group's ``data`` (in its rank order) at the root."""
    if root == PROC_NULL:
        return None
    if root == ROOT:
        request = ch.remote.irecv(LEADER, _TAG)
        yield [request]
        return request.result
    partial = yield from _baseline("reduce")(ch.local, data, combine, LEADER)
    if ch.local.rank == LEADER:
        assert partial is not None
        yield [ch.remote.isend(partial, root, _TAG)]
    return None


def _exchange_reduced(ch: Channels, data: bytes, combine: Combine) -> CollGen[bytes | None]:
    """At the leader: the other group's reduction (None elsewhere)."""
    partial = yield from _baseline("reduce")(ch.local, data, combine, LEADER)
    if ch.local.rank != LEADER:
        return None
    assert partial is not None
    theirs: bytes = yield from _swap(ch, partial)
    return theirs


def allreduce(ch: Channels, data: bytes, combine: Combine) -> CollGen[bytes]:
    """The reduction of the other group's ``data`` at every process."""
    theirs = yield from _exchange_reduced(ch, data, combine)
    result: bytes = yield from _local_bcast(ch, theirs)
    return result


def reduce_scatter(ch: Channels, data: bytes, combine: Combine,
                   cuts: Sequence[int]) -> CollGen[bytes]:  # fmt: skip
    """The other group's reduction cut at the byte offsets ``cuts`` (one more than the local
    group's size, from 0 to the end): this process keeps piece ``rank``."""
    theirs = yield from _exchange_reduced(ch, data, combine)
    pieces = None
    if theirs is not None:
        pieces = [theirs[cuts[i] : cuts[i + 1]] for i in range(len(cuts) - 1)]
    result: bytes = yield from _baseline("scatter")(ch.local, pieces, LEADER)
    return result
