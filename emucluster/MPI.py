"""``from emucluster import MPI``: a drop-in for ``from mpi4py import MPI`` on emucluster.

Importing this module initialises MPI, as importing ``mpi4py.MPI`` does: it opens the MPI
port of this node's NIC and builds COMM_WORLD (rank == node id) and COMM_SELF. MPI is
finalized at interpreter exit (or by ``MPI.Finalize()``). Names, defaults and semantics
follow mpi4py (over MPICH, whose constant values it shows); mpi4py's documentation is the
specification wherever emucluster's is silent.

Beyond mpi4py: collective methods take ``algorithm="..."`` (see ``emucluster.coll``), and
``comm.Get_queue_stats()`` / ``emucluster.mpi.stats()`` return this rank's matching-queue
statistics (written to ``$EMU_STATS_DIR/rank<N>.json`` at Finalize when set).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.mpi import lifecycle as _lifecycle
from emucluster.mpi import predefined as _predefined
from emucluster.mpi.buffer.address import Aint_add, Aint_diff, Get_address
from emucluster.mpi.buffer.membuf import buffer
from emucluster.mpi.collective.calls import trace_describe as _trace_describe
from emucluster.mpi.collective.ops import Op
from emucluster.mpi.collective.ops import predefined_ops as _ops
from emucluster.mpi.comm.comm import Comm, Errhandler
from emucluster.mpi.comm.fromgroup import COMM_TYPE_SHARED
from emucluster.mpi.comm.group import GROUP_EMPTY, GROUP_NULL, Group
from emucluster.mpi.comm.group import set_local_node as _set_local_node
from emucluster.mpi.comm.intracomm import Intercomm, Intracomm, make_world
from emucluster.mpi.constants import (
    ANY_SOURCE,
    ANY_TAG,
    BOTTOM,
    CONGRUENT,
    IDENT,
    IN_PLACE,
    KEYVAL_INVALID,
    MAX_ERROR_STRING,
    MAX_PROCESSOR_NAME,
    PROC_NULL,
    ROOT,
    SIMILAR,
    TAG_UB,
    THREAD_FUNNELED,
    THREAD_MULTIPLE,
    THREAD_SERIALIZED,
    THREAD_SINGLE,
    UNDEFINED,
    UNEQUAL,
    UNIVERSE_SIZE,
    WTIME_IS_GLOBAL,
)
from emucluster.mpi.datatype.constructors import COMBINERS as _combiners
from emucluster.mpi.datatype.constructors import (
    ORDER_C,
    ORDER_F,
    ORDER_FORTRAN,
    TYPECLASS_COMPLEX,
    TYPECLASS_INTEGER,
    TYPECLASS_REAL,
)
from emucluster.mpi.datatype.darray import (
    DISTRIBUTE_BLOCK,
    DISTRIBUTE_CYCLIC,
    DISTRIBUTE_DFLT_DARG,
    DISTRIBUTE_NONE,
)
from emucluster.mpi.datatype.datatype import Datatype
from emucluster.mpi.datatype.datatype import predefined as _dt
from emucluster.mpi.errors import (
    ERR_ARG,
    ERR_BUFFER,
    ERR_COMM,
    ERR_COUNT,
    ERR_DIMS,
    ERR_GROUP,
    ERR_IN_STATUS,
    ERR_INTERN,
    ERR_LASTCODE,
    ERR_OP,
    ERR_OTHER,
    ERR_PENDING,
    ERR_PROC_FAILED,
    ERR_RANK,
    ERR_REQUEST,
    ERR_ROOT,
    ERR_TAG,
    ERR_TOPOLOGY,
    ERR_TRUNCATE,
    ERR_TYPE,
    ERR_UNKNOWN,
    SUCCESS,
    Exception,
    Get_error_class,
    Get_error_string,
)
from emucluster.mpi.request.request import REQUEST_NULL, Request
from emucluster.mpi.request.status import Status
from emutrace import mpihooks as _mpihooks

if TYPE_CHECKING:
    from threading import Lock

__all__ = [
    "AINT",
    "ANY_SOURCE",
    "ANY_TAG",
    "BAND",
    "BOOL",
    "BOR",
    "BOTTOM",
    "BXOR",
    "BYTE",
    "CHAR",
    "CHARACTER",
    "COMM_NULL",
    "COMM_SELF",
    # groups, topologies, derived datatypes, v- and nonblocking collectives (issue 15, coll)
    "COMM_TYPE_SHARED",
    "COMM_WORLD",
    "COMPLEX",
    "CONGRUENT",
    "COUNT",
    "CXX_BOOL",
    "CXX_DOUBLE_COMPLEX",
    "CXX_FLOAT_COMPLEX",
    "C_BOOL",
    "C_COMPLEX",
    "C_DOUBLE_COMPLEX",
    "C_FLOAT_COMPLEX",
    "C_LONG_DOUBLE_COMPLEX",
    "DATATYPE_NULL",
    "DOUBLE",
    "DOUBLE_COMPLEX",
    "DOUBLE_INT",
    "DOUBLE_PRECISION",
    "ERRHANDLER_NULL",
    "ERRORS_ABORT",
    "ERRORS_ARE_FATAL",
    "ERRORS_RETURN",
    "ERR_ARG",
    "ERR_BUFFER",
    "ERR_COMM",
    "ERR_COUNT",
    "ERR_DIMS",
    "ERR_GROUP",
    "ERR_INTERN",
    "ERR_IN_STATUS",
    "ERR_LASTCODE",
    "ERR_OP",
    "ERR_OTHER",
    "ERR_PENDING",
    "ERR_PROC_FAILED",
    "ERR_RANK",
    "ERR_REQUEST",
    "ERR_ROOT",
    "ERR_TAG",
    "ERR_TOPOLOGY",
    "ERR_TRUNCATE",
    "ERR_TYPE",
    "ERR_UNKNOWN",
    "FLOAT",
    "FLOAT_INT",
    "GROUP_EMPTY",
    "GROUP_NULL",
    "IDENT",
    "INT",
    "INT8_T",
    "INT16_T",
    "INT32_T",
    "INT64_T",
    "INTEGER",
    "INT_INT",
    "IN_PLACE",
    "KEYVAL_INVALID",
    "LAND",
    "LOGICAL",
    "LONG",
    "LONG_DOUBLE",
    "LONG_DOUBLE_INT",
    "LONG_INT",
    "LONG_LONG",
    "LONG_LONG_INT",
    "LOR",
    "LXOR",
    "MAX",
    "MAXLOC",
    "MAX_ERROR_STRING",
    "MAX_PROCESSOR_NAME",
    "MIN",
    "MINLOC",
    "NO_OP",
    "OFFSET",
    "OP_NULL",
    "PACKED",
    "PROC_NULL",
    "PROD",
    "REAL",
    "REPLACE",
    "REQUEST_NULL",
    "ROOT",
    "SHORT",
    "SHORT_INT",
    "SIGNED_CHAR",
    "SIMILAR",
    "SUBVERSION",
    "SUCCESS",
    "SUM",
    "TAG_UB",
    "THREAD_FUNNELED",
    "THREAD_MULTIPLE",
    "THREAD_SERIALIZED",
    "THREAD_SINGLE",
    "TWOINT",
    "UINT8_T",
    "UINT16_T",
    "UINT32_T",
    "UINT64_T",
    "UNDEFINED",
    "UNEQUAL",
    "UNIVERSE_SIZE",
    "UNSIGNED",
    "UNSIGNED_CHAR",
    "UNSIGNED_INT",
    "UNSIGNED_LONG",
    "UNSIGNED_LONG_LONG",
    "UNSIGNED_SHORT",
    "VERSION",
    "WCHAR",
    "WTIME_IS_GLOBAL",
    "Abort",
    "Comm",
    "Datatype",
    "Errhandler",
    "Exception",
    "Finalize",
    "Get_error_class",
    "Get_error_string",
    "Get_library_version",
    "Get_processor_name",
    "Get_version",
    "Group",
    "Init",
    "Init_thread",
    "Intracomm",
    "Is_finalized",
    "Is_initialized",
    "Is_thread_main",
    "Op",
    "Query_thread",
    "Request",
    "Status",
    "Wtick",
    "Wtime",
    "get_vendor",
]

VERSION = 3
SUBVERSION = 1

BYTE = _dt["BYTE"]
PACKED = _dt["PACKED"]
CHAR = _dt["CHAR"]
WCHAR = _dt["WCHAR"]
SIGNED_CHAR = _dt["SIGNED_CHAR"]
UNSIGNED_CHAR = _dt["UNSIGNED_CHAR"]
SHORT = _dt["SHORT"]
UNSIGNED_SHORT = _dt["UNSIGNED_SHORT"]
INT = _dt["INT"]
UNSIGNED = _dt["UNSIGNED"]
UNSIGNED_INT = _dt["UNSIGNED_INT"]
LONG = _dt["LONG"]
UNSIGNED_LONG = _dt["UNSIGNED_LONG"]
LONG_LONG = _dt["LONG_LONG"]
LONG_LONG_INT = _dt["LONG_LONG_INT"]
UNSIGNED_LONG_LONG = _dt["UNSIGNED_LONG_LONG"]
FLOAT = _dt["FLOAT"]
DOUBLE = _dt["DOUBLE"]
LONG_DOUBLE = _dt["LONG_DOUBLE"]
C_BOOL = _dt["C_BOOL"]
BOOL = _dt["BOOL"]
CXX_BOOL = _dt["CXX_BOOL"]
INT8_T = _dt["INT8_T"]
INT16_T = _dt["INT16_T"]
INT32_T = _dt["INT32_T"]
INT64_T = _dt["INT64_T"]
UINT8_T = _dt["UINT8_T"]
UINT16_T = _dt["UINT16_T"]
UINT32_T = _dt["UINT32_T"]
UINT64_T = _dt["UINT64_T"]
AINT = _dt["AINT"]
OFFSET = _dt["OFFSET"]
COUNT = _dt["COUNT"]
C_COMPLEX = _dt["C_COMPLEX"]
C_FLOAT_COMPLEX = _dt["C_FLOAT_COMPLEX"]
C_DOUBLE_COMPLEX = _dt["C_DOUBLE_COMPLEX"]
C_LONG_DOUBLE_COMPLEX = _dt["C_LONG_DOUBLE_COMPLEX"]
CXX_FLOAT_COMPLEX = _dt["CXX_FLOAT_COMPLEX"]
CXX_DOUBLE_COMPLEX = _dt["CXX_DOUBLE_COMPLEX"]
COMPLEX = _dt["COMPLEX"]
DOUBLE_COMPLEX = _dt["DOUBLE_COMPLEX"]
CHARACTER = _dt["CHARACTER"]
LOGICAL = _dt["LOGICAL"]
INTEGER = _dt["INTEGER"]
REAL = _dt["REAL"]
DOUBLE_PRECISION = _dt["DOUBLE_PRECISION"]
SHORT_INT = _dt["SHORT_INT"]
TWOINT = _dt["TWOINT"]
INT_INT = _dt["INT_INT"]
LONG_INT = _dt["LONG_INT"]
FLOAT_INT = _dt["FLOAT_INT"]
DOUBLE_INT = _dt["DOUBLE_INT"]
LONG_DOUBLE_INT = _dt["LONG_DOUBLE_INT"]
DATATYPE_NULL = _dt["DATATYPE_NULL"]

# -- issue 15 (coll): derived datatypes --------------------------------------------------------
# predefined types this emulator does not have (mpi4py shows them as DATATYPE_NULL then)
FLOAT16_T = DATATYPE_NULL
FLOAT32_T = DATATYPE_NULL
FLOAT64_T = DATATYPE_NULL
BFLOAT16_T = DATATYPE_NULL
LOGICAL1 = _dt["LOGICAL1"]
LOGICAL2 = _dt["LOGICAL2"]
LOGICAL4 = _dt["LOGICAL4"]
LOGICAL8 = _dt["LOGICAL8"]
LOGICAL16 = DATATYPE_NULL
INTEGER1 = _dt["INTEGER1"]
INTEGER2 = _dt["INTEGER2"]
INTEGER4 = _dt["INTEGER4"]
INTEGER8 = _dt["INTEGER8"]
INTEGER16 = DATATYPE_NULL
REAL2 = _dt["REAL2"]
REAL4 = _dt["REAL4"]
REAL8 = _dt["REAL8"]
REAL16 = _dt["REAL16"]
COMPLEX4 = DATATYPE_NULL
COMPLEX8 = _dt["COMPLEX8"]
COMPLEX16 = _dt["COMPLEX16"]
COMPLEX32 = _dt["COMPLEX32"]
UB = DATATYPE_NULL
LB = DATATYPE_NULL
CHAR16_T = DATATYPE_NULL
CHAR32_T = DATATYPE_NULL
COMBINER_NAMED = _combiners["NAMED"]
TYPECLASS_LOGICAL = UNDEFINED  # MPI 4.1; MPICH 4 has none
COMBINER_DUP = _combiners["DUP"]
COMBINER_CONTIGUOUS = _combiners["CONTIGUOUS"]
COMBINER_VECTOR = _combiners["VECTOR"]
COMBINER_HVECTOR = _combiners["HVECTOR"]
COMBINER_INDEXED = _combiners["INDEXED"]
COMBINER_HINDEXED = _combiners["HINDEXED"]
COMBINER_INDEXED_BLOCK = _combiners["INDEXED_BLOCK"]
COMBINER_STRUCT = _combiners["STRUCT"]
COMBINER_SUBARRAY = _combiners["SUBARRAY"]
COMBINER_DARRAY = _combiners["DARRAY"]
COMBINER_F90_REAL = _combiners["F90_REAL"]
COMBINER_F90_COMPLEX = _combiners["F90_COMPLEX"]
COMBINER_F90_INTEGER = _combiners["F90_INTEGER"]
COMBINER_RESIZED = _combiners["RESIZED"]
COMBINER_HINDEXED_BLOCK = _combiners["HINDEXED_BLOCK"]
COMBINER_VALUE_INDEX = UNDEFINED
COMBINER_HVECTOR_INTEGER = UNDEFINED
COMBINER_HINDEXED_INTEGER = UNDEFINED
COMBINER_STRUCT_INTEGER = UNDEFINED
# -- end issue 15 (coll) -----------------------------------------------------------------------

SUM = _ops["SUM"]
PROD = _ops["PROD"]
MAX = _ops["MAX"]
MIN = _ops["MIN"]
LAND = _ops["LAND"]
LOR = _ops["LOR"]
LXOR = _ops["LXOR"]
BAND = _ops["BAND"]
BOR = _ops["BOR"]
BXOR = _ops["BXOR"]
MAXLOC = _ops["MAXLOC"]
MINLOC = _ops["MINLOC"]
REPLACE = _ops["REPLACE"]
NO_OP = _ops["NO_OP"]
OP_NULL = _ops["OP_NULL"]

from emucluster.mpi.errhandler import (  # noqa: E402
    ERRHANDLER_NULL,
    ERRORS_ABORT,
    ERRORS_ARE_FATAL,
    ERRORS_RETURN,
)

_rt = _lifecycle.init()
COMM_WORLD, COMM_SELF = make_world(_rt)
_set_local_node(_rt.node)
_mpihooks.install(Intracomm, _rt.node, _trace_describe)
COMM_NULL = Comm()
for _name, _handle in (
    ("COMM_WORLD", COMM_WORLD),
    ("COMM_SELF", COMM_SELF),
    ("COMM_NULL", COMM_NULL),
):
    _predefined.register(_name, _handle)


def Init() -> None:
    """Initialise MPI (already done at import; a no-op then)."""
    _lifecycle.init()


def Init_thread(required: int = THREAD_MULTIPLE) -> int:
    """Initialise MPI; returns the thread level provided (THREAD_SERIALIZED)."""
    _lifecycle.init()
    return Query_thread()


def Finalize() -> None:
    """Complete outstanding sends and shut the library down (also done at exit)."""
    _lifecycle.finalize()


def Is_initialized() -> bool:
    """Whether MPI was initialized."""
    return _lifecycle.is_initialized()


def Is_finalized() -> bool:
    """Whether MPI was finalized."""
    return _lifecycle.is_finalized()


def Query_thread() -> int:
    """THREAD_SERIALIZED: any thread may call MPI, but one at a time."""
    return THREAD_SERIALIZED


def Is_thread_main() -> bool:
    """Whether this is the thread that initialised MPI."""
    import threading

    return threading.current_thread() is threading.main_thread()


def Get_version() -> tuple[int, int]:
    """The MPI standard version implemented: (3, 1)."""
    return VERSION, SUBVERSION


def Get_library_version() -> str:
    """The library's name and version."""
    return "emucluster MPI (mpi4py-compatible surface over emulated Myrinet GM ports)"


