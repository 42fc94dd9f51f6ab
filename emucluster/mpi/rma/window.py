"""``MPI.Win``: one-sided windows whose operations the target's NIC executes.

The handle class: creation (``Create``, ``Allocate``, ``Allocate_shared``,
``Create_dynamic``), freeing, the queries mpi4py has (group, attributes, info, name, error
handler, ``tomemory``, ``Shared_query``, and ``memoryview(win)``: PEP 688's ``__buffer__``,
which Python 3.12 calls itself and Python 3.11 through the C base of `emucluster.pep688`
where ``pip install`` could compile it), and the calls it hands to the plain objects of the
room: `Transfer` (data movement, `emucluster.mpi.rma.transfer`) and `Synchronization` (epochs,
`emucluster.mpi.rma.sync`). Request-based operations return an ``MPI.Request`` over
the operation's NIC requests (`emucluster.mpi.rma.requests`).

A window is collective over its communicator: every rank allocates one registered block
(control words + its window bytes, `emucluster.mpi.rma.state`) and all exchange the blocks'
handles, sizes and displacement units over a private duplicate of the communicator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi import predefined
from emucluster.mpi.buffer.address import Get_address
from emucluster.mpi.buffer.membuf import buffer
from emucluster.mpi.buffer.view import byte_view
from emucluster.mpi.comm.comm import Comm
from emucluster.mpi.comm.delegate import delegate
from emucluster.mpi.comm.group import Group
from emucluster.mpi.comm.roles import ErrorHandling, Hints, hints_of
from emucluster.mpi.constants import BOTTOM, KEYVAL_INVALID, PROC_NULL
from emucluster.mpi.errhandler import ERRORS_RETURN, Errhandler
from emucluster.mpi.errors import (
    ERR_ARG,
    ERR_RMA_ATTACH,
    ERR_RMA_FLAVOR,
    ERR_RMA_SHARED,
    ERR_SIZE,
    ERR_WIN,
)
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import INFO_NULL, Info
from emucluster.mpi.keyvals import Callback, Keyvals
from emucluster.mpi.rma.constants import (
    LOCK_EXCLUSIVE,
    WIN_BASE,
    WIN_CREATE_FLAVOR,
    WIN_DISP_UNIT,
    WIN_FLAVOR_ALLOCATE,
    WIN_FLAVOR_CREATE,
    WIN_FLAVOR_DYNAMIC,
    WIN_FLAVOR_SHARED,
    WIN_MODEL,
    WIN_SIZE,
)
from emucluster.mpi.rma.engine import engine_of
from emucluster.mpi.rma.hostdriven import HostDriven, host_driven
from emucluster.mpi.rma.requests import rma_request
from emucluster.mpi.rma.state import CTRL, MAX_ATTACHED, TABLE, LocalMemory, Target, WinState
from emucluster.mpi.rma.sync import Synchronization
from emucluster.mpi.rma.transfer import Transfer
from emucluster.mpi.statehandle import StateHandle
from emucluster.pep688 import BufferExporter

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.collective.ops import Op
    from emucluster.mpi.request.request import Request

__all__ = ["WIN_NULL", "Win"]


class Win(StateHandle, BufferExporter):
    """A one-sided window (mpi4py's ``MPI.Win``)."""

    __slots__ = ()
    _kind = "win"

    _st: WinState | None

    def __new__(cls, win: Win | None = None) -> Win:
        """``Win(win)``: a new handle to ``win``'s window; ``Win()``: WIN_NULL."""
        if win is not None and not isinstance(win, Win):
            raise TypeError(f"Win() takes a Win, not {type(win).__name__}")
        self = object.__new__(cls)
        self._st = None if win is None else win._st
        return self

    def __init__(self, win: Win | None = None) -> None:
        """Everything happens in ``__new__`` (subclasses call it, as with mpi4py)."""

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """WIN_NULL unpickles to itself, another null handle to a new one of its class; a
        live window cannot be pickled."""
        if self._st is not None:
            raise ValueError("cannot pickle a window")
        return (_win_null, ()) if self is WIN_NULL else (type(self), ())

    def __repr__(self) -> str:
        return "<emucluster.MPI.Win NULL>" if self._st is None else super().__repr__()

    def _state(self) -> WinState:
        st = self._st
        if st is None:
            raise MPIException(ERR_WIN, "the window is WIN_NULL (or freed)")
        return st

    # -- creation ----------------------------------------------------------------------------

    @classmethod
    def Create(cls, memory: Any, disp_unit: int = 1, info: Info = INFO_NULL,
               comm: Comm | None = None) -> Win:  # fmt: skip
        """A window over the program's ``memory`` (separate model: see `state`)."""
        private = None
        if memory is not None and memory is not BOTTOM:
            private = byte_view(memory, writable=True)
        size = 0 if private is None else private.nbytes
        return cls._new(WIN_FLAVOR_CREATE, comm, size, disp_unit, info, private)

    @classmethod
    def Allocate(cls, size: int, disp_unit: int = 1, info: Info = INFO_NULL,
                 comm: Comm | None = None) -> Win:  # fmt: skip
        """A window over ``size`` new bytes of registered memory (``tomemory`` is it)."""
        return cls._new(WIN_FLAVOR_ALLOCATE, comm, size, disp_unit, info, None)

    @classmethod
    def Allocate_shared(cls, size: int, disp_unit: int = 1, info: Info = INFO_NULL,
                        comm: Comm | None = None) -> Win:  # fmt: skip
        """``Allocate`` for a communicator whose ranks share memory: one node here, so
        every rank but this one is on another node (ERR_RMA_SHARED for more ranks)."""
        c = _comm(comm)
        if c.Get_size() > 1:
            raise MPIException(ERR_RMA_SHARED, "ranks on different nodes share no memory")
        return cls._new(WIN_FLAVOR_SHARED, c, size, disp_unit, info, None)

    @classmethod
    def Create_dynamic(cls, info: Info = INFO_NULL, comm: Comm | None = None) -> Win:
        """A window without memory; ``Attach`` adds some."""
        return cls._new(WIN_FLAVOR_DYNAMIC, comm, 0, 1, info, None)

    @classmethod
    def _new(cls, flavor: int, comm: Comm | None, size: int, disp_unit: int, info: Info,
             private: memoryview | None) -> Win:  # fmt: skip
        c = _comm(comm)
        if size < 0:
            raise MPIException(ERR_SIZE, f"window size {size} is negative")
        if disp_unit <= 0:
            raise MPIException(ERR_ARG, f"displacement unit {disp_unit} is not positive")
        engine = engine_of(c._state().runtime)
        wcomm = c.Dup()
        extra = TABLE.size * MAX_ATTACHED if flavor == WIN_FLAVOR_DYNAMIC else 0
        block = engine.alloc(CTRL + size + extra)
        block.buf[: CTRL + extra] = bytes(CTRL + extra)
        local = LocalMemory(block, size, private)
        st = WinState(engine, wcomm, flavor, local, disp_unit, ERRORS_RETURN._handler().acquire())
        st.info = hints_of(info)
        shared = wcomm.allgather((block.handle, size, disp_unit))
        st.targets = [Target(st.nodes[i], h, CTRL, s, d) for i, (h, s, d) in enumerate(shared)]
        runtime = c._state().runtime
        if host_driven(runtime.config) and flavor != WIN_FLAVOR_DYNAMIC:
            st.host = HostDriven(st)
            runtime.engine.add(st.host)
        win = cls()
        win._st = st
        return win

    def free(self) -> None:
        """Free the window if it is live (mpi4py's safe ``free``; collective then)."""
        if self._st is not None:
            self.Free()

    def Free(self) -> None:
        """Collective: complete everything, free the memory, become WIN_NULL."""
        st = self._state()
        st.engine.complete(st.all_pending(), "Win.Free")
        WIN_KEYVALS.delete_all(self, st.attrs)
        st.comm.Barrier()
        if st.host is not None:
            st.host.closed = True
        st.sync_memory()
        for memory in st.attached.values():
            st.engine.free(memory.block)
        st.attached.clear()
        if st.local is not None:
            st.engine.free(st.local.block)
            st.local = None
        st.errhandler.release()
        st.comm.Free()
        self._st = None

    def Attach(self, memory: Any) -> None:
        """Dynamic windows: expose ``memory`` at its address (``MPI.Get_address``), which
        origins use as the target displacement. Its public copy is a registered block (the
        separate model) listed in this rank's attach table, which origins read with the
        NIC."""
        st = self._state()
        if not st.dynamic:
            raise MPIException(ERR_RMA_FLAVOR, "Attach needs a Create_dynamic window")
        view = byte_view(memory, writable=True)
        address = Get_address(view) if view.nbytes else 0
        if address in st.attached or len(st.attached) >= MAX_ATTACHED:
            raise MPIException(ERR_RMA_ATTACH, "attached already, or too many regions")
        block = st.engine.alloc(view.nbytes)
        st.attached[address] = LocalMemory(block, view.nbytes, view, control=False)
        st.write_table()

    def Detach(self, memory: Any) -> None:
        """Dynamic windows: stop exposing ``memory`` (its last remote updates are kept)."""
        st = self._state()
        view = byte_view(memory, writable=False)
        found = st.attached.pop(Get_address(view) if view.nbytes else 0, None)
        if found is None:
            raise MPIException(ERR_RMA_ATTACH, "the memory is not attached to this window")
        found.sync()
        st.write_table()
        st.engine.free(found.block)

    # -- queries -----------------------------------------------------------------------------

    def Get_group(self) -> Group:
        """The group of the window's processes."""
        return Group._of(self._state().nodes)

    @property
    def group(self) -> Group:
        """The group of the window's processes."""
        return self.Get_group()

    @property
    def group_size(self) -> int:
        """Number of processes."""
        return self._state().size

    @property
    def group_rank(self) -> int:
        """This process's rank."""
        return self._state().rank

    def tomemory(self) -> buffer:
        """This rank's window memory as an ``MPI.buffer`` (empty for a dynamic window)."""
        st = self._state()
        if st.dynamic or st.local is None:
            return buffer.allocate(0)
        return buffer.frombuffer(st.local.view)

    # -- buffer protocol (PEP 688: Python 3.12, or 3.11 through emucluster.pep688) ----------

    def __buffer__(self, flags: int) -> memoryview:
        """``memoryview(win)``: this rank's window memory, writable, as ``tomemory`` (no
        bytes for a dynamic window); ERR_WIN for WIN_NULL, as mpi4py's ``Win`` exports it.
        A Create window's memory is the program's (private) copy, as in mpi4py."""
        st = self._state()
        if st.dynamic or st.local is None:
            return memoryview(bytearray(0))
        return memoryview(st.local.view)  # a new export: releasing it leaves the window's

    def __release_buffer__(self, view: memoryview) -> None:
        """The export of `__buffer__` ends."""
        view.release()

    def Shared_query(self, rank: int) -> tuple[buffer, int]:
        """(memory, disp_unit) of ``rank``'s part of a shared window (only this rank's
        memory is on this node)."""
        st = self._state()
        rank = 0 if rank == PROC_NULL else rank
        if rank != st.rank:
            raise MPIException(ERR_RMA_SHARED, f"rank {rank}'s memory is on another node")
        return self.tomemory(), st.disp_unit

    def Get_attr(self, keyval: int) -> Any:
        """WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_MODEL or a user value."""
        st = self._state()
        base, size, unit = self.attrs
        fixed = {WIN_BASE: base, WIN_SIZE: size, WIN_DISP_UNIT: unit,
                 WIN_CREATE_FLAVOR: st.flavor, WIN_MODEL: st.model}  # fmt: skip
        if keyval in fixed:
            return fixed[keyval]
        return WIN_KEYVALS.get(st.attrs, keyval)

    def Set_attr(self, keyval: int, attrval: Any) -> None:
        """Attach ``attrval`` under ``keyval`` (a previous value is deleted first)."""
        WIN_KEYVALS.set(self, self._state().attrs, keyval, attrval)

    def Delete_attr(self, keyval: int) -> None:
        """Remove the value under ``keyval`` (its delete callback runs)."""
        WIN_KEYVALS.delete(self, self._state().attrs, keyval)

    @classmethod
    def Create_keyval(
        cls, copy_fn: Callback = None, delete_fn: Callback = None, nopython: bool = False
    ) -> int:
        """A new window keyval (windows are never duplicated: ``copy_fn`` is kept unused)."""
        return WIN_KEYVALS.create(copy_fn, delete_fn)

    @classmethod
    def Free_keyval(cls, keyval: int) -> int:
        """Retire ``keyval``; returns KEYVAL_INVALID."""
        WIN_KEYVALS.free(keyval)
        return KEYVAL_INVALID

    @property
    def attrs(self) -> tuple[int, int, int]:
        """(base address, size, displacement unit) of this rank's window memory."""
        st = self._state()
        if st.dynamic:
            return 0, 0, st.disp_unit
        memory = self.tomemory()
        return (Get_address(memory) if memory.nbytes else 0), int(memory.nbytes), st.disp_unit

    @property
    def flavor(self) -> int:
        """How the window was created (WIN_FLAVOR_*)."""
        return self._state().flavor

    @property
    def model(self) -> int:
        """WIN_SEPARATE or WIN_UNIFIED."""
        return self._state().model

    Get_info = delegate(Hints, Hints.Get_info)
    Set_info = delegate(Hints, Hints.Set_info)

    @property
    def info(self) -> Info:
        """The hints (a new Info object)."""
        return self.Get_info()

    @info.setter
    def info(self, info: Info) -> None:
        self.Set_info(info)

    def Get_name(self) -> str:
        """The window's name (``MPI_WIN_NULL`` for the null handle)."""
        return "MPI_WIN_NULL" if self._st is None else self._st.name

    def Set_name(self, name: str) -> None:
        """Name the window."""
        self._state().name = str(name)

    @property
    def name(self) -> str:
        """The window's name."""
        return self.Get_name()

    @name.setter
    def name(self, name: str) -> None:
        self.Set_name(name)

    Get_errhandler = delegate(ErrorHandling, ErrorHandling.Get_errhandler)
    Set_errhandler = delegate(ErrorHandling, ErrorHandling.Set_errhandler)
    Call_errhandler = delegate(ErrorHandling, ErrorHandling.Call_errhandler)

    @classmethod
    def Create_errhandler(cls, errhandler_fn: Callable[..., Any]) -> Errhandler:
        """A user error handler: ``errhandler_fn(win, errorcode)``."""
        return Errhandler._create(errhandler_fn)

    # -- data movement -----------------------------------------------------------------------

    def Put(self, origin: Any, target_rank: int, target: Any = None) -> None:
        """Put ``origin`` into ``target_rank``'s window."""
        Transfer(self._state()).put(origin, target_rank, target)

    def Get(self, origin: Any, target_rank: int, target: Any = None) -> None:
        """Get ``target_rank``'s window data into ``origin``."""
        Transfer(self._state()).get(origin, target_rank, target)

    def Accumulate(self, origin: Any, target_rank: int, target: Any = None,
                   op: Op | None = None) -> None:  # fmt: skip
        """Combine ``origin`` into ``target_rank``'s window with ``op`` (default SUM)."""
        Transfer(self._state()).accumulate(origin, target_rank, target, op)

    def Get_accumulate(self, origin: Any, result: Any, target_rank: int, target: Any = None,
                       op: Op | None = None) -> None:  # fmt: skip
        """Accumulate, fetching the target's previous contents into ``result``."""
        Transfer(self._state()).get_accumulate(origin, result, target_rank, target, op)

    def Fetch_and_op(self, origin: Any, result: Any, target_rank: int, target_disp: int = 0,
                     op: Op | None = None) -> None:  # fmt: skip
        """One element's Get_accumulate."""
        Transfer(self._state()).fetch_and_op(origin, result, target_rank, target_disp, op)

    def Compare_and_swap(self, origin: Any, compare: Any, result: Any, target_rank: int,
                         target_disp: int = 0) -> None:  # fmt: skip
        """Replace one element by ``origin`` if it equals ``compare``; the old one into
        ``result``."""
        Transfer(self._state()).compare_and_swap(origin, compare, result, target_rank,
                                                 target_disp)  # fmt: skip

    def Rput(self, origin: Any, target_rank: int, target: Any = None) -> Request:
        """Put, with a request completing when it is done at the target."""
        st = self._state()
        return rma_request(st, Transfer(st).put(origin, target_rank, target))

    def Rget(self, origin: Any, target_rank: int, target: Any = None) -> Request:
        """Get, with a request completing when the data are in ``origin``."""
        st = self._state()
        return rma_request(st, Transfer(st).get(origin, target_rank, target))

    def Raccumulate(self, origin: Any, target_rank: int, target: Any = None,
                    op: Op | None = None) -> Request:  # fmt: skip
        """Accumulate, with a request."""
        st = self._state()
        return rma_request(st, Transfer(st).accumulate(origin, target_rank, target, op))

    def Rget_accumulate(self, origin: Any, result: Any, target_rank: int, target: Any = None,
                        op: Op | None = None) -> Request:  # fmt: skip
        """Get_accumulate, with a request."""
        st = self._state()
        op_ = Transfer(st).get_accumulate(origin, result, target_rank, target, op)
        return rma_request(st, op_)

    # -- synchronization ---------------------------------------------------------------------

    def Fence(self, assertion: int = 0) -> None:
        """Close and open an active-target epoch on every rank."""
        Synchronization(self._state()).fence(assertion)

    def Start(self, group: Group, assertion: int = 0) -> None:
        """Open an access epoch to ``group`` (PSCW)."""
        Synchronization(self._state()).start(group, assertion)

    def Complete(self) -> None:
        """End the access epoch of Start."""
        Synchronization(self._state()).complete()

    def Post(self, group: Group, assertion: int = 0) -> None:
        """Open an exposure epoch to ``group`` (PSCW)."""
        Synchronization(self._state()).post(group, assertion)

    def Wait(self) -> bool:
        """End the exposure epoch of Post once its origins completed."""
        Synchronization(self._state()).wait()
        return True

    def Test(self) -> bool:
        """Whether the exposure epoch ended (ending it if so)."""
        return Synchronization(self._state()).test()

    def Lock(self, rank: int, lock_type: int = LOCK_EXCLUSIVE, assertion: int = 0) -> None:
        """Open a passive-target epoch at ``rank`` (the lock is taken at its NIC)."""
        Synchronization(self._state()).lock(rank, lock_type, assertion)

    def Unlock(self, rank: int) -> None:
        """End the passive-target epoch at ``rank``."""
        Synchronization(self._state()).unlock(rank)

    def Lock_all(self, assertion: int = 0) -> None:
        """A shared passive-target epoch at every rank."""
        Synchronization(self._state()).lock_all(assertion)

    def Unlock_all(self) -> None:
        """End Lock_all's epoch."""
        Synchronization(self._state()).unlock_all()

    def Flush(self, rank: int) -> None:
        """Complete the operations to ``rank``."""
        Synchronization(self._state()).flush(rank)

    def Flush_all(self) -> None:
        """Complete every operation."""
        Synchronization(self._state()).flush_all()

    def Flush_local(self, rank: int) -> None:
        """Complete the operations to ``rank`` locally (here: at the target too)."""
        Synchronization(self._state()).flush(rank)

    def Flush_local_all(self) -> None:
        """Complete every operation locally (here: at the targets too)."""
        Synchronization(self._state()).flush_all()

    def Sync(self) -> None:
        """Make this rank's private and public window copies agree."""
        Synchronization(self._state()).sync()


WIN_NULL = Win()


def _win_null() -> Win:
    """WIN_NULL (what it unpickles to)."""
    return WIN_NULL


WIN_KEYVALS = Keyvals("Win", first=64)
"""The window keyval space (MPI_Win_create_keyval)."""


def _comm(comm: Comm | None) -> Comm:
    if comm is None:
        self_: Comm = predefined.lookup("COMM_SELF")
        return self_
    if not isinstance(comm, Comm):
        raise TypeError(f"expecting a Comm, got {type(comm).__name__}")
    return comm
