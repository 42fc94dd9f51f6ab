"""The collective calls of an intercommunicator, blocking, nonblocking and lowercase
(``Intercomm`` delegates to `InterCollectives`; the persistent ``*_init`` calls of ``Comm``
start the nonblocking ones here).

Each call parses its buffers as the intracommunicator calls do (`emucluster.mpi.collective.
layout`: simple, vector and ``w`` forms, one block per process of the *remote* group), makes
the algorithm's generator (`emucluster.mpi.collective.inter`) and what to do with its result,
then drives it to completion or hands it to the progress engine inside a Request. Roots are
checked first: ``ROOT``, ``PROC_NULL`` or a rank of the remote group, else ERR_ROOT; a
``PROC_NULL`` process parses no buffer. ``IN_PLACE`` is not valid on an intercommunicator
(ERR_ARG). ``algorithm`` is accepted as the intracommunicator calls take it and ignored: the
local steps run the baseline algorithms.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any, NamedTuple

from emucluster.coll.context import drive
from emucluster.mpi.buffer.spec import message
from emucluster.mpi.collective import inter
from emucluster.mpi.collective.calls import dump_object, fill, internal_allgather, object_items
from emucluster.mpi.collective.calls import waiter as engine_waiter
from emucluster.mpi.collective.layout import Layout, simple, vector, vector_w
from emucluster.mpi.collective.ops import BufferCombine, ObjectCombine, Op, predefined_ops
from emucluster.mpi.constants import IN_PLACE, PROC_NULL, ROOT
from emucluster.mpi.errors import ERR_ARG, ERR_BUFFER, ERR_ROOT
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.request.pending import CollDriver
from emucluster.mpi.request.request import Request

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.coll.context import CollGen
    from emucluster.mpi.comm.comm import Comm
    from emucluster.mpi.comm.state import CommState

__all__ = ["InterCollectives"]

SUM = predefined_ops["SUM"]


class _Call(NamedTuple):
    """One call, ready to run: the algorithm's generator and what turns its result into the
    call's (filling receive buffers, unpickling)."""

    gen: CollGen[Any]
    post: Callable[[Any], Any]


def _nothing(_: object) -> None:
    return None


def _loads(data: bytes | None) -> Any:
    return None if data is None else pickle.loads(data)


def _loads_all(blocks: list[bytes] | None) -> list[Any] | None:
    return None if blocks is None else [pickle.loads(b) for b in blocks]


def _unpack_all(layout: Layout) -> Callable[[list[bytes] | None], None]:
    def post(blocks: list[bytes] | None) -> None:
        for i, block in enumerate(blocks or ()):
            layout.unpack(i, block)

    return post


def _items(seq: Any, size: int) -> list[bytes]:
    """The pickled ``size`` items of a lowercase call's sequence (None: ``size`` Nones, as
    mpi4py's pickle_dumpv)."""
    return [dump_object(item) for item in ([None] * size if seq is None
                                           else object_items(seq, size))]  # fmt: skip


def _no_in_place(*bufs: object) -> None:
    if any(buf is IN_PLACE for buf in bufs):
        raise MPIException(ERR_ARG, "IN_PLACE is not valid on an intercommunicator")


_LAYOUTS = {"": simple, "v": vector, "w": vector_w}


