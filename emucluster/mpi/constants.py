"""MPI constants with MPICH's values (what ``mpi4py`` over MPICH shows), and the sentinels."""

from __future__ import annotations

from emucluster.p2p.envelope import MAX_TAG

__all__ = [
    "ANY_SOURCE",
    "ANY_TAG",
    "APPNUM",
    "BOTTOM",
    "CONGRUENT",
    "DISPLACEMENT_CURRENT",
    "IDENT",
    "IN_PLACE",
    "IO",
    "KEYVAL_INVALID",
    "LASTUSEDCODE",
    "MAX_DATAREP_STRING",
    "MAX_ERROR_STRING",
    "MAX_PROCESSOR_NAME",
    "MODE_APPEND",
    "MODE_CREATE",
    "MODE_DELETE_ON_CLOSE",
    "MODE_EXCL",
    "MODE_RDONLY",
    "MODE_RDWR",
    "MODE_SEQUENTIAL",
    "MODE_UNIQUE_OPEN",
    "MODE_WRONLY",
    "PROC_NULL",
    "ROOT",
    "SEEK_CUR",
    "SEEK_END",
    "SEEK_SET",
    "SIMILAR",
    "TAG_UB",
    "TAG_UB_VALUE",
    "THREAD_FUNNELED",
    "THREAD_MULTIPLE",
    "THREAD_SERIALIZED",
    "THREAD_SINGLE",
    "UNDEFINED",
    "UNEQUAL",
    "UNIVERSE_SIZE",
    "WTIME_IS_GLOBAL",
    "BottomType",
    "InPlaceType",
    "Sentinel",
    "in_place",
]

ANY_SOURCE = -2
ANY_TAG = -1
PROC_NULL = -1
ROOT = -3
UNDEFINED = -32766

IDENT = 0  # Comm.Compare results
CONGRUENT = 1
SIMILAR = 2
UNEQUAL = 3

THREAD_SINGLE = 0
THREAD_FUNNELED = 1
THREAD_SERIALIZED = 2
THREAD_MULTIPLE = 3

KEYVAL_INVALID = 0x24000000
TAG_UB = 0x64400001  # attribute keys for Comm.Get_attr
UNIVERSE_SIZE = 0x64400009
WTIME_IS_GLOBAL = 0x64400007
IO = 0x64400005  # attribute key: a rank that may do I/O
LASTUSEDCODE = 0x6440000B  # largest error code or class in use (Add_error_class ...)
APPNUM = 0x6440000D  # attribute key: which program of the launch (emurun runs one: 0)
TAG_UB_VALUE = MAX_TAG  # largest tag a program may use

MAX_PROCESSOR_NAME = 128
MAX_ERROR_STRING = 512


class Sentinel:
    """A named placeholder buffer (IN_PLACE, BOTTOM), compared by identity."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


class BottomType(Sentinel):
    """The type of ``BOTTOM`` (mpi4py's ``MPI.BottomType``, which ``mpi4py.typing`` names)."""

    __slots__ = ()


class InPlaceType(Sentinel):
    """The type of ``IN_PLACE`` (mpi4py's ``MPI.InPlaceType``)."""

    __slots__ = ()


IN_PLACE = InPlaceType("IN_PLACE")
BOTTOM = BottomType("BOTTOM")


def in_place(buf: object) -> bool:
    """Whether ``buf`` asks an intracommunicator collective to work in place: ``IN_PLACE``,
    or None as mpi4py takes it there (its ``is_IN_PLACE``: ``Allreduce(None, buf)``)."""
    return buf is None or buf is IN_PLACE


# MPI-IO access modes, seek origins and the rest (MPICH's values).
MODE_RDONLY, MODE_RDWR, MODE_WRONLY, MODE_CREATE = 2, 8, 4, 1
MODE_EXCL, MODE_DELETE_ON_CLOSE, MODE_UNIQUE_OPEN = 64, 16, 32
MODE_SEQUENTIAL, MODE_APPEND = 256, 128
SEEK_SET, SEEK_CUR, SEEK_END = 600, 602, 604
DISPLACEMENT_CURRENT = -54278278
MAX_DATAREP_STRING = 128