def Get_processor_name() -> str:
    """This emulated node's name."""
    return _lifecycle.processor_name()


def Wtime() -> float:
    """Wall-clock time in seconds."""
    return _lifecycle.wtime()


def Wtick() -> float:
    """Resolution of Wtime in seconds."""
    return _lifecycle.wtick()


def Abort(errorcode: int = 0) -> None:
    """Terminate the whole job with ``errorcode``."""
    _lifecycle.abort(errorcode)


# -- mpi4py names for unmodified programs (issue 15: environment, p2p, requests) -------------


def get_vendor() -> tuple[str, tuple[int, int, int]]:
    """The MPI implementation's name and version, as mpi4py reports its vendor."""
    return _lifecycle.VENDOR


def _comm_lock_table(comm: Comm) -> dict[str, Lock]:
    """mpi4py's table of the locks lowercase collectives take on ``comm``, by operation."""
    return comm._state().locks


from emucluster.mpi import errors as _errors  # noqa: E402
from emucluster.mpi.buffer.serial import PICKLE as pickle  # noqa: E402
from emucluster.mpi.comm.session import MAX_PSET_NAME_LEN, SESSION_NULL, Session  # noqa: E402
from emucluster.mpi.constants import IO, LASTUSEDCODE  # noqa: E402
from emucluster.mpi.info import INFO_ENV, INFO_NULL, MAX_INFO_KEY, MAX_INFO_VAL, Info  # noqa: E402
from emucluster.mpi.pt2pt.bsend import (  # noqa: E402
    BSEND_OVERHEAD,
    BUFFER_AUTOMATIC,
    Attach_buffer,
    Detach_buffer,
)
from emucluster.mpi.pt2pt.mprobe import MESSAGE_NO_PROC, MESSAGE_NULL, Message  # noqa: E402
from emucluster.mpi.pt2pt.persistent import Prequest  # noqa: E402
from emucluster.mpi.topo.create import UNWEIGHTED, WEIGHTS_EMPTY, Compute_dims  # noqa: E402
from emucluster.mpi.topo.topocomm import Cartcomm, Distgraphcomm, Graphcomm, Topocomm  # noqa: E402
from emucluster.mpi.topo.topology import CART, DIST_GRAPH, GRAPH  # noqa: E402
from emucluster.mpi.unsupported import (  # noqa: E402
    FILE_NULL,
    WIN_NULL,
    File,
    Win,
    not_offered,
)

