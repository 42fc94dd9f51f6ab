"""A window's state: its memory on this rank, what it knows of every target's memory, the
operations in flight and the epochs open.

Memory. Every rank's window lives in one registered block: ``CTRL`` bytes of control words
(the passive-target lock word at 0), then the window's bytes, so the NIC reaches all of it.
``Allocate`` (and ``Allocate_shared``) windows are that memory (the unified model).
``Create`` windows expose memory the program owns, which the NIC cannot reach: the block is
then the window's public copy and the program's buffer its private copy (MPI's separate
model, ``WIN_SEPARATE``): :meth:`LocalMemory.sync` makes them agree at every
synchronization call (the program's stores since the last one go to the public copy, then
the public copy, with what remote operations put there, comes back).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from emucluster.mpi.errors import ERR_RMA_SYNC
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.rma.constants import WIN_FLAVOR_DYNAMIC, WIN_SEPARATE, WIN_UNIFIED

if TYPE_CHECKING:
    from emucluster.grim.port import Block, Handle
    from emucluster.mpi.comm.intracomm import Intracomm
    from emucluster.mpi.errhandler import Handler
    from emucluster.mpi.rma.engine import RmaEngine, RmaOp
    from emucluster.mpi.rma.hostdriven import HostDriven

__all__ = ["CTRL", "MAX_ATTACHED", "TABLE", "LocalMemory", "Target", "WinState"]

CTRL = 64
"""Bytes of control words before a rank's window bytes in its block (lock word at 0)."""
TABLE = struct.Struct("<QQQ")
"""Dynamic windows: one entry of the attach table after the control words (address, size,
block virtual address; size 0 = a free entry), which origins read with the NIC."""
MAX_ATTACHED = 32
"""Dynamic windows: memory regions attached at once per rank."""


@dataclass(slots=True, frozen=True)
class Target:
    """What an origin knows of one rank's window memory (exchanged at creation)."""

    node: int
    handle: Handle
    base: int
    """Offset of the window's byte 0 in the block (``CTRL``)."""
    size: int
    disp_unit: int


class LocalMemory:
    """This rank's window memory (see the module docstring)."""

    def __init__(
        self, block: Block, size: int, private: memoryview | None, *, control: bool = True
    ) -> None:
        self.block = block
        self.size = size
        self.public = block.buf[CTRL : CTRL + size] if control else block.buf[:size]
        """The bytes remote operations reach (after the control words, unless ``control``
        is False: an attached region's block is all window bytes)."""
        self.private = private
        """The program's buffer of a Create window (None: the window is the block)."""
        self._seen: np.ndarray | None = None
        if private is not None:
            self.public[:] = private
            self._seen = np.frombuffer(self.public, np.uint8).copy()

    @property
    def view(self) -> memoryview:
        """The memory the program sees."""
        return self.public if self.private is None else self.private

    def sync(self) -> None:
        """Make the private and public copies agree (separate model; no-op if unified)."""
        if self.private is None or self._seen is None or not self.size:
            return
        priv = np.frombuffer(self.private, np.uint8)
        pub = np.frombuffer(self.public, np.uint8)
        stored = priv != self._seen
        if stored.any():
            pub[stored] = priv[stored]
        self._seen = pub.copy()
        priv[:] = self._seen


class WinState:
    """One window, as this rank holds it."""

    def __init__(
        self,
        engine: RmaEngine,
        comm: Intracomm,
        flavor: int,
        local: LocalMemory | None,
        disp_unit: int,
        errhandler: Handler,
    ) -> None:
        self.engine = engine
        self.comm = comm
        """A private duplicate of the creating communicator (barriers, PSCW messages)."""
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.nodes: tuple[int, ...] = comm._state().nodes
        self.flavor = flavor
        self.local = local
        self.disp_unit = disp_unit
        self.targets: list[Target] = []
        self.pending: dict[int, list[RmaOp]] = {}
        """Operations started and not yet completed, by target rank."""
        self.locks: dict[int, int] = {}
        """Passive-target locks held, by target rank: the lock type."""
        self.lock_all = False
        self.access: tuple[int, ...] | None = None
        """PSCW: the targets of the access epoch Start opened."""
        self.exposure: tuple[int, ...] | None = None
        """PSCW: the origins of the exposure epoch Post opened."""
        self.completed: set[int] = set()
        """PSCW: origins whose Complete arrived in this exposure epoch."""
        self.fence_open = False
        self.name = ""
        self.info: dict[str, str] = {}
        self.attrs: dict[int, object] = {}
        self.errhandler = errhandler
        self.attached: dict[int, LocalMemory] = {}
        """Dynamic windows: the memory attached here, by address (each in its own block,
        the separate model as for Create)."""
        self.tables: dict[int, list[tuple[int, int, int]]] = {}
        """Dynamic windows: the attach tables read from targets in this epoch."""
        self.host: HostDriven | None = None
        """Host-driven passive target (`emucluster.mpi.rma.hostdriven`), else None."""

    @property
    def model(self) -> int:
        """WIN_SEPARATE for a Create window (private buffer), else WIN_UNIFIED."""
        if self.local is not None and self.local.private is not None:
            return WIN_SEPARATE
        return WIN_UNIFIED

    @property
    def dynamic(self) -> bool:
        """Whether this is a Create_dynamic window."""
        return self.flavor == WIN_FLAVOR_DYNAMIC

    def check_access(self, target_rank: int) -> None:
        """ERR_RMA_SYNC if no epoch gives this rank access to ``target_rank``."""
        if self.fence_open or self.lock_all or target_rank in self.locks:
            return
        if self.access is not None and target_rank in self.access:
            return
        raise MPIException(
            ERR_RMA_SYNC, f"no access epoch to rank {target_rank} is open (Fence, Lock, Start)"
        )

    def all_pending(self) -> list[RmaOp]:
        """Every operation in flight, forgetting them."""
        ops = [op for ops in self.pending.values() for op in ops]
        self.pending.clear()
        return ops

    def take_pending(self, target_rank: int) -> list[RmaOp]:
        """The operations in flight to ``target_rank``, forgetting them."""
        return self.pending.pop(target_rank, [])

    def sync_memory(self) -> None:
        """Private and public copies agree (see `LocalMemory.sync`); a new epoch reads
        targets' attach tables afresh."""
        if self.local is not None:
            self.local.sync()
        for memory in self.attached.values():
            memory.sync()
        self.tables.clear()

    def write_table(self) -> None:
        """Publish the attach table in this rank's control block (dynamic windows)."""
        if self.local is None:
            return
        buf = self.local.block.buf
        entries = list(self.attached.items())
        for i in range(MAX_ATTACHED):
            address, memory = entries[i] if i < len(entries) else (0, None)
            size = 0 if memory is None else memory.size
            vaddr = 0 if memory is None else memory.block.handle.vaddr
            TABLE.pack_into(buf, CTRL + i * TABLE.size, address, size, vaddr)
