"""``MPI.Datatype``: the handle class, its thin methods, and the predefined handles.

A `Datatype` is a type map (`TypeMap`) plus how it was made (combiner, contents) and a numpy
dtype of one basic element (buffer-based calls view a message's bytes as an array of it;
reductions apply numpy ufuncs elementwise). Its methods are mpi4py's API and delegate: the
``Create_*`` constructors and the introspection to `constructors` (plain functions on type
maps), ``Pack``/``Unpack`` to `pack`, the codes to `typecodes`, buffers to
`buffer.view.byte_view`. The predefined handles (``predefined``) are made here, one per entry
of `named.NAMED`.

Over 500 lines because it is the whole of mpi4py's ``Datatype`` surface, about seventy
methods and properties; each is a line or two over the modules above.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from emucluster.mpi.buffer.view import byte_view
from emucluster.mpi.constants import KEYVAL_INVALID
from emucluster.mpi.datatype.constructors import (
    COMBINERS,
    NULL_TYPE,
    ORDER_C,
    Contents,
    Derived,
    contiguous,
    darray,
    decode_kwargs,
    envelope,
    f90_type,
    hindexed,
    hindexed_block,
    hvector,
    indexed,
    indexed_block,
    is_predefined_combiner,
    match_size,
    resized,
    struct,
    subarray,
    value_index,
    vector,
)
from emucluster.mpi.datatype.named import ALIASES, NAMED, NULL
from emucluster.mpi.datatype.pack import check_rep, pack, pack_size, unpack
from emucluster.mpi.datatype.typecodes import CodeSource, code_name, type_char, type_code, type_str
from emucluster.mpi.datatype.typemap import TypeMap, register_basic
from emucluster.mpi.errors import ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.handles import Handled
from emucluster.mpi.keyvals import Callback, Keyvals

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["TYPE_KEYVALS", "Datatype", "predefined"]

TYPE_KEYVALS = Keyvals("Datatype", first=64)
"""Datatype keyvals (``MPI_Type_create_keyval``): a space of their own, as MPI says."""


class Datatype(Handled):
    """An MPI datatype (mpi4py's ``MPI.Datatype``): a type map (`TypeMap`), plus how it was
    made (combiner, contents) for Get_envelope / Get_contents / decode."""

    __slots__ = ("_attrs", "_combiner", "_contents", "_dtype", "_map", "_name", "_null", "_object")

    def __init__(self, name: str | Datatype = "MPI_DATATYPE_NULL",
                 dtype: np.dtype[np.generic] | None = None) -> None:  # fmt: skip
        if isinstance(name, Datatype):  # copy constructor: the same type, a new handle
            self._copy_from(name)
            return
        if not isinstance(name, str) or (dtype is None and name != "MPI_DATATYPE_NULL"):
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

    def _old(self) -> TypeMap | None:
        """The type map constructors build on; None for DATATYPE_NULL or a freed type."""
        return None if self._null else self._map

    # -- mpi4py surface ---------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Datatype):
            return NotImplemented
        if self._null or other._null:
            return self._null and other._null
        return self._object is other._object

    __hash__ = None  # type: ignore[assignment]  # unhashable, as mpi4py's handles

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
        if self._null:
            raise MPIException(ERR_TYPE, NULL_TYPE)
        return self._map.ub - self._map.lb

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

    # -- type codes (`typecodes`) -----------------------------------------------------------------

    @property
    def typechar(self) -> str:
        """The struct type character (``'d'`` for DOUBLE, ``'V'`` for records)."""
        return type_char(self._code_source())

    @property
    def typestr(self) -> str:
        """The numpy type string (``'f8'`` for DOUBLE, ``'V<extent>'`` for records)."""
        return type_str(self._code_source(), self._map.extent)

    def tocode(self) -> str:
        """The character code or type string of a predefined type (ValueError if none)."""
        return type_code(self._code_source())

    @classmethod
    def fromcode(cls, code: str) -> Datatype:
        """The predefined type of a character code or type string (ValueError if none)."""
        return predefined[code_name(code)]

    def _code_source(self) -> CodeSource | None:
        """What the codes are read from: this type, or the base of its DUP chain; None for
        DATATYPE_NULL."""
        t = self
        while t._combiner == "DUP" and not t._null:
            t = t._contents[2][0]
        if t._null:
            return None
        return CodeSource(t._name, t._combiner, t._map.size)

    # -- constructors (`constructors`) ------------------------------------------------------------

    def Dup(self) -> Datatype:
        """A new type with the same type map (combiner DUP) and the attributes each keyval's
        copy callback gives it."""
        new = _new(self.name, self.typemap, "DUP", ([], [], [self]))
        if self._attrs:
            new._attrs = TYPE_KEYVALS.copied(self, self._attrs)
        return new

    Create_dup = Dup

    def Create_contiguous(self, count: int) -> Datatype:
        """``count`` consecutive elements."""
        return _made(contiguous(self._old(), count), [self])

    def Create_vector(self, count: int, blocklength: int, stride: int) -> Datatype:
        """``count`` blocks of ``blocklength`` elements, ``stride`` elements apart."""
        return _made(vector(self._old(), count, blocklength, stride), [self])

    def Create_hvector(self, count: int, blocklength: int, stride: int) -> Datatype:
        """``count`` blocks of ``blocklength`` elements, ``stride`` bytes apart."""
        return _made(hvector(self._old(), count, blocklength, stride), [self])

    def Create_indexed(self, blocklengths: Sequence[int], displacements: Sequence[int]) -> Datatype:
        """Blocks of ``blocklengths[i]`` elements at ``displacements[i]`` elements."""
        return _made(indexed(self._old(), blocklengths, displacements), [self])

    def Create_hindexed(self, blocklengths: Sequence[int],
                        displacements: Sequence[int]) -> Datatype:  # fmt: skip
        """Blocks of ``blocklengths[i]`` elements at ``displacements[i]`` bytes."""
        return _made(hindexed(self._old(), blocklengths, displacements), [self])

    def Create_indexed_block(self, blocklength: int, displacements: Sequence[int]) -> Datatype:
        """Blocks of ``blocklength`` elements at ``displacements[i]`` elements."""
        return _made(indexed_block(self._old(), blocklength, displacements), [self])

    def Create_hindexed_block(self, blocklength: int, displacements: Sequence[int]) -> Datatype:
        """Blocks of ``blocklength`` elements at ``displacements[i]`` bytes."""
        return _made(hindexed_block(self._old(), blocklength, displacements), [self])

    @classmethod
    def Create_struct(cls, blocklengths: Sequence[int], displacements: Sequence[int],
                      datatypes: Sequence[Datatype]) -> Datatype:  # fmt: skip
        """Blocks of ``blocklengths[i]`` elements of ``datatypes[i]`` at byte offsets."""
        types = list(datatypes)
        olds, aligns = [t._old() for t in types], [_alignment(t) for t in types]
        derived = struct(blocklengths, displacements, olds, aligns)
        return _made(derived, types)

    def Create_subarray(self, sizes: Sequence[int], subsizes: Sequence[int],
                        starts: Sequence[int], order: int = ORDER_C) -> Datatype:  # fmt: skip
        """The ``subsizes`` block at ``starts`` of an array of ``sizes`` (C or Fortran order);
        the extent is the whole array's."""
        return _made(subarray(self._old(), sizes, subsizes, starts, order), [self])

    def Create_darray(self, size: int, rank: int, gsizes: Sequence[int],
                      distribs: Sequence[int], dargs: Sequence[int], psizes: Sequence[int],
                      order: int = ORDER_C) -> Datatype:  # fmt: skip
        """Process ``rank``'s part of a distributed ``gsizes`` array (see mpi/darray.py); the
        extent is the whole array's."""
        derived = darray(self._old(), size, rank, gsizes, distribs, dargs, psizes, order)
        return _made(derived, [self])

    def Create_resized(self, lb: int, extent: int) -> Datatype:
        """Same data with lower bound ``lb`` and extent ``extent``."""
        return _made(resized(self.typemap, lb, extent), [self])

    Resized = Create_resized

    # -- Fortran 90 parameterized types, value-index pairs, size matching -------------------------

    @classmethod
    def Create_f90_integer(cls, r: int) -> Datatype:
        """The smallest integer type with ``r`` decimal digits (INTEGER1..8)."""
        return _f90("F90_INTEGER", r)

    @classmethod
    def Create_f90_real(cls, p: int, r: int) -> Datatype:
        """The smallest real type with precision ``p`` and exponent range ``r``."""
        return _f90("F90_REAL", p, r)

    @classmethod
    def Create_f90_complex(cls, p: int, r: int) -> Datatype:
        """The complex type of two Create_f90_real(p, r) parts."""
        return _f90("F90_COMPLEX", p, r)

    @classmethod
    def Get_value_index(cls, value: Datatype, index: Datatype) -> Datatype:
        """The predefined (value, index) pair type for MAXLOC/MINLOC, or DATATYPE_NULL."""
        if not value or not index:
            raise MPIException(ERR_TYPE, "Get_value_index: DATATYPE_NULL")
        return predefined[value_index(_predefined_key(value), _predefined_key(index))]

    @classmethod
    def Match_size(cls, typeclass: int, size: int) -> Datatype:
        """The predefined Fortran type of ``typeclass`` (TYPECLASS_*) and ``size`` bytes."""
        return predefined[match_size(typeclass, size)]

    # -- introspection ----------------------------------------------------------------------------

    def _how(self) -> tuple[str, Contents]:
        if self._null:
            raise MPIException(ERR_TYPE, NULL_TYPE)
        return self._combiner, self._contents

    def Get_envelope(self) -> tuple[int, int, int, int, int]:
        """(integers, addresses, large counts, datatypes, combiner) of Get_contents."""
        return envelope(*self._how())

    @property
    def envelope(self) -> tuple[int, int, int, int, int]:
        """Get_envelope()."""
        return self.Get_envelope()

    def Get_contents(self) -> tuple[list[int], list[int], list[int], list[Datatype]]:
        """(integers, addresses, large counts, datatypes) this type was made from."""
        combiner, (ints, addrs, types) = self._how()
        if combiner == "NAMED":
            raise MPIException(ERR_TYPE, "a predefined datatype has no contents")
        return list(ints), list(addrs), [], [_handle(t) for t in types]

    @property
    def contents(self) -> tuple[list[int], list[int], list[int], list[Datatype]]:
        """Get_contents()."""
        return self.Get_contents()

    @property
    def combiner(self) -> int:
        """The combiner (``MPI.COMBINER_*``)."""
        if self._null:
            raise MPIException(ERR_TYPE, NULL_TYPE)
        return COMBINERS[self._combiner]

    @property
    def is_named(self) -> bool:
        """Whether this is a named predefined type."""
        if self._null:
            raise MPIException(ERR_TYPE, NULL_TYPE)
        return self._combiner == "NAMED"

    @property
    def is_predefined(self) -> bool:
        """Whether this is a predefined type (named, or made by Create_f90_*)."""
        if self._null:
            raise MPIException(ERR_TYPE, NULL_TYPE)
        return is_predefined_combiner(self._combiner)

    def decode(self) -> tuple[Datatype, str, dict[str, Any]]:
        """(old type, combiner name, constructor keyword arguments), as mpi4py's decode."""
        combiner, (ints, addrs, types) = self._how()
        if combiner == "NAMED":
            return _handle(self), "NAMED", {}
        old = _handle(types[0]) if len(types) == 1 else predefined[NULL]  # mpi4py: one only
        handles = [_handle(t) for t in types] if combiner == "STRUCT" else []
        return old, combiner, decode_kwargs(combiner, ints, addrs, handles)

    # -- packing (`pack`) -------------------------------------------------------------------------

    def Pack_size(self, count: int, comm: object = None) -> int:
        """Bytes ``Pack`` needs for ``count`` elements."""
        return pack_size(self.typemap, count)

    def Pack(self, inbuf: object, outbuf: object, position: int, comm: object = None) -> int:
        """Pack all of ``inbuf`` (as elements of this type) into ``outbuf`` at ``position``;
        returns the new position."""
        return self._pack(inbuf, outbuf, position, external=False)

    def Unpack(self, inbuf: object, position: int, outbuf: object, comm: object = None) -> int:
        """Unpack ``outbuf``'s worth of elements from ``inbuf`` at ``position``; returns the
        new position."""
        return self._unpack(inbuf, position, outbuf, external=False)

    def Pack_external_size(self, datarep: str, count: int) -> int:
        """Bytes ``Pack_external`` needs for ``count`` elements."""
        check_rep(datarep)
        return self.Pack_size(count)

    def Pack_external(self, datarep: str, inbuf: object, outbuf: object, position: int) -> int:
        """Pack in the portable big-endian ``external32`` representation."""
        check_rep(datarep)
        return self._pack(inbuf, outbuf, position, external=True)

    def Unpack_external(self, datarep: str, inbuf: object, position: int, outbuf: object) -> int:
        """Unpack from the ``external32`` representation."""
        check_rep(datarep)
        return self._unpack(inbuf, position, outbuf, external=True)

    def _pack(self, inbuf: object, outbuf: object, position: int, *, external: bool) -> int:
        m = self.typemap
        src, dst = byte_view(inbuf, writable=False), byte_view(outbuf, writable=True)
        return pack(m, src, dst, position, external=external)

    def _unpack(self, inbuf: object, position: int, outbuf: object, *, external: bool) -> int:
        m = self.typemap
        src, dst = byte_view(inbuf, writable=False), byte_view(outbuf, writable=True)
        return unpack(m, src, position, dst, external=external)

    # -- commit, free -----------------------------------------------------------------------------

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
        if self._attrs:
            TYPE_KEYVALS.delete_all(self, self._attrs)
        self._null = True

    def free(self) -> None:
        """Free safely (mpi4py): the predefined constants and DATATYPE_NULL stay; another
        handle of a predefined type becomes null; a derived type is freed."""
        if self._null or _predefined_key(self) is not None:
            return
        if self.is_predefined:
            self._null = True
            return
        self.Free()

    # -- attributes (MPI_Type_{create,free}_keyval, MPI_Type_{get,set,delete}_attr) ---------------

    @classmethod
    def Create_keyval(cls, copy_fn: Callback = None, delete_fn: Callback = None,
                      nopython: bool = False) -> int:  # fmt: skip
        """A new datatype attribute key: ``copy_fn(type, keyval, value)`` decides what Dup
        copies (None: nothing), ``delete_fn(type, keyval, value)`` runs when a value goes."""
        return TYPE_KEYVALS.create(copy_fn, delete_fn)

    @classmethod
    def Free_keyval(cls, keyval: int) -> int:
        """Retire ``keyval``; returns KEYVAL_INVALID."""
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

    # -- pickling, truth, repr --------------------------------------------------------------------

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickle a predefined type by name (unpickles to the same object; a copy handle to
        a new handle) and a derived one by how it was made (decode, then the constructor)."""
        key = _pickle_key(self)
        if key is not None:
            if self is predefined[key]:
                return (_named, (key, True))
            return (type(self), (predefined[key],))
        old, combiner, kwargs = self.decode()
        return (_rebuild, (old, combiner, kwargs))

    def __bool__(self) -> bool:
        return not self._null

    def __repr__(self) -> str:
        return f"<emucluster.MPI.Datatype {self._name}>"

    # -- internals --------------------------------------------------------------------------------

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
            raise MPIException(ERR_TYPE, NULL_TYPE)


def _made(derived: Derived, types: list[Datatype]) -> Datatype:
    """The handle of a type a constructor made from ``types``."""
    return _new(derived.name, derived.typemap, derived.combiner,
                (derived.ints, derived.addrs, types))  # fmt: skip


def _new(name: str, typemap: TypeMap, combiner: str, contents: Contents) -> Datatype:
    """A new derived type's handle: ``typemap``, made by ``combiner`` from ``contents``."""
    new = Datatype.__new__(Datatype)
    new._name = name
    new._null = False
    kind = typemap.homogeneous()
    new._dtype = _BASIC_DTYPES[kind] if kind is not None else _BYTES
    new._map = typemap
    new._combiner = combiner
    new._attrs = {}
    new._object = object()
    ints, addrs, types = contents
    # the new type keeps its own handles of derived old types: freeing the program's
    # handle must not free what this type was made from (MPI_Type_free semantics)
    new._contents = (ints, addrs, [t if t._combiner == "NAMED" else _copy(t) for t in types])
    return new


def _copy(t: Datatype) -> Datatype:
    """A new handle of ``t``'s type (``Datatype(t)`` without the argument checks)."""
    new = Datatype.__new__(Datatype)
    new._copy_from(t)
    return new


def _handle(t: Datatype) -> Datatype:
    """Predefined types as they are; derived ones as a new handle (the caller may free it)."""
    if t._null:
        raise MPIException(ERR_TYPE, NULL_TYPE)
    return t if t._combiner == "NAMED" else _copy(t)


def _alignment(t: Datatype) -> int:
    """The alignment a C struct member of type ``t`` has (a struct's extent is rounded to the
    largest); a mixed type's is its parts' largest."""
    kind = t._map.homogeneous()
    if kind is None:
        return max((_alignment(x) for x in t._contents[2]), default=1)
    return min(t.dtype.alignment, 16) if t.dtype.names is None else t.dtype.alignment


def _f90(combiner: str, *args: int) -> Datatype:
    """A Create_f90_* type: the predefined type of that size, unnamed, as MPICH leaves it."""
    name, ints = f90_type(combiner, *args)
    base = predefined[name]
    new = _new(base.name, base.typemap, combiner, (ints, [], []))
    new._name = ""
    return new


def _predefined_key(t: Datatype) -> str | None:
    """The ``predefined`` key whose handle ``t`` is (this very object), else None."""
    found = predefined.get(t._name[4:]) if t._name.startswith("MPI_") else None
    return t._name[4:] if found is t else None


def _pickle_key(dt: Datatype) -> str | None:
    """The ``predefined`` key a handle of a predefined type (this or a copy) pickles by."""
    if dt._null and dt._name == "MPI_DATATYPE_NULL":
        return NULL
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


def _make_predefined() -> dict[str, Datatype]:
    table: dict[str, Datatype] = {}
    for key, dtype in NAMED.items():
        table[key] = table[ALIASES[key]] if key in ALIASES else Datatype(f"MPI_{key}", dtype)
    table[NULL] = Datatype()
    return table


predefined = _make_predefined()
"""Every predefined datatype by its ``MPI`` attribute name (aliases share one handle)."""
_BASIC_DTYPES: dict[int, np.dtype[np.generic]] = {
    int(t.typemap.kinds[0]): t.dtype for t in predefined.values() if t
}
"""Basic kind of the type maps -> the dtype of its predefined type."""
_BYTES = np.dtype(np.uint8)
"""The dtype of a mixed derived type's elements."""