__all__ += [  # issue 15: topologies, intercomm handles, info objects, sessions
    "CART",
    "DIST_GRAPH",
    "GRAPH",
    "INFO_ENV",
    "MAX_INFO_KEY",
    "MAX_INFO_VAL",
    "MAX_PSET_NAME_LEN",
    "UNWEIGHTED",
    "WEIGHTS_EMPTY",
    "Cartcomm",
    "Compute_dims",
    "Distgraphcomm",
    "Graphcomm",
    "Intercomm",
    "Topocomm",
]  # fmt: skip

globals().update({k: v for k, v in vars(_errors).items() if k.startswith("ERR_")})
Add_error_class = _errors.Add_error_class
Add_error_code = _errors.Add_error_code
Add_error_string = _errors.Add_error_string
Remove_error_class = _errors.Remove_error_class
Remove_error_code = _errors.Remove_error_code
Remove_error_string = _errors.Remove_error_string

from emucluster.mpi.comm.fromgroup import (  # noqa: E402
    COMM_TYPE_HW_GUIDED,
    COMM_TYPE_HW_UNGUIDED,
    COMM_TYPE_RESOURCE_GUIDED,
)
from emucluster.mpi.constants import APPNUM  # noqa: E402

MODE_RDONLY, MODE_RDWR, MODE_WRONLY, MODE_CREATE = 2, 8, 4, 1
MODE_EXCL, MODE_DELETE_ON_CLOSE, MODE_UNIQUE_OPEN = 64, 16, 32
MODE_SEQUENTIAL, MODE_APPEND = 256, 128


