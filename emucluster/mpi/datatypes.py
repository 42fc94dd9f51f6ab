"""MPI datatypes: the predefined ones with their numpy dtypes, and contiguous derived types.

A `Datatype` here is a numpy dtype with an MPI name: its size is the dtype's item size, and
buffer-based calls view a message's bytes as an array of that dtype (reductions apply numpy
ufuncs elementwise). The pair types of MAXLOC/MINLOC (DOUBLE_INT, ...) are aligned numpy
record dtypes (value, index), as the C structs are laid out.
"""

from __future__ import annotations

import numpy as np

from emucluster.mpi.errors import ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException

__all__ = [
    "Datatype",
    "datatype_of_buffer",
    "predefined",
]


class Datatype:
    """An MPI datatype (mpi4py's ``MPI.Datatype``)."""

    __slots__ = ("_base", "_count", "_dtype", "_name", "_null")

    def __init__(self, name: str = "MPI_DATATYPE_NULL", dtype: np.dtype[np.generic] | None = None,
                 *, base: Datatype | None = None, count: int = 1) -> None:  # fmt: skip
        self._name = name
        self._null = dtype is None
        self._dtype: np.dtype[np.generic] = dtype if dtype is not None else np.dtype(np.uint8)
        self._base = base
        self._count = count

    # -- mpi4py surface ------------------------------------------------------------------------

    def Get_size(self) -> int:
        """Bytes of data in one element."""
        self._check()
        return self._dtype.itemsize

    @property
    def size(self) -> int:
        """Bytes of data in one element."""
        return self.Get_size()

    def Get_extent(self) -> tuple[int, int]:
        """(lower bound, extent) in bytes."""
        self._check()
        return 0, self._dtype.itemsize

    @property
    def extent(self) -> int:
        """Extent in bytes."""
        return self.Get_extent()[1]

    @property
    def lb(self) -> int:
        """Lower bound (always 0 here)."""
        return 0

    @property
    def ub(self) -> int:
        """Upper bound (the extent here)."""
        return self.extent

    def Get_name(self) -> str:
        """The type's name, e.g. ``MPI_DOUBLE``."""
        return self._name

    def Set_name(self, name: str) -> None:
        """Rename the type."""
        self._name = name

    @property
    def name(self) -> str:
        """The type's name."""
        return self._name

    @property
    def typechar(self) -> str:
        """The numpy/struct type character (``'d'`` for DOUBLE, ``'V'`` for records)."""
        return self._dtype.char

    def Create_contiguous(self, count: int) -> Datatype:
        """A new type of ``count`` consecutive elements of this one."""
        self._check()
        if count < 0:
            raise MPIException(ERR_TYPE, f"negative count {count}")
        base = self._base or self
        return Datatype(
            f"contiguous({count}, {self._name})",
            np.dtype((self._dtype, (count,))) if count != 1 else self._dtype,
            base=base,
            count=self._count * count,
        )

    def Commit(self) -> Datatype:
        """Commit the type (nothing to do); returns it."""
        self._check()
        return self

    def Dup(self) -> Datatype:
        """A copy of the type."""
        self._check()
        return Datatype(self._name, self._dtype, base=self._base, count=self._count)

    def Free(self) -> None:
        """Free a derived type (predefined ones cannot be freed)."""
        if self in _PREDEFINED_SET:
            raise MPIException(ERR_TYPE, "cannot free a predefined datatype")
        self._null = True

    def __bool__(self) -> bool:
        return not self._null

    def __repr__(self) -> str:
        return f"<emucluster.MPI.Datatype {self._name}>"

    # -- internals ------------------------------------------------------------------------------

    @property
    def dtype(self) -> np.dtype[np.generic]:
        """The numpy dtype of one element."""
        return self._dtype

    @property
    def element_dtype(self) -> np.dtype[np.generic]:
        """The dtype reductions work on (the base type of a contiguous type)."""
        return self._base._dtype if self._base is not None else self._dtype

    @property
    def elements(self) -> int:
        """Base elements per element of this type (1 for predefined types)."""
        return self._count

    def span(self, count: int) -> int:
        """Bytes from a buffer's start that ``count`` elements reach."""
        return count * self.extent

    def pack_from(self, view: memoryview, offset: int, count: int) -> bytes:
        """The data of ``count`` elements at byte ``offset`` of ``view``, packed."""
        return bytes(view[offset : offset + count * self.extent])

    def unpack_into(self, view: memoryview, offset: int, data: bytes | memoryview) -> None:
        """Store packed ``data`` as elements at byte ``offset`` of ``view``."""
        view[offset : offset + len(data)] = data

    def _check(self) -> None:
        if self._null:
            raise MPIException(ERR_TYPE, "the datatype is DATATYPE_NULL or freed")


def _pair(value: str) -> np.dtype[np.generic]:
    return np.dtype([("value", value), ("index", "i4")], align=True)


