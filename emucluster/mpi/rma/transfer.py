"""One-sided data movement: Put, Get, Accumulate, Get_accumulate, Fetch_and_op,
Compare_and_swap (and the request forms' operations), each turned into NIC operations on the
target's registered window memory.

The origin reads mpi4py's specs (origin message; target ``disp``, ``[disp, count,
datatype]``), checks the target range against the window size it learnt at creation, cuts a
non-contiguous target datatype into its contiguous runs, and starts one NIC operation per run:
RM-V for a put, RM-RV for a get (into a scratch block), RM_ATOMIC for the rest, which the
target's NIC applies whole, so accumulates and atomics are atomic per element with respect to
each other. Each call leaves one `RmaOp` in the window's pending list for its target; the
synchronization calls complete them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from emucluster.mpi.buffer.spec import EMPTY, MessageSpecError, Msg, as_datatype, message
from emucluster.mpi.constants import PROC_NULL
from emucluster.mpi.datatype.datatype import Datatype
from emucluster.mpi.errors import ERR_ARG, ERR_OP, ERR_RANK, ERR_RMA_RANGE, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.rma.constants import LOCK_EXCLUSIVE
from emucluster.mpi.rma.engine import RmaOp
from emucluster.mpi.rma.state import CTRL, MAX_ATTACHED, TABLE
from nicd.contract import ATOMIC_ELEMENT_CODES, AtomicOp, apply_atomic

if TYPE_CHECKING:
    from emucluster.grim.port import Block, Handle, RmRequest
    from emucluster.mpi.collective.ops import Op
    from emucluster.mpi.rma.state import WinState

__all__ = ["Transfer"]

_Runs = list[tuple[int, int]]  # (byte offset in the target's block, bytes)
_NO_DATA = (AtomicOp.REPLACE, AtomicOp.NO_OP)


class Transfer:
    """The data-movement calls of one window (``Win.Put`` ... delegate here)."""

    __slots__ = ("st",)

    def __init__(self, st: WinState) -> None:
        self.st = st

    # -- the calls ---------------------------------------------------------------------------

    def put(self, origin: Any, target_rank: int, target: Any = None) -> RmaOp | None:
        """Start a Put (origin bytes to the target window)."""
        if self._null(target_rank):
            _parse_target(target, _null_origin(origin))
            return None
        msg = message(origin, writable=False)
        handle, runs = self._runs(target_rank, target, msg)
        ep, tgt, data = self.st.engine.endpoint, self.st.targets[target_rank], msg.view
        mem = self._here(target_rank, atomic=False)
        if mem is None and self.st.host is not None:
            return self._add(target_rank, self.st.host.put(target_rank, runs, data))
        reqs: list[RmRequest] = []
        pos = 0
        for offset, n in runs:
            if mem is not None:
                mem[offset : offset + n] = data[pos : pos + n]
            else:
                reqs.append(ep.iwrite(tgt.node, handle, offset, data[pos : pos + n]))
            pos += n
        return self._add(target_rank, RmaOp(reqs))

    def get(self, origin: Any, target_rank: int, target: Any = None) -> RmaOp | None:
        """Start a Get (target bytes into the origin buffer)."""
        if self._null(target_rank):
            _parse_target(target, _null_origin(origin))
            return None
        msg = message(origin, writable=True, staged=True)
        handle, runs = self._runs(target_rank, target, msg)
        eng, tgt = self.st.engine, self.st.targets[target_rank]
        total = sum(n for _, n in runs)
        mem = self._here(target_rank, atomic=False)
        if mem is not None:
            _deliver(msg, b"".join(mem[offset : offset + n] for offset, n in runs))
            return self._add(target_rank, RmaOp([]))
        if self.st.host is not None:
            got = self.st.host.get(target_rank, runs, lambda data: _deliver(msg, data))
            return self._add(target_rank, got)
        scratch = eng.scratch(total)
        reqs: list[RmRequest] = []
        pos = 0
        for offset, n in runs:
            reqs.append(eng.endpoint.iread(tgt.node, handle, offset, n, scratch, pos))
            pos += n
        return self._add(target_rank, RmaOp(reqs, _copy_out(eng, scratch, msg, total)))

    def accumulate(
        self, origin: Any, target_rank: int, target: Any = None, op: Op | None = None
    ) -> RmaOp | None:
        """Start an Accumulate (``op`` applied at the target, element by element)."""
        return self._atomic(origin, None, target_rank, target, op)

    def get_accumulate(
        self, origin: Any, result: Any, target_rank: int, target: Any = None, op: Op | None = None
    ) -> RmaOp | None:
        """Start a Get_accumulate (the old target contents into ``result``)."""
        return self._atomic(origin, result, target_rank, target, op)

    def fetch_and_op(
        self, origin: Any, result: Any, target_rank: int, target_disp: int = 0, op: Op | None = None
    ) -> RmaOp | None:
        """Start a Fetch_and_op (one element)."""
        o = message(origin, writable=False)
        r = message(result, writable=True)
        datatype = _single(r, o, "result")
        _single(o, r, "origin", allow_empty=_op_code(op) is AtomicOp.NO_OP)
        return self._atomic(o, r, target_rank, [target_disp, 1, datatype], op)

    def compare_and_swap(
        self, origin: Any, compare: Any, result: Any, target_rank: int, target_disp: int = 0
    ) -> RmaOp | None:
        """Start a Compare_and_swap (one element)."""
        o = message(origin, writable=False)
        c = message(compare, writable=False)
        r = message(result, writable=True)
        datatype = _single(o, r, "origin")
        _single(c, r, "compare")
        _single(r, o, "result")
        if self._null(target_rank):
            return None
        handle, runs = self._runs(target_rank, [target_disp, 1, datatype], o)
        eng, tgt = self.st.engine, self.st.targets[target_rank]
        n = runs[0][1]
        payload = bytes(c.view) + bytes(o.view)
        code = _element_code(datatype, AtomicOp.CAS)
        mem = self._here(target_rank, atomic=True)
        if mem is not None:
            _deliver(r, _apply(AtomicOp.CAS, code, mem[runs[0][0] : runs[0][0] + n], payload))
            return self._add(target_rank, RmaOp([]))
        scratch = eng.scratch(n)
        req = eng.endpoint.iatomic(
            tgt.node, handle, runs[0][0], AtomicOp.CAS, code, payload, scratch, 0
        )
        return self._add(target_rank, RmaOp([req], _copy_out(eng, scratch, r, n)))

    # -- internals ---------------------------------------------------------------------------

    def _atomic(
        self, origin: Any, result: Any, target_rank: int, target: Any, op: Op | None
    ) -> RmaOp | None:
        aop = _op_code(op)
        if self._null(target_rank):
            spec = result if aop is AtomicOp.NO_OP and result is not None else origin
            _parse_target(target, spec if isinstance(spec, Msg) else _null_origin(spec))
            return None
        o = origin if isinstance(origin, Msg) else message(origin, writable=False)
        r = None
        if result is not None:
            r = result if isinstance(result, Msg) else message(result, writable=True, staged=True)
        spec = r if aop is AtomicOp.NO_OP and r is not None and not o.elements else o
        handle, runs = self._runs(target_rank, target, spec)
        datatype = _parse_target(target, spec)[2]
        code = _element_code(datatype, aop)
        total = sum(n for _, n in runs)
        operand = bytes(o.view) if o.view.nbytes == total else bytes(total)
        if aop is not AtomicOp.NO_OP and o.view.nbytes != total:
            raise MPIException(ERR_TYPE, "origin and target data differ in size")
        if r is not None and r.view.nbytes != total:
            raise MPIException(ERR_TYPE, "result and target data differ in size")
        eng, tgt = self.st.engine, self.st.targets[target_rank]
        mem = self._here(target_rank, atomic=True)
        if mem is not None:
            old = [_apply(aop, code, mem[off : off + n], operand[p : p + n])
                   for (off, n), p in zip(runs, _starts(runs), strict=True)]  # fmt: skip
            if r is not None:
                _deliver(r, b"".join(old))
            return self._add(target_rank, RmaOp([]))
        scratch = None if r is None else eng.scratch(total)
        reqs: list[RmRequest] = []
        pos = 0
        for offset, n in runs:
            chunk = operand[pos : pos + n]
            reqs.append(eng.endpoint.iatomic(tgt.node, handle, offset, aop, code, chunk,
                                             scratch, pos))  # fmt: skip
            pos += n
        after = None if scratch is None or r is None else _copy_out(eng, scratch, r, total)
        return self._add(target_rank, RmaOp(reqs, after))

    def _here(self, target_rank: int, *, atomic: bool) -> memoryview | None:
        """This rank's block when an operation on it may run here, without the NIC: a put
        or get to itself (a conflicting access at the same time would be erroneous), and
        an accumulate or atomic when nobody else can touch the window (a window of one
        rank, or an exclusive lock held on itself)."""
        st = self.st
        if target_rank != st.rank or st.local is None or st.dynamic:
            return None
        if atomic and st.size > 1 and st.locks.get(st.rank) != LOCK_EXCLUSIVE:
            return None
        return st.local.block.buf

    def _null(self, target_rank: int) -> bool:
        if target_rank == PROC_NULL:
            return True
        if not 0 <= target_rank < self.st.size:
            raise MPIException(ERR_RANK, f"target rank {target_rank} is not in the window")
        self.st.check_access(target_rank)
        return False

    def _add(self, target_rank: int, op: RmaOp) -> RmaOp:
        self.st.pending.setdefault(target_rank, []).append(op)
        return op

    def _runs(self, target_rank: int, target: Any, msg: Msg) -> tuple[Handle, _Runs]:
        """The block and the contiguous byte runs in it that a target spec names."""
        disp, count, datatype = _parse_target(target, msg)
        tgt = self.st.targets[target_rank]
        runs = _datatype_runs(datatype, count, disp * tgt.disp_unit)
        if sum(n for _, n in runs) != msg.view.nbytes:
            raise MPIException(ERR_TYPE, "origin and target data differ in size")
        runs = [(offset, n) for offset, n in runs if n]
        if self.st.dynamic:
            return self._attached(target_rank, runs)
        for offset, n in runs:
            if offset < 0 or offset + n > tgt.size:
                raise MPIException(
                    ERR_RMA_RANGE,
                    f"{n} B at {offset} are outside rank {target_rank}'s {tgt.size} B window",
                )
        return tgt.handle, [(tgt.base + offset, n) for offset, n in runs]

    def _attached(self, target_rank: int, runs: _Runs) -> tuple[Handle, _Runs]:
        """Dynamic windows: displacements are addresses at the target; find the attached
        region holding them all in its attach table (read with the NIC once an epoch)."""
        tgt = self.st.targets[target_rank]
        if not runs:
            return tgt.handle, []
        low, high = runs[0][0], max(offset + n for offset, n in runs)
        for address, size, vaddr in self._table(target_rank):
            if size and address <= low and high <= address + size:
                handle = tgt.handle._replace(vaddr=vaddr, size=size, segment=0, offset=0)
                return handle, [(offset - address, n) for offset, n in runs]
        raise MPIException(
            ERR_RMA_RANGE, f"[{low:#x}, {high:#x}) is not attached at rank {target_rank}"
        )

    def _table(self, target_rank: int) -> list[tuple[int, int, int]]:
        table = self.st.tables.get(target_rank)
        if table is None:
            eng, tgt = self.st.engine, self.st.targets[target_rank]
            nbytes = TABLE.size * MAX_ATTACHED
            scratch = eng.scratch(nbytes)
            req = eng.endpoint.iread(tgt.node, tgt.handle, CTRL, nbytes, scratch, 0)
            eng.complete([RmaOp([req])], "attach table")
            table = [TABLE.unpack_from(scratch.buf, i * TABLE.size) for i in range(MAX_ATTACHED)]
            eng.give_back(scratch)
            self.st.tables[target_rank] = table
        return table


def _null_origin(origin: Any) -> Msg:
    """An origin (or result) buffer of an operation on PROC_NULL, as mpi4py takes it: never
    looked at (``MPI.BOTTOM`` will do), but for the datatype ending a list or tuple spec."""
    if isinstance(origin, list | tuple) and origin and isinstance(origin[-1], Datatype):
        return Msg(EMPTY.view, origin[-1], 0, None)
    return EMPTY


def _parse_target(target: Any, msg: Msg | None) -> tuple[int, int, Datatype]:
    """mpi4py's target spec: None, ``disp``, or ``[disp[, count[, datatype]]]``."""
    count = 0 if msg is None else msg.elements
    datatype = EMPTY.datatype if msg is None else msg.datatype
    if target is None:
        return 0, count, datatype
    if isinstance(target, int | np.integer):
        return int(target), count, datatype
    if not isinstance(target, list | tuple) or len(target) > 3:
        raise MessageSpecError(ERR_ARG, f"target: expecting integral or list/tuple, {target!r}")
    disp = int(target[0]) if len(target) > 0 else 0
    if len(target) > 1:
        count = int(target[1])
    if len(target) > 2:
        datatype = as_datatype(target[2])
    return disp, count, datatype


