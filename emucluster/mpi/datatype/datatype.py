"""MPI datatypes: the predefined ones with their numpy dtypes, and contiguous derived types.

A `Datatype` here is a numpy dtype with an MPI name: its size is the dtype's item size, and
buffer-based calls view a message's bytes as an array of that dtype (reductions apply numpy
ufuncs elementwise). The pair types of MAXLOC/MINLOC (DOUBLE_INT, ...) are aligned numpy
record dtypes (value, index), as the C structs are laid out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from emucluster.mpi.comm.attributes import Callback, Keyvals
from emucluster.mpi.datatype.constructors import Contents, DatatypeConstructors
from emucluster.mpi.datatype.pack import DatatypePacking
from emucluster.mpi.datatype.typecodes import from_code, type_char, type_code, type_str
from emucluster.mpi.datatype.typemap import TypeMap, register_basic
from emucluster.mpi.errors import ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException

__all__ = [
    "TYPE_KEYVALS",
    "Datatype",
    "datatype_of_buffer",
    "predefined",
]

TYPE_KEYVALS = Keyvals("Datatype", first=64)
"""Datatype keyvals (``MPI_Type_create_keyval``): a space of their own, as MPI says."""


class Datatype(DatatypeConstructors, DatatypePacking):
    """An MPI datatype (mpi4py's ``MPI.Datatype``): a type map (`TypeMap`), plus how it was
    made (combiner, contents) for Get_envelope / Get_contents / decode."""

    __slots__ = ("_attrs", "_combiner", "_contents", "_dtype", "_map", "_name", "_null", "_object")

    def __init__(self, name: str | Datatype = "MPI_DATATYPE_NULL",
                 dtype: np.dtype[np.generic] | None = None) -> None:  # fmt: skip
        if isinstance(name, Datatype):  # copy constructor: the same type, a new handle
            self._copy_from(name)
            return
        if not isinstance(name, str):
            raise TypeError(f"expecting a Datatype, not {type(name).__name__}")
        self._name = name
        self._null = dtype is None
        self._dtype: np.dtype[np.generic] = dtype if dtype is not None else np.dtype(np.uint8)
        self._map = TypeMap.basic(register_basic(self._dtype.itemsize)) if dtype is not None \
            else TypeMap.basic(register_basic(0))  # fmt: skip
        self._combiner = "NAMED"
        self._contents: Contents = ([], [], [])
        self._attrs: dict[int, Any] = {}
        self._object = object()  # the MPI type this handle names: equal handles share it

    def _copy_from(self, other: Datatype) -> None:
        self._name, self._null, self._dtype = other._name, other._null, other._dtype
        self._map, self._combiner, self._contents = other._map, other._combiner, other._contents
        self._attrs = other._attrs  # a new handle of the same type: the same attributes
        self._object = other._object

    def _derive(self, name: str, typemap: TypeMap, combiner: str, contents: Contents) -> Datatype:
        new = Datatype.__new__(Datatype)
        new._name = name
        new._null = False
        kind = typemap.homogeneous()
        new._dtype = _BASIC_DTYPES[kind] if kind is not None else np.dtype(np.uint8)
        new._map = typemap
        new._combiner = combiner
        new._attrs = {}
        new._object = object()
        ints, addrs, types = contents
        # the new type keeps its own handles of derived old types: freeing the program's
        # handle must not free what this type was made from (MPI_Type_free semantics)
        new._contents = (ints, addrs, [t if t._combiner == "NAMED" else Datatype(t) for t in types])
        return new

    # -- mpi4py surface ------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Datatype):
            return NotImplemented
        if self._null or other._null:
            return self._null and other._null
        return self._object is other._object

    def __hash__(self) -> int:
        return id(self._object)

    def Get_size(self) -> int:
        """Bytes of data in one element."""
        self._check()
        return self._map.size

    @property
    def size(self) -> int:
        """Bytes of data in one element."""
        return self.Get_size()

    def Get_extent(self) -> tuple[int, int]:
        """(lower bound, extent) in bytes."""
        self._check()
        return self._map.lb, self._map.extent

    def Get_true_extent(self) -> tuple[int, int]:
        """(true lower bound, true extent): the bytes the data occupy."""
        self._check()
        return self._map.true_lb, self._map.true_ub - self._map.true_lb

    @property
    def extent(self) -> int:
        """Extent in bytes."""
        return self.Get_extent()[1]

    @property
    def lb(self) -> int:
        """Lower bound."""
        return self.Get_extent()[0]

    @property
    def ub(self) -> int:
        """Upper bound."""
        lb, extent = self.Get_extent()
        return lb + extent

    @property
    def true_extent(self) -> int:
        """True extent in bytes."""
        return self.Get_true_extent()[1]

    @property
    def true_lb(self) -> int:
        """True lower bound."""
        return self.Get_true_extent()[0]

    @property
    def true_ub(self) -> int:
        """True upper bound."""
        lb, extent = self.Get_true_extent()
        return lb + extent

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

    @name.setter
    def name(self, value: str) -> None:
        self.Set_name(value)

    @property
    def typechar(self) -> str:
        """The struct type character (``'d'`` for DOUBLE, ``'V'`` for records)."""
        return type_char(self)

    @property
    def typestr(self) -> str:
        """The numpy type string (``'f8'`` for DOUBLE, ``'V<extent>'`` for records)."""
        return type_str(self)

    def tocode(self) -> str:
        """The character code or type string of a predefined type (ValueError if none)."""
        return type_code(self)

    @classmethod
    def fromcode(cls, code: str) -> Datatype:
        """The predefined type of a character code or type string (ValueError if none)."""
        return from_code(code)

    def Commit(self) -> Datatype:
        """Commit the type (nothing to do); returns it."""
        self._check()
        return self

    def Free(self) -> None:
        """Free a derived type (predefined ones and DATATYPE_NULL cannot be freed); its
        attributes are deleted first (their delete callbacks run)."""
        if self._null:
            raise MPIException(ERR_TYPE, "DATATYPE_NULL cannot be freed")
        if self._combiner == "NAMED":
            raise MPIException(ERR_TYPE, "cannot free a predefined datatype")
        TYPE_KEYVALS.delete_all(self, self._attrs)
        self._null = True

    def Dup(self) -> Datatype:
        """A new type with the same type map (combiner DUP) and the attributes each keyval's
        copy callback gives it."""
        new = DatatypeConstructors.Dup(self)
        new._attrs = TYPE_KEYVALS.copied(self, self._attrs)
        return new

    Create_dup = Dup

    # -- attributes (MPI_Type_{create,free}_keyval, MPI_Type_{get,set,delete}_attr) ----------

    @classmethod
    def Create_keyval(cls, copy_fn: Callback = None, delete_fn: Callback = None,
                      nopython: bool = False) -> int:  # fmt: skip
        """A new datatype attribute key: ``copy_fn(type, keyval, value)`` decides what Dup
        copies (None: nothing), ``delete_fn(type, keyval, value)`` runs when a value goes."""
        return TYPE_KEYVALS.create(copy_fn, delete_fn)

    @classmethod
    def Free_keyval(cls, keyval: int) -> int:
        """Retire ``keyval``; returns KEYVAL_INVALID."""
        from emucluster.mpi.constants import KEYVAL_INVALID

        TYPE_KEYVALS.free(keyval)
        return KEYVAL_INVALID

    def Get_attr(self, keyval: int) -> Any:
        """The value under ``keyval``, None if none is attached (ERR_KEYVAL for an unknown
        keyval, ERR_TYPE for DATATYPE_NULL)."""
        self._check()
        return TYPE_KEYVALS.get(self._attrs, keyval)

    def Set_attr(self, keyval: int, attrval: Any) -> None:
        """Attach ``attrval`` under ``keyval`` (a previous value is deleted first)."""
        self._check()
        TYPE_KEYVALS.set(self, self._attrs, keyval, attrval)

    def Delete_attr(self, keyval: int) -> None:
        """Remove the value under ``keyval`` (its delete callback runs)."""
        self._check()
        TYPE_KEYVALS.delete(self, self._attrs, keyval)

    def free(self) -> None:
        """Free a derived type; predefined types and DATATYPE_NULL are left alone (mpi4py)."""
        if not self._null and not self.is_predefined:
            self.Free()

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickle a predefined type by name (unpickles to the same object; a copy handle to
        a new handle) and a derived one by how it was made (decode, then the constructor)."""
        key = _predefined_key(self)
        if key is not None:
            return (_named, (key, self is predefined[key]))
        old, combiner, kwargs = self.decode()
        return (_rebuild, (old, combiner, kwargs))

    def __bool__(self) -> bool:
        return not self._null

    def __repr__(self) -> str:
        return f"<emucluster.MPI.Datatype {self._name}>"

    # -- internals ------------------------------------------------------------------------------

    @property
    def dtype(self) -> np.dtype[np.generic]:
        """The numpy dtype of one basic element (uint8 for a mixed derived type)."""
        return self._dtype

    @property
    def element_dtype(self) -> np.dtype[np.generic]:
        """The dtype reductions work on (the basic type of a homogeneous type)."""
        return self._dtype

    @property
    def elements(self) -> int:
        """Basic elements per element of this type."""
        return self._map.elements

    @property
    def typemap(self) -> TypeMap:
        """The type map of one element."""
        self._check()
        return self._map

    def span(self, count: int) -> int:
        """Bytes from a buffer's start that ``count`` elements reach."""
        return self._map.span(count)

    @property
    def contiguous_size(self) -> int:
        """The element size of a live type whose elements lie back to back from byte 0 (a
        message of n of them is n * size bytes, sent as they are); 0 for any other type."""
        if self._null:
            return 0
        typemap = self._map
        return typemap.size if typemap.contiguous else 0

    def pack_from(self, view: memoryview, offset: int, count: int) -> bytes:
        """The data of ``count`` elements at byte ``offset`` of ``view``, packed."""
        return self._map.pack(view, offset, count)

    def unpack_into(self, view: memoryview, offset: int, data: bytes | memoryview) -> None:
        """Store packed ``data`` as elements at byte ``offset`` of ``view``."""
        self._map.unpack(view, offset, data)

    def _check(self) -> None:
        if self._null:
            raise MPIException(ERR_TYPE, "the datatype is DATATYPE_NULL or freed")


def _predefined_key(dt: Datatype) -> str | None:
    if dt._null and dt._name == "MPI_DATATYPE_NULL":
        return "DATATYPE_NULL"
    if dt._combiner != "NAMED" or not dt._name.startswith("MPI_"):
        return None
    key = dt._name[4:]
    found = predefined.get(key)
    return key if found is not None and found._map is dt._map else None


def _named(key: str, same: bool) -> Datatype:
    """Unpickle a predefined type: the object itself, or a new handle of it."""
    found = predefined[key]
    return found if same else Datatype(found)


def _rebuild(old: Datatype, combiner: str, kwargs: dict[str, object]) -> Datatype:
    """Unpickle a derived type by calling its constructor again."""
    if combiner == "DUP":
        return old.Dup()
    return getattr(old, f"Create_{combiner.lower()}")(**kwargs)  # type: ignore[no-any-return]


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
    ("LOGICAL1", "?"),
    ("LOGICAL2", "i2"),
    ("LOGICAL4", "i4"),
    ("LOGICAL8", "i8"),
    ("INTEGER1", "i1"),
    ("INTEGER2", "i2"),
    ("INTEGER4", "i4"),
    ("INTEGER8", "i8"),
    ("REAL2", "f2"),
    ("REAL4", "f4"),
    ("REAL8", "f8"),
    ("REAL16", "g"),
    ("COMPLEX8", "c8"),
    ("COMPLEX16", "c16"),
    ("COMPLEX32", "G"),
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
predefined["INT_INT"] = predefined["TWOINT"]  # one type, two names (MPI_2INT)
predefined["DATATYPE_NULL"] = Datatype()
_BASIC_DTYPES: dict[int, np.dtype[np.generic]] = {
    int(t.typemap.kinds[0]): t.dtype for t in predefined.values() if t
}

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