class Grequest(Request):
    """Generalized requests: not offered (``Start`` raises NotImplementedError)."""

    __slots__ = ()

    @classmethod
    def _check(cls, pending: object) -> None:
        if pending is not None:
            raise TypeError("Grequest() takes a generalized request")

    @classmethod
    def Start(cls, *args: object, **kwargs: object) -> Grequest:
        """Not offered."""
        not_offered("generalized requests (Grequest.Start)")


def Alloc_mem(size: int, info: Info = INFO_NULL) -> memoryview:
    """``size`` bytes of memory (a writable byte view; no special memory here)."""
    return memoryview(bytearray(size))


def Free_mem(mem: object) -> None:
    """Release memory from Alloc_mem (the garbage collector does it)."""
    if isinstance(mem, memoryview):
        mem.release()


def Pcontrol(level: int) -> None:
    """Profiling control: no profiler here, accepted and ignored."""


def Open_port(info: Info = INFO_NULL) -> str:
    """Not offered (dynamic processes)."""
    not_offered("dynamic processes (Open_port)")


def Close_port(port_name: str) -> None:
    """Not offered (dynamic processes)."""
    not_offered("dynamic processes (Close_port)")


def Get_hw_resource_info() -> Info:
    """Not offered (info objects)."""
    not_offered("hardware resource info (Get_hw_resource_info)")