def _datatype_runs(datatype: Datatype, count: int, start: int) -> _Runs:
    tm = datatype.typemap
    if count <= 0 or tm.size == 0:
        return []
    if tm.contiguous:
        return [(start, count * tm.size)]
    bases = start + np.arange(count, dtype=np.int64)[:, None] * tm.extent
    offsets = (bases + tm.disps[None, :]).ravel()
    sizes = np.broadcast_to(tm.run_bytes()[None, :], (count, len(tm.disps))).ravel()
    runs: _Runs = []
    for off, n in zip(offsets.tolist(), sizes.tolist(), strict=True):
        if runs and runs[-1][0] + runs[-1][1] == off:
            runs[-1] = (runs[-1][0], runs[-1][1] + n)
        else:
            runs.append((off, n))
    return runs


def _op_code(op: Op | None) -> AtomicOp:
    if op is None:
        return AtomicOp.SUM
    name = getattr(op, "_name", "").removeprefix("MPI_")
    if name not in AtomicOp.__members__ or name == "CAS":
        raise MPIException(ERR_OP, f"{name or op!r} cannot be used in one-sided accumulates")
    return AtomicOp[name]


def _element_code(datatype: Datatype, op: AtomicOp) -> str:
    if op in _NO_DATA or op is AtomicOp.CAS:
        code = datatype.element_dtype.char
        return code if code in ATOMIC_ELEMENT_CODES else "B"
    code = datatype.element_dtype.char
    if code not in ATOMIC_ELEMENT_CODES:
        raise MPIException(ERR_OP, f"{op.name} does not apply to {datatype.name}")
    return code