class InterCollectives:
    """The collective calls of an ``Intercomm`` (it delegates here)."""

    __slots__ = ("_st",)

    def __init__(self, comm: Comm) -> None:
        self._st = comm._state()
        assert self._st.local is not None  # only an Intercomm delegates here

    # -- running one call ---------------------------------------------------------------------

    def _run(self, call: _Call) -> Any:
        return call.post(drive(call.gen, engine_waiter(self._st.runtime.engine)))

    def _start(self, call: _Call) -> Request:
        engine = self._st.runtime.engine
        driver = CollDriver(call.gen, call.post, context=self._st.context)
        engine.add(driver)
        return Request._of(driver, engine)

    def _check_root(self, root: int) -> None:
        size = self._st.size
        if root not in (ROOT, PROC_NULL) and not 0 <= root < size:
            raise MPIException(ERR_ROOT, f"invalid root {root}: ROOT, PROC_NULL or a rank "
                                         f"of the remote group of {size}")  # fmt: skip

    def _channels(self) -> inter.Channels:
        """The new call's channels (made once its arguments are checked and parsed: making
        them numbers the call)."""
        return inter.channels(self._st)

    def _local_size(self) -> int:
        local: CommState | None = self._st.local
        assert local is not None
        return local.size

    # -- plans (one per operation; blocking and nonblocking calls share them) ----------------

    def _barrier(self) -> _Call:
        return _Call(inter.barrier(self._channels()), _nothing)

    def _bcast(self, buf: Any, root: int) -> _Call:
        self._check_root(root)
        if root == ROOT:
            data = bytes(message(buf, writable=False).view)
            return _Call(inter.bcast(self._channels(), data, root), _nothing)
        if root == PROC_NULL:
            return _Call(inter.bcast(self._channels(), None, root), _nothing)
        msg = message(buf, writable=True, staged=True)

        def post(result: bytes) -> None:
            fill(msg, result)
            if msg.deliver is not None:
                msg.deliver(len(result))

        return _Call(inter.bcast(self._channels(), None, root), post)

    def _gather(self, sendbuf: Any, recvbuf: Any, root: int, kind: str) -> _Call:
        self._check_root(root)
        if root == ROOT:
            recv = _LAYOUTS[kind](recvbuf, readonly=False, blocks=self._st.size)
            return _Call(inter.gather(self._channels(), None, root), _unpack_all(recv))
        data = None if root == PROC_NULL else simple(sendbuf, readonly=True).pack(0)
        return _Call(inter.gather(self._channels(), data, root), _nothing)

    def _scatter(self, sendbuf: Any, recvbuf: Any, root: int, kind: str) -> _Call:
        self._check_root(root)
        if root == ROOT:
            send = _LAYOUTS[kind](sendbuf, readonly=True, blocks=self._st.size)
            blocks = [send.pack(i) for i in range(self._st.size)]
            return _Call(inter.scatter(self._channels(), blocks, root), _nothing)
        if root == PROC_NULL:
            return _Call(inter.scatter(self._channels(), None, root), _nothing)
        recv = simple(recvbuf, readonly=False)
        gen = inter.scatter(self._channels(), None, root)
        return _Call(gen, lambda data: recv.unpack(0, data))

    def _allgather(self, sendbuf: Any, recvbuf: Any, kind: str) -> _Call:
        _no_in_place(sendbuf)
        recv = _LAYOUTS[kind](recvbuf, readonly=False, blocks=self._st.size)
        data = simple(sendbuf, readonly=True).pack(0)
        return _Call(inter.allgather(self._channels(), data), _unpack_all(recv))

    def _alltoall(self, sendbuf: Any, recvbuf: Any, kind: str) -> _Call:
        _no_in_place(sendbuf)
        size = self._st.size
        recv = _LAYOUTS[kind](recvbuf, readonly=False, blocks=size)
        send = _LAYOUTS[kind](sendbuf, readonly=True, blocks=size)
        blocks = [send.pack(i) for i in range(size)]
        return _Call(inter.alltoall(self._channels(), blocks), _unpack_all(recv))

    def _reduce(self, sendbuf: Any, recvbuf: Any, op: Op, root: int) -> _Call:
        self._check_root(root)
        if root == ROOT:
            rmsg = message(recvbuf, writable=True)
            gen = inter.reduce(self._channels(), None, None, root)
            return _Call(gen, lambda result: fill(rmsg, result))
        if root == PROC_NULL:
            return _Call(inter.reduce(self._channels(), None, None, root), _nothing)
        _no_in_place(sendbuf)
        smsg = message(sendbuf, writable=False)
        combine = BufferCombine(op, smsg.datatype)
        return _Call(inter.reduce(self._channels(), bytes(smsg.view), combine, root), _nothing)

    def _allreduce(self, sendbuf: Any, recvbuf: Any, op: Op) -> _Call:
        _no_in_place(sendbuf)
        smsg = message(sendbuf, writable=False)
        rmsg = message(recvbuf, writable=True)
        combine = BufferCombine(op, smsg.datatype)
        gen = inter.allreduce(self._channels(), bytes(smsg.view), combine)
        return _Call(gen, lambda result: fill(rmsg, result))

    def _reduce_scatter(self, sendbuf: Any, recvbuf: Any, counts: list[int] | None,
                        op: Op) -> _Call:  # fmt: skip
        """Reduce_scatter (``counts``: the local group's recvcounts) or, for None,
        Reduce_scatter_block (every process keeps recvbuf's count)."""
        _no_in_place(sendbuf)
        recv = simple(recvbuf, readonly=False)
        send = simple(sendbuf, readonly=True)
        if counts is None:
            counts = [recv.counts[0]] * self._local_size()
        if len(counts) != self._local_size():
            raise MPIException(ERR_ARG, f"expecting {self._local_size()} recvcounts, "
                                        f"got {len(counts)}")  # fmt: skip
        datatype, total = send.datatypes[0], sum(counts)
        if send.counts[0] < total:
            raise MPIException(ERR_BUFFER, f"Reduce_scatter: {send.counts[0]} send elements, "
                                           f"{total} needed")  # fmt: skip
        data = datatype.pack_from(send.view, send.offsets[0], total)
        cuts = [0]
        for count in counts:
            cuts.append(cuts[-1] + count * datatype.size)
        combine = BufferCombine(op, datatype)
        gen = inter.reduce_scatter(self._channels(), data, combine, cuts)
        return _Call(gen, lambda result: recv.unpack(0, result))

    def _recvcounts(self, recvbuf: Any, recvcounts: Any) -> list[int]:
        if recvcounts is not None:
            return [int(c) for c in recvcounts]
        local = self._st.local
        assert local is not None
        return [int(c) for c in internal_allgather(local, simple(recvbuf, readonly=False)
                                                   .counts[0])]  # fmt: skip

    # -- lowercase (pickled objects) ----------------------------------------------------------

    def barrier(self, *, algorithm: str | None = None) -> None:
        """Return once every process of both groups has entered."""
        self._run(self._barrier())

    def bcast(self, obj: Any = None, root: int = 0, *, algorithm: str | None = None) -> Any:
        """The root's object at every process of the other group (None in the root's)."""
        self._check_root(root)
        data = dump_object(obj) if root == ROOT else None
        return self._run(_Call(inter.bcast(self._channels(), data, root), _loads))

    def gather(self, sendobj: Any, root: int = 0, *, algorithm: str | None = None) -> Any:
        """The list of the other group's objects at the root (None elsewhere)."""
        self._check_root(root)
        data = None if root in (ROOT, PROC_NULL) else dump_object(sendobj)
        return self._run(_Call(inter.gather(self._channels(), data, root), _loads_all))

    def scatter(self, sendobj: Any = None, root: int = 0, *,
                algorithm: str | None = None) -> Any:  # fmt: skip
        """Item ``rank`` of the root's sequence at each process of the other group."""
        self._check_root(root)
        blocks = None
        if root == ROOT:
            blocks = _items(sendobj, self._st.size)
        return self._run(_Call(inter.scatter(self._channels(), blocks, root), _loads))

    def allgather(self, sendobj: Any, *, algorithm: str | None = None) -> list[Any]:
        """The other group's objects, in its rank order, at every process."""
        found: list[Any] = self._run(
            _Call(inter.allgather(self._channels(), dump_object(sendobj)), _loads_all)
        )
        return found

    def alltoall(self, sendobj: Any, *, algorithm: str | None = None) -> list[Any]:
        """Item j to the other group's process j; its item for this process, in rank order."""
        blocks = _items(sendobj, self._st.size)
        found: list[Any] = self._run(_Call(inter.alltoall(self._channels(), blocks), _loads_all))
        return found

    def reduce(self, sendobj: Any, op: Op = SUM, root: int = 0, *,
               algorithm: str | None = None) -> Any:  # fmt: skip
        """``op`` over the other group's objects, in its rank order, at the root."""
        self._check_root(root)
        data = None if root in (ROOT, PROC_NULL) else dump_object(sendobj)
        combine = ObjectCombine(op)
        gen = inter.reduce(self._channels(), data, combine, root)
        return self._run(_Call(gen, _loads))

    def allreduce(self, sendobj: Any, op: Op = SUM, *, algorithm: str | None = None) -> Any:
        """``op`` over the other group's objects, in its rank order, at every process."""
        data, combine = dump_object(sendobj), ObjectCombine(op)
        gen = inter.allreduce(self._channels(), data, combine)
        return self._run(_Call(gen, _loads))

    # -- uppercase, blocking ------------------------------------------------------------------

    def Barrier(self, *, algorithm: str | None = None) -> None:
        """Return once every process of both groups has entered."""
        self._run(self._barrier())

    def Bcast(self, buf: Any, root: int = 0, *, algorithm: str | None = None) -> None:
        """The root's buffer into every buffer of the other group."""
        self._run(self._bcast(buf, root))

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
               algorithm: str | None = None) -> None:  # fmt: skip
        """The other group's buffers, in its rank order, into the root's ``recvbuf``."""
        self._run(self._gather(sendbuf, recvbuf, root, ""))

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                algorithm: str | None = None) -> None:  # fmt: skip
        """Gather with counts and displacements at the root."""
        self._run(self._gather(sendbuf, recvbuf, root, "v"))

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                algorithm: str | None = None) -> None:  # fmt: skip
        """Block i of the root's ``sendbuf`` into the other group's process i."""
        self._run(self._scatter(sendbuf, recvbuf, root, ""))

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                 algorithm: str | None = None) -> None:  # fmt: skip
        """Scatter with counts and displacements at the root."""
        self._run(self._scatter(sendbuf, recvbuf, root, "v"))

    def Allgather(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """The other group's buffers, in its rank order, into every ``recvbuf``."""
        self._run(self._allgather(sendbuf, recvbuf, ""))

    def Allgatherv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """Allgather with counts and displacements."""
        self._run(self._allgather(sendbuf, recvbuf, "v"))

    def Alltoall(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """Block j to the other group's process j; its block for this process into block j."""
        self._run(self._alltoall(sendbuf, recvbuf, ""))

    def Alltoallv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """Alltoall with counts and displacements."""
        self._run(self._alltoall(sendbuf, recvbuf, "v"))

    def Alltoallw(self, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None) -> None:
        """Alltoall with counts, byte displacements and datatypes."""
        self._run(self._alltoall(sendbuf, recvbuf, "w"))

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0, *,
               algorithm: str | None = None) -> None:  # fmt: skip
        """Elementwise ``op`` of the other group's buffers into the root's ``recvbuf``."""
        self._run(self._reduce(sendbuf, recvbuf, op, root))

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
                  algorithm: str | None = None) -> None:  # fmt: skip
        """Elementwise ``op`` of the other group's buffers into every ``recvbuf``."""
        self._run(self._allreduce(sendbuf, recvbuf, op))

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
                             algorithm: str | None = None) -> None:  # fmt: skip
        """The other group's reduction (of local-size x recvcount elements) in blocks of
        recvbuf's count, block i at process i."""
        self._run(self._reduce_scatter(sendbuf, recvbuf, None, op))

    def Reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                       op: Op = SUM, *, algorithm: str | None = None) -> None:  # fmt: skip
        """The other group's reduction (of sum(recvcounts) elements) in pieces of
        ``recvcounts[i]`` elements, piece i at process i (the local group's counts)."""
        counts = self._recvcounts(recvbuf, recvcounts)
        self._run(self._reduce_scatter(sendbuf, recvbuf, counts, op))

    # -- uppercase, nonblocking (and, through them, persistent) -------------------------------

    def Ibarrier(self, *, algorithm: str | None = None) -> Request:
        """Nonblocking Barrier."""
        return self._start(self._barrier())

    def Ibcast(self, buf: Any, root: int = 0, *, algorithm: str | None = None) -> Request:
        """Nonblocking Bcast."""
        return self._start(self._bcast(buf, root))

    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Gather."""
        return self._start(self._gather(sendbuf, recvbuf, root, ""))

    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                 algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Gatherv."""
        return self._start(self._gather(sendbuf, recvbuf, root, "v"))

    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                 algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Scatter."""
        return self._start(self._scatter(sendbuf, recvbuf, root, ""))

    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *,
                  algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Scatterv."""
        return self._start(self._scatter(sendbuf, recvbuf, root, "v"))

    def Iallgather(self, sendbuf: Any, recvbuf: Any, *,
                   algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Allgather."""
        return self._start(self._allgather(sendbuf, recvbuf, ""))

    def Iallgatherv(self, sendbuf: Any, recvbuf: Any, *,
                    algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Allgatherv."""
        return self._start(self._allgather(sendbuf, recvbuf, "v"))

    def Ialltoall(self, sendbuf: Any, recvbuf: Any, *,
                  algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Alltoall."""
        return self._start(self._alltoall(sendbuf, recvbuf, ""))

    def Ialltoallv(self, sendbuf: Any, recvbuf: Any, *,
                   algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Alltoallv."""
        return self._start(self._alltoall(sendbuf, recvbuf, "v"))

    def Ialltoallw(self, sendbuf: Any, recvbuf: Any, *,
                   algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Alltoallw."""
        return self._start(self._alltoall(sendbuf, recvbuf, "w"))

    def Ireduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0, *,
                algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Reduce."""
        return self._start(self._reduce(sendbuf, recvbuf, op, root))

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
                   algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Allreduce."""
        return self._start(self._allreduce(sendbuf, recvbuf, op))

    def Ireduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, *,
                              algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Reduce_scatter_block."""
        return self._start(self._reduce_scatter(sendbuf, recvbuf, None, op))

    def Ireduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                        op: Op = SUM, *, algorithm: str | None = None) -> Request:  # fmt: skip
        """Nonblocking Reduce_scatter."""
        counts = self._recvcounts(recvbuf, recvcounts)
        return self._start(self._reduce_scatter(sendbuf, recvbuf, counts, op))