__all__ += [
    "APPNUM", "IO", "BSEND_OVERHEAD", "BUFFER_AUTOMATIC", "COMM_TYPE_HW_GUIDED",
    "COMM_TYPE_HW_UNGUIDED", "COMM_TYPE_RESOURCE_GUIDED", "COMM_TYPE_SHARED", "FILE_NULL",
    "INFO_NULL", "LASTUSEDCODE", "MESSAGE_NO_PROC", "MESSAGE_NULL", "SESSION_NULL",
    "WIN_NULL", "Add_error_class", "Add_error_code", "Add_error_string", "Alloc_mem",
    "Attach_buffer", "Close_port", "Detach_buffer", "File", "Free_mem", "Get_hw_resource_info",
    "Aint_add", "Aint_diff", "Get_address", "buffer", "ORDER_C", "ORDER_F", "ORDER_FORTRAN",
    "TYPECLASS_COMPLEX", "TYPECLASS_INTEGER", "TYPECLASS_REAL", "TYPECLASS_LOGICAL",
    "DISTRIBUTE_BLOCK", "DISTRIBUTE_CYCLIC", "DISTRIBUTE_DFLT_DARG", "DISTRIBUTE_NONE",
    "Grequest", "Info", "Message", "Open_port", "Pcontrol", "Prequest", "Remove_error_class",
    "Remove_error_code", "Remove_error_string", "Session", "Win", "pickle",
    *(k for k in vars(_errors) if k.startswith("ERR_") and k not in __all__),
]  # fmt: skip