def _single(msg: Msg, other: Msg, what: str, *, allow_empty: bool = False) -> Datatype:
    if allow_empty and msg.elements == 0:
        return other.datatype
    if msg.elements != 1:
        raise MessageSpecError(ERR_ARG, f"{what}: expecting a single element, got {msg.elements}")
    if other.elements and msg.datatype.typemap.size != other.datatype.typemap.size:
        raise MessageSpecError(ERR_ARG, f"{what}: mismatched origin and result datatypes")
    return msg.datatype


def _starts(runs: _Runs) -> list[int]:
    out, pos = [], 0
    for _, n in runs:
        out.append(pos)
        pos += n
    return out


def _apply(op: AtomicOp, code: str, where: memoryview, operand: bytes) -> bytes:
    try:
        return apply_atomic(int(op), code, where, operand)
    except ValueError as exc:
        raise MPIException(ERR_OP, str(exc)) from None


def _deliver(msg: Msg, data: bytes) -> None:
    msg.view[: len(data)] = data
    if msg.deliver is not None:
        msg.deliver(len(data))


def _copy_out(eng: Any, scratch: Block, msg: Msg, nbytes: int) -> Any:
    def after() -> None:
        msg.view[:nbytes] = scratch.buf[:nbytes]
        if msg.deliver is not None:
            msg.deliver(nbytes)
        eng.give_back(scratch)

    return after