_TABLE: list[tuple[str, str | np.dtype[np.generic]]] = [
    ("BYTE", "u1"),
    ("PACKED", "u1"),
    ("CHAR", "S1"),
    ("WCHAR", "U1"),
    ("SIGNED_CHAR", "i1"),
    ("UNSIGNED_CHAR", "u1"),
    ("SHORT", "h"),
    ("UNSIGNED_SHORT", "H"),
    ("INT", "i"),
    ("UNSIGNED", "I"),
    ("UNSIGNED_INT", "I"),
    ("LONG", "l"),
    ("UNSIGNED_LONG", "L"),
    ("LONG_LONG", "q"),
    ("LONG_LONG_INT", "q"),
    ("UNSIGNED_LONG_LONG", "Q"),
    ("FLOAT", "f"),
    ("DOUBLE", "d"),
    ("LONG_DOUBLE", "g"),
    ("C_BOOL", "?"),
    ("BOOL", "?"),
    ("CXX_BOOL", "?"),
    ("INT8_T", "i1"),
    ("INT16_T", "i2"),
    ("INT32_T", "i4"),
    ("INT64_T", "i8"),
    ("UINT8_T", "u1"),
    ("UINT16_T", "u2"),
    ("UINT32_T", "u4"),
    ("UINT64_T", "u8"),
    ("AINT", "i8"),
    ("OFFSET", "i8"),
    ("COUNT", "i8"),
    ("C_COMPLEX", "F"),
    ("C_FLOAT_COMPLEX", "F"),
    ("C_DOUBLE_COMPLEX", "D"),
    ("C_LONG_DOUBLE_COMPLEX", "G"),
    ("CXX_FLOAT_COMPLEX", "F"),
    ("CXX_DOUBLE_COMPLEX", "D"),
    ("COMPLEX", "F"),
    ("DOUBLE_COMPLEX", "D"),
    ("CHARACTER", "S1"),
    ("LOGICAL", "i4"),
    ("INTEGER", "i4"),
    ("REAL", "f4"),
    ("DOUBLE_PRECISION", "f8"),
    ("SHORT_INT", _pair("h")),
    ("TWOINT", _pair("i")),
    ("INT_INT", _pair("i")),
    ("LONG_INT", _pair("l")),
    ("FLOAT_INT", _pair("f")),
    ("DOUBLE_INT", _pair("d")),
    ("LONG_DOUBLE_INT", _pair("g")),
]

predefined: dict[str, Datatype] = {
    name: Datatype(f"MPI_{name}", np.dtype(spec)) for name, spec in _TABLE
}
"""Every predefined datatype by its ``MPI`` attribute name."""
predefined["DATATYPE_NULL"] = Datatype()
_PREDEFINED_SET = frozenset(predefined.values())

# struct/memoryview format character -> the type a plain buffer of it carries
_BY_FORMAT: dict[str, Datatype] = {
    "B": predefined["BYTE"],
    "b": predefined["SIGNED_CHAR"],
    "c": predefined["CHAR"],
    "1s": predefined["CHAR"],
    "?": predefined["C_BOOL"],
    "h": predefined["SHORT"],
    "H": predefined["UNSIGNED_SHORT"],
    "i": predefined["INT"],
    "I": predefined["UNSIGNED"],
    "l": predefined["LONG"],
    "L": predefined["UNSIGNED_LONG"],
    "q": predefined["LONG_LONG"],
    "Q": predefined["UNSIGNED_LONG_LONG"],
    "n": predefined["LONG"],
    "N": predefined["UNSIGNED_LONG"],
    "f": predefined["FLOAT"],
    "d": predefined["DOUBLE"],
    "g": predefined["LONG_DOUBLE"],
    "Zf": predefined["C_FLOAT_COMPLEX"],
    "Zd": predefined["C_DOUBLE_COMPLEX"],
    "Zg": predefined["C_LONG_DOUBLE_COMPLEX"],
}
_PAIRS = [predefined[n] for n in ("SHORT_INT", "TWOINT", "LONG_INT", "FLOAT_INT", "DOUBLE_INT",
                                  "LONG_DOUBLE_INT")]  # fmt: skip


def datatype_of_buffer(obj: object, view: memoryview) -> Datatype:
    """The datatype a buffer carries when the program names none (mpi4py infers it too)."""
    fmt = view.format
    if fmt and fmt[0] in "@=<":
        fmt = fmt[1:]
    found = _BY_FORMAT.get(fmt)
    if found is not None:
        return found
    dtype = getattr(obj, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.names is not None:
        for pair in _PAIRS:
            if _same_layout(dtype, pair.dtype):
                return pair
    raise MPIException(ERR_TYPE, f"no MPI datatype for buffer format {view.format!r}")


def _same_layout(a: np.dtype[np.generic], b: np.dtype[np.generic]) -> bool:
    if a.itemsize != b.itemsize or a.names is None or b.names is None:
        return False
    if len(a.names) != len(b.names) or a.fields is None or b.fields is None:
        return False
    fields_a = [a.fields[n][:2] for n in a.names]
    fields_b = [b.fields[n][:2] for n in b.names]
    return all(fa[0] == fb[0] and fa[1] == fb[1] for fa, fb in zip(fields_a, fields_b, strict=True))
