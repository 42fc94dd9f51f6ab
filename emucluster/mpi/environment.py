"""The MPI environment calls: Init and Finalize, versions, the ABI queries, thread level,
clock, memory, Abort.

Thin calls over ``emucluster.mpi.lifecycle`` (which keeps this process's one Runtime), as
mpi4py's module-level functions are over MPI's. ``import emucluster.MPI`` has initialised the
library already, so Init and Init_thread are no-ops then.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from emucluster.mpi import lifecycle
from emucluster.mpi.buffer.membuf import buffer
from emucluster.mpi.constants import THREAD_MULTIPLE, THREAD_SERIALIZED
from emucluster.mpi.datatype.handles import AINT, COUNT, OFFSET
from emucluster.mpi.info import INFO_NULL, Info

if TYPE_CHECKING:
    from emucluster.mpi.comm.comm import Comm

__all__ = [
    "SUBVERSION",
    "VERSION",
    "Abort",
    "Alloc_mem",
    "Finalize",
    "Free_mem",
    "Get_abi_fortran_info",
    "Get_abi_info",
    "Get_abi_version",
    "Get_library_version",
    "Get_processor_name",
    "Get_version",
    "Init",
    "Init_thread",
    "Is_finalized",
    "Is_initialized",
    "Is_thread_main",
    "Pcontrol",
    "Query_thread",
    "Wtick",
    "Wtime",
    "comm_lock_table",
    "get_vendor",
]

VERSION = 4
SUBVERSION = 0
"""The MPI standard version implemented (``MPI.VERSION``/``SUBVERSION``, `Get_version`): 4.0.
4.1 waits for per-communicator and per-session buffers (`unsupported.not_41`)."""


def Init() -> None:
    """Initialise MPI (already done at import; a no-op then)."""
    lifecycle.init()


def Init_thread(required: int = THREAD_MULTIPLE) -> int:
    """Initialise MPI; returns the thread level provided (THREAD_SERIALIZED)."""
    lifecycle.init()
    return Query_thread()


def Finalize() -> None:
    """Complete outstanding sends and shut the library down (also done at exit)."""
    lifecycle.finalize()


def Is_initialized() -> bool:
    """Whether MPI was initialized."""
    return lifecycle.is_initialized()


def Is_finalized() -> bool:
    """Whether MPI was finalized."""
    return lifecycle.is_finalized()


def Query_thread() -> int:
    """THREAD_SERIALIZED: any thread may call MPI, but one at a time."""
    return THREAD_SERIALIZED


def Is_thread_main() -> bool:
    """Whether this is the thread that initialised MPI."""
    return threading.current_thread() is threading.main_thread()


def Get_version() -> tuple[int, int]:
    """The MPI standard version implemented: (4, 0)."""
    return VERSION, SUBVERSION


def Get_abi_version() -> tuple[int, int]:
    """The MPI 5.0 ABI version: (-1, -1), as an MPI built without the standard ABI answers
    (emucluster is a Python library; it has no C ABI)."""
    return -1, -1


def Get_abi_info() -> Info:
    """A new Info with the sizes in bytes of the address, count and offset integers
    (``mpi_aint_size``, ``mpi_count_size``, ``mpi_offset_size``)."""
    sizes = {"aint": AINT, "count": COUNT, "offset": OFFSET}
    return Info.Create({f"mpi_{name}_size": str(t.Get_size()) for name, t in sizes.items()})


def Get_abi_fortran_info() -> Info:
    """INFO_NULL: no Fortran here."""
    return INFO_NULL


def Get_library_version() -> str:
    """The library's name and version, and the MPI standard version it implements."""
    name, (x, y, z) = lifecycle.VENDOR
    return (f"{name} {x}.{y}.{z}: MPI {VERSION}.{SUBVERSION} "
            "(mpi4py-compatible surface over emulated Myrinet GM ports)")  # fmt: skip


def Get_processor_name() -> str:
    """This emulated node's name."""
    return lifecycle.processor_name()


def Wtime() -> float:
    """Wall-clock time in seconds."""
    return lifecycle.wtime()


def Wtick() -> float:
    """Resolution of Wtime in seconds."""
    return lifecycle.wtick()


def Abort(errorcode: int = 0) -> None:
    """Terminate the whole job with ``errorcode``."""
    lifecycle.abort(errorcode)


def get_vendor() -> tuple[str, tuple[int, int, int]]:
    """The MPI implementation's name and version, as mpi4py reports its vendor."""
    return lifecycle.VENDOR


def Alloc_mem(size: int, info: Info = INFO_NULL) -> buffer:
    """``size`` bytes of memory (an ``MPI.buffer``, as mpi4py returns; no special memory)."""
    return buffer.allocate(size)


def Free_mem(mem: object) -> None:
    """Release memory from Alloc_mem (the garbage collector does it)."""
    if isinstance(mem, memoryview | buffer):
        mem.release()


def Pcontrol(level: int) -> None:
    """Profiling control: no profiler here, accepted and ignored."""


def comm_lock_table(comm: Comm) -> dict[str, threading.Lock]:
    """mpi4py's table of the locks lowercase collectives take on ``comm``, by operation
    (``MPI._comm_lock_table``)."""
    return comm._state().locks
