"""Derived-datatype constructors: plain functions from old type maps to a new type's map.

Each constructor checks its arguments, then builds the new type's `TypeMap` from the old
one's (numpy, no per-element Python loop) and says how it was made: a `Derived` record with
the combiner and the integers and addresses MPI_Type_get_contents returns. ``Datatype``'s
``Create_*`` methods pass their old type maps (None for DATATYPE_NULL or a freed type, refused
with ERR_TYPE once the other arguments passed their checks, as before) and add the datatypes
of the contents. `envelope` and `decode_kwargs` read a combiner and contents back
(``Get_envelope``, ``decode``); `f90_type`, `value_index` and `match_size` pick predefined
types by name (`named`). Combiner values are MPICH's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

import numpy as np

from emucluster.mpi.datatype.darray import owned_indices
from emucluster.mpi.datatype.named import is_named
from emucluster.mpi.datatype.typemap import TypeMap
from emucluster.mpi.errors import ERR_ARG, ERR_COUNT, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "COMBINERS", "NULL_TYPE", "ORDER_C", "ORDER_F", "ORDER_FORTRAN", "TYPECLASSES",
    "TYPECLASS_COMPLEX", "TYPECLASS_INTEGER", "TYPECLASS_REAL",
    "ArgumentError", "Contents", "Derived",
    "contiguous", "darray", "decode_kwargs", "envelope", "f90_type", "hindexed",
    "hindexed_block", "hvector", "indexed", "indexed_block", "is_predefined_combiner",
    "live", "match_size", "resized", "struct", "subarray", "value_index",
    "vector",
]  # fmt: skip

T = TypeVar("T")

Contents = tuple[list[int], list[int], list[Any]]
"""(integers, addresses, datatypes) of MPI_Type_get_contents."""

COMBINERS = {
    "NAMED": 1, "DUP": 2, "CONTIGUOUS": 3, "VECTOR": 4, "HVECTOR": 6, "INDEXED": 7,
    "HINDEXED": 9, "INDEXED_BLOCK": 10, "STRUCT": 12, "SUBARRAY": 13, "DARRAY": 14,
    "F90_REAL": 15, "F90_COMPLEX": 16, "F90_INTEGER": 17, "RESIZED": 18, "HINDEXED_BLOCK": 19,
}  # fmt: skip
TYPECLASSES = {1: "REAL", 2: "INTEGER", 3: "COMPLEX"}
"""MPI_TYPECLASS_* values (MPICH's) -> the Fortran type family Match_size returns."""
TYPECLASS_REAL, TYPECLASS_INTEGER, TYPECLASS_COMPLEX = 1, 2, 3
ORDER_C = 56
ORDER_FORTRAN = ORDER_F = 57
NULL_TYPE = "the datatype is DATATYPE_NULL or freed"
"""The ERR_TYPE message of a call on DATATYPE_NULL or a freed type."""
_PREDEFINED_COMBINERS = frozenset({"NAMED", "F90_INTEGER", "F90_REAL", "F90_COMPLEX"})
_VALUE_INDEX = {
    "SHORT": "SHORT_INT", "INT": "TWOINT", "LONG": "LONG_INT", "FLOAT": "FLOAT_INT",
    "DOUBLE": "DOUBLE_INT", "LONG_DOUBLE": "LONG_DOUBLE_INT",
}  # fmt: skip
"""Value type -> the MAXLOC/MINLOC pair type with an INT index (MPI_Type_get_value_index)."""


class ArgumentError(MPIException, ValueError):
    """Constructor arguments that do not fit together (mpi4py raises ValueError)."""


class Derived(NamedTuple):
    """A new type as a constructor makes it; the caller adds the datatypes of its contents."""

    name: str
    """Its name (the constructor's, lower case)."""
    typemap: TypeMap
    """The type map of one element."""
    combiner: str
    """``COMBINERS`` key."""
    ints: list[int]
    """The integers of MPI_Type_get_contents."""
    addrs: list[int]
    """The addresses of MPI_Type_get_contents."""


def live(old: TypeMap | None) -> TypeMap:
    """``old``; ERR_TYPE when it is None (DATATYPE_NULL or a freed type)."""
    if old is None:
        raise MPIException(ERR_TYPE, NULL_TYPE)
    return old


# -- constructors ----------------------------------------------------------------------------


def contiguous(old: TypeMap | None, count: int) -> Derived:
    """``count`` consecutive elements (any count: MPI 4.0's large counts decode as
    ``CONTIGUOUS`` with the whole count, as MPICH 4 and later do)."""
    _counts(count)
    m = live(old)
    return Derived(f"contiguous({count})", m.blocks([count], [0]), "CONTIGUOUS", [count], [])


def vector(old: TypeMap | None, count: int, blocklength: int, stride: int) -> Derived:
    """``count`` blocks of ``blocklength`` elements, ``stride`` elements apart."""
    _counts(count, blocklength)
    m = live(old)
    return _strided(
        m, count, blocklength, stride * m.extent, "VECTOR", [count, blocklength, stride], []
    )


def hvector(old: TypeMap | None, count: int, blocklength: int, stride: int) -> Derived:
    """``count`` blocks of ``blocklength`` elements, ``stride`` bytes apart."""
    _counts(count, blocklength)
    return _strided(
        live(old), count, blocklength, stride, "HVECTOR", [count, blocklength], [stride]
    )


def _strided(m: TypeMap, count: int, blocklength: int, stride: int, combiner: str,
             ints: list[int], addrs: list[int]) -> Derived:  # fmt: skip
    made = m.strided(count, blocklength, stride)
    return Derived(combiner.lower(), made, combiner, ints, addrs)


def indexed(old: TypeMap | None, blocklengths: Sequence[int],
            displacements: Sequence[int]) -> Derived:  # fmt: skip
    """Blocks of ``blocklengths[i]`` elements at ``displacements[i]`` elements."""
    bl, disp = _pairs(blocklengths, displacements)
    m = live(old)
    made = m.blocks(bl, [d * m.extent for d in disp])
    return Derived("indexed", made, "INDEXED", [len(bl), *bl, *disp], [])


def hindexed(old: TypeMap | None, blocklengths: Sequence[int],
             displacements: Sequence[int]) -> Derived:  # fmt: skip
    """Blocks of ``blocklengths[i]`` elements at ``displacements[i]`` bytes."""
    bl, disp = _pairs(blocklengths, displacements)
    made = live(old).blocks(bl, disp)
    return Derived("hindexed", made, "HINDEXED", [len(bl), *bl], disp)


def indexed_block(old: TypeMap | None, blocklength: int, displacements: Sequence[int]) -> Derived:
    """Blocks of ``blocklength`` elements at ``displacements[i]`` elements."""
    disp = [int(d) for d in displacements]
    _counts(blocklength)
    m = live(old)
    made = m.blocks([blocklength] * len(disp), [d * m.extent for d in disp])
    return Derived("indexed_block", made, "INDEXED_BLOCK", [len(disp), blocklength, *disp], [])


def hindexed_block(old: TypeMap | None, blocklength: int, displacements: Sequence[int]) -> Derived:
    """Blocks of ``blocklength`` elements at ``displacements[i]`` bytes."""
    disp = [int(d) for d in displacements]
    _counts(blocklength)
    made = live(old).blocks([blocklength] * len(disp), disp)
    return Derived("hindexed_block", made, "HINDEXED_BLOCK", [len(disp), blocklength], disp)


def struct(blocklengths: Sequence[int], displacements: Sequence[int],
           olds: Sequence[TypeMap | None], alignments: Sequence[int]) -> Derived:  # fmt: skip
    """Blocks of ``blocklengths[i]`` elements of ``olds[i]`` at byte offsets; the extent is
    rounded up to the largest of the old types' ``alignments``, as a C struct's is."""
    bl, disp = _pairs(blocklengths, displacements)
    if len(olds) != len(bl):
        raise ArgumentError(ERR_ARG, "Create_struct: as many datatypes as blocks needed")
    maps = [live(m) for m in olds]
    made = TypeMap.members(bl, disp, maps, max(alignments, default=1))
    return Derived("struct", made, "STRUCT", [len(bl), *bl], disp)


def subarray(old: TypeMap | None, sizes: Sequence[int], subsizes: Sequence[int],
             starts: Sequence[int], order: int) -> Derived:  # fmt: skip
    """The ``subsizes`` block at ``starts`` of an array of ``sizes`` (C or Fortran order); the
    extent is the whole array's."""
    full, sub, first = list(sizes), list(subsizes), list(starts)
    if not len(full) == len(sub) == len(first) or any(
        s < 0 or b < 0 or f < 0 or f + b > s for s, b, f in zip(full, sub, first, strict=True)
    ):
        raise MPIException(ERR_ARG, f"Create_subarray: bad shape {full}, {sub}, {first}")
    if order not in (ORDER_C, ORDER_F):
        raise MPIException(ERR_ARG, f"Create_subarray: bad order {order}")
    chosen = [range(f, f + b) for f, b in zip(first, sub, strict=True)]
    made = _selection(live(old), full, chosen, order)
    return Derived("subarray", made, "SUBARRAY", [len(full), *full, *sub, *first, order], [])


def darray(old: TypeMap | None, size: int, rank: int, gsizes: Sequence[int],
           distribs: Sequence[int], dargs: Sequence[int], psizes: Sequence[int],
           order: int) -> Derived:  # fmt: skip
    """Process ``rank``'s part of a distributed ``gsizes`` array (see `darray.owned_indices`);
    the extent is the whole array's."""
    g, dist, darg, p = (list(map(int, x)) for x in (gsizes, distribs, dargs, psizes))
    if order not in (ORDER_C, ORDER_F):
        raise ArgumentError(ERR_ARG, f"Create_darray: bad order {order}")
    try:
        owned = owned_indices(int(size), int(rank), g, dist, darg, p)
    except ValueError as exc:
        raise ArgumentError(ERR_ARG, f"Create_darray: {exc}") from None
    made = _selection(live(old), g, owned, order)
    ints = [int(size), int(rank), len(g), *g, *dist, *darg, *p, order]
    return Derived("darray", made, "DARRAY", ints, [])


def _selection(m: TypeMap, full: list[int], chosen: Sequence[Sequence[int] | np.ndarray],
               order: int) -> TypeMap:  # fmt: skip
    """The elements at the cartesian product of ``chosen`` indices of a ``full`` array, in
    memory order, with the whole array's extent. The bounds come from the least and greatest
    index of each dimension (the flat index grows with each); the flat indices themselves are
    made when the runs are read."""
    flat_order: Literal["C", "F"] = "C" if order == ORDER_C else "F"
    dims = range(len(full)) if flat_order == "F" else range(len(full) - 1, -1, -1)
    n, lo, hi, step = 1, 0, 0, 1
    for d in dims:  # fastest-varying dimension first
        n *= len(chosen[d])
        if len(chosen[d]):
            lo, hi = lo + int(min(chosen[d])) * step, hi + int(max(chosen[d])) * step
        step *= full[d]
    a, b = lo * m.extent, hi * m.extent

    def offsets() -> TypeMap:
        if full:
            grids = np.meshgrid(*(np.asarray(c, np.int64) for c in chosen), indexing="ij")
            index = np.ravel_multi_index(tuple(x.ravel(order=flat_order) for x in grids),
                                         tuple(full), order=flat_order)  # fmt: skip
        else:
            index = np.zeros(1, np.int64)
        return m._replicate_now(np.asarray(index, np.int64) * m.extent)

    total = int(np.prod(full, dtype=np.int64)) * m.extent if full else m.extent
    return m._copies(n, min(a, b), max(a, b), offsets).resized(m.lb, total)


def resized(old: TypeMap, lb: int, extent: int) -> Derived:
    """Same data with lower bound ``lb`` and extent ``extent``."""
    made = old.resized(int(lb), int(extent))
    return Derived("resized", made, "RESIZED", [], [int(lb), int(extent)])


# -- Fortran 90 parameterized types, value-index pairs, size matching -------------------------


def f90_type(combiner: str, *args: int) -> tuple[str, list[int]]:
    """(predefined name, contents integers) of ``Create_f90_integer(r)`` (combiner
    F90_INTEGER), ``Create_f90_real(p, r)`` (F90_REAL) or ``Create_f90_complex(p, r)``
    (F90_COMPLEX): the smallest type of that precision and range; ERR_ARG when none is."""
    ints = [int(a) for a in args]
    if combiner == "F90_INTEGER":
        (r,) = args
        digits = ((1, 2), (2, 4), (4, 9), (8, 18))
        prefix, size = "INTEGER", next((n for n, d in digits if r <= d), 0)
    else:
        p, r = args
        size = _real_size(p, r)
        prefix = "REAL" if combiner == "F90_REAL" else "COMPLEX"
        if combiner == "F90_COMPLEX":
            size = 2 * size if size else 0
    name = f"{prefix}{size}"
    if not is_named(name):
        raise MPIException(ERR_ARG, f"no {prefix} type for {ints}")
    return name, ints


def _real_size(p: int, r: int) -> int:
    return next((n for n, (pp, rr) in ((4, (6, 37)), (8, (15, 307)), (16, (33, 4931)))
                 if p <= pp and r <= rr), 0)  # fmt: skip


def value_index(value: str | None, index: str | None) -> str:
    """The predefined (value, index) pair type for MAXLOC/MINLOC of the predefined types named
    ``value`` and ``index`` (None: not a predefined handle), or DATATYPE_NULL."""
    if index != "INT" or value is None:
        return "DATATYPE_NULL"
    return _VALUE_INDEX.get(value, "DATATYPE_NULL")


def match_size(typeclass: int, size: int) -> str:
    """The predefined Fortran type of ``typeclass`` (TYPECLASS_*) and ``size`` bytes, by name;
    ERR_ARG when there is none."""
    prefix = TYPECLASSES.get(typeclass)
    name = f"{prefix}{size}"
    if prefix is None or not is_named(name):
        raise MPIException(ERR_ARG, f"Match_size: no type of class {typeclass}, size {size}")
    return name


# -- introspection ---------------------------------------------------------------------------


def envelope(combiner: str, contents: Contents) -> tuple[int, int, int, int, int]:
    """(integers, addresses, large counts, datatypes, combiner) of MPI_Type_get_envelope."""
    ints, addrs, types = contents
    return len(ints), len(addrs), 0, len(types), COMBINERS[combiner]


def is_predefined_combiner(combiner: str) -> bool:
    """Whether a type made by ``combiner`` is predefined (named, or made by Create_f90_*)."""
    return combiner in _PREDEFINED_COMBINERS


def decode_kwargs(combiner: str, ints: list[int], addrs: list[int],
                  types: list[T]) -> dict[str, Any]:  # fmt: skip
    """The constructor keyword arguments that make a type of ``combiner`` with these contents
    (mpi4py's ``decode``); ``types`` are the handles a STRUCT's ``datatypes`` get."""
    if combiner == "CONTIGUOUS":
        return {"count": ints[0]}
    if combiner == "VECTOR":
        return {"count": ints[0], "blocklength": ints[1], "stride": ints[2]}
    if combiner == "HVECTOR":
        return {"count": ints[0], "blocklength": ints[1], "stride": addrs[0]}
    if combiner == "INDEXED":
        n = ints[0]
        return {"blocklengths": ints[1 : 1 + n], "displacements": ints[1 + n :]}
    if combiner == "HINDEXED":
        return {"blocklengths": ints[1:], "displacements": addrs}
    if combiner == "INDEXED_BLOCK":
        return {"blocklength": ints[1], "displacements": ints[2:]}
    if combiner == "HINDEXED_BLOCK":
        return {"blocklength": ints[1], "displacements": addrs}
    if combiner == "STRUCT":
        return {"blocklengths": ints[1:], "displacements": addrs, "datatypes": types}
    if combiner == "SUBARRAY":
        n = ints[0]
        return {"sizes": ints[1 : 1 + n], "subsizes": ints[1 + n : 1 + 2 * n],
                "starts": ints[1 + 2 * n : 1 + 3 * n], "order": ints[-1]}  # fmt: skip
    if combiner == "DARRAY":
        n = ints[2]
        return {"size": ints[0], "rank": ints[1], "gsizes": ints[3 : 3 + n],
                "distribs": ints[3 + n : 3 + 2 * n], "dargs": ints[3 + 2 * n : 3 + 3 * n],
                "psizes": ints[3 + 3 * n : 3 + 4 * n], "order": ints[3 + 4 * n]}  # fmt: skip
    if combiner == "RESIZED":
        return {"lb": addrs[0], "extent": addrs[1]}
    if combiner == "F90_INTEGER":
        return {"r": ints[0]}
    if combiner in ("F90_REAL", "F90_COMPLEX"):
        return {"p": ints[0], "r": ints[1]}
    return {}


def _counts(*values: int) -> None:
    if any(int(v) < 0 for v in values):
        raise MPIException(ERR_COUNT, f"negative count in {values}")


def _pairs(blocklengths: Sequence[int],
           displacements: Sequence[int]) -> tuple[list[int], list[int]]:  # fmt: skip
    bl = [int(b) for b in blocklengths]
    disp = [int(d) for d in displacements]
    if len(bl) != len(disp):
        raise ArgumentError(ERR_ARG, "as many blocklengths as displacements needed")
    if bl and min(bl) < 0:  # ERR_COUNT
        _counts(*bl)
    return bl, disp
