"""Derived-datatype constructors and introspection (mixed into ``Datatype``).

Each constructor builds the new type's `TypeMap` from the old one's (numpy, no per-element
Python loop) and records how it was made: the combiner and the contents MPI_Type_get_contents
returns (integers, addresses, datatypes), which ``Get_envelope``, ``Get_contents`` and
``decode`` give back. Combiner values are MPICH's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from emucluster.mpi.datatype.darray import owned_indices
from emucluster.mpi.datatype.typemap import TypeMap
from emucluster.mpi.errors import ERR_ARG, ERR_COUNT, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emucluster.mpi.datatype.datatype import Datatype

__all__ = [
    "COMBINERS", "ORDER_C", "ORDER_F", "ORDER_FORTRAN", "TYPECLASSES", "TYPECLASS_COMPLEX",
    "TYPECLASS_INTEGER", "TYPECLASS_REAL", "Contents", "DatatypeConstructors",
]  # fmt: skip

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
INT_MAX = 2**31 - 1
"""The largest count of the MPI 3.1 interface (C int)."""
ORDER_C = 56
ORDER_FORTRAN = ORDER_F = 57


class ArgumentError(MPIException, ValueError):
    """Constructor arguments that do not fit together (mpi4py raises ValueError)."""


class DatatypeConstructors:
    """Constructors and introspection of ``Datatype`` (see the module docstring)."""

    __slots__ = ()

    # provided by Datatype
    def _check(self) -> None:
        raise NotImplementedError

    def _derive(self, name: str, typemap: TypeMap, combiner: str,
                contents: Contents) -> Datatype:  # fmt: skip
        raise NotImplementedError

    @property
    def typemap(self) -> TypeMap:
        raise NotImplementedError

    @property
    def name(self) -> str:
        raise NotImplementedError

    # -- constructors --------------------------------------------------------------------------

    def Dup(self) -> Datatype:
        """A new type with the same type map (combiner DUP)."""
        return self._derive(self.name, self.typemap, "DUP", ([], [], [self]))

    Create_dup = Dup

    def Create_contiguous(self, count: int) -> Datatype:
        """``count`` consecutive elements."""
        _counts(count)
        m = self.typemap
        contents: Contents = ([count], [], [self])
        combiner = "CONTIGUOUS"
        if count > INT_MAX:  # MPI 3.1 has no large counts: described as MPICH 3 does
            q, r = divmod(count, INT_MAX)
            parts = [self.Create_vector(q, INT_MAX, INT_MAX), self.Create_contiguous(r)]
            combiner, contents = "STRUCT", ([2, 1, 1], [0, q * INT_MAX * m.extent], parts)
        return self._derive(f"contiguous({count})", m.blocks([count], [0]), combiner, contents)

    def Create_vector(self, count: int, blocklength: int, stride: int) -> Datatype:
        """``count`` blocks of ``blocklength`` elements, ``stride`` elements apart."""
        _counts(count, blocklength)
        extent = self.typemap.extent
        return self._strided(count, blocklength, stride * extent, "VECTOR",
                             ([count, blocklength, stride], [], [self]))  # fmt: skip

    def Create_hvector(self, count: int, blocklength: int, stride: int) -> Datatype:
        """``count`` blocks of ``blocklength`` elements, ``stride`` bytes apart."""
        _counts(count, blocklength)
        return self._strided(count, blocklength, stride, "HVECTOR",
                             ([count, blocklength], [stride], [self]))  # fmt: skip

    def _strided(self, count: int, blocklength: int, stride: int, combiner: str,
                 contents: Contents) -> Datatype:  # fmt: skip
        starts = np.arange(count, dtype=np.int64) * stride
        m = self.typemap.blocks([blocklength] * count, starts.tolist())
        return self._derive(combiner.lower(), m, combiner, contents)

    def Create_indexed(self, blocklengths: Sequence[int], displacements: Sequence[int]) -> Datatype:
        """Blocks of ``blocklengths[i]`` elements at ``displacements[i]`` elements."""
        bl, disp = _pairs(blocklengths, displacements)
        extent = self.typemap.extent
        m = self.typemap.blocks(bl, [d * extent for d in disp])
        return self._derive("indexed", m, "INDEXED", ([len(bl), *bl, *disp], [], [self]))

    def Create_hindexed(self, blocklengths: Sequence[int],
                        displacements: Sequence[int]) -> Datatype:  # fmt: skip
        """Blocks of ``blocklengths[i]`` elements at ``displacements[i]`` bytes."""
        bl, disp = _pairs(blocklengths, displacements)
        m = self.typemap.blocks(bl, disp)
        return self._derive("hindexed", m, "HINDEXED", ([len(bl), *bl], disp, [self]))

    def Create_indexed_block(self, blocklength: int, displacements: Sequence[int]) -> Datatype:
        """Blocks of ``blocklength`` elements at ``displacements[i]`` elements."""
        disp = [int(d) for d in displacements]
        _counts(blocklength)
        extent = self.typemap.extent
        m = self.typemap.blocks([blocklength] * len(disp), [d * extent for d in disp])
        return self._derive("indexed_block", m, "INDEXED_BLOCK",
                            ([len(disp), blocklength, *disp], [], [self]))  # fmt: skip

    def Create_hindexed_block(self, blocklength: int, displacements: Sequence[int]) -> Datatype:
        """Blocks of ``blocklength`` elements at ``displacements[i]`` bytes."""
        disp = [int(d) for d in displacements]
        _counts(blocklength)
        m = self.typemap.blocks([blocklength] * len(disp), disp)
        return self._derive("hindexed_block", m, "HINDEXED_BLOCK",
                            ([len(disp), blocklength], disp, [self]))  # fmt: skip

    @classmethod
    def Create_struct(cls, blocklengths: Sequence[int], displacements: Sequence[int],
                      datatypes: Sequence[Datatype]) -> Datatype:  # fmt: skip
        """Blocks of ``blocklengths[i]`` elements of ``datatypes[i]`` at byte offsets."""
        bl, disp = _pairs(blocklengths, displacements)
        types = list(datatypes)
        if len(types) != len(bl):
            raise ArgumentError(ERR_ARG, "Create_struct: as many datatypes as blocks needed")
        parts = [t.typemap.blocks([n], [d]) for n, d, t in zip(bl, disp, types, strict=True)]
        m = TypeMap.concat(parts)
        if types:
            align = max(_alignment(t) for t in types)
            if align > 1 and m.extent % align:
                m = m.resized(m.lb, m.extent + align - m.extent % align)
        owner = types[0] if types else _byte()
        return owner._derive("struct", m, "STRUCT", ([len(bl), *bl], disp, types))

    def Create_subarray(self, sizes: Sequence[int], subsizes: Sequence[int],
                        starts: Sequence[int], order: int = ORDER_C) -> Datatype:  # fmt: skip
        """The ``subsizes`` block at ``starts`` of an array of ``sizes`` (C or Fortran order);
        the extent is the whole array's."""
        full, sub, first = list(sizes), list(subsizes), list(starts)
        if not len(full) == len(sub) == len(first) or any(
            s < 0 or b < 0 or f < 0 or f + b > s for s, b, f in zip(full, sub, first, strict=True)
        ):
            raise MPIException(ERR_ARG, f"Create_subarray: bad shape {full}, {sub}, {first}")
        if order not in (ORDER_C, ORDER_F):
            raise MPIException(ERR_ARG, f"Create_subarray: bad order {order}")
        chosen = [np.arange(f, f + b, dtype=np.int64) for f, b in zip(first, sub, strict=True)]
        built = self._selection(full, chosen, order)
        ints = [len(full), *full, *sub, *first, order]
        return self._derive("subarray", built, "SUBARRAY", (ints, [], [self]))

    def Create_darray(self, size: int, rank: int, gsizes: Sequence[int],
                      distribs: Sequence[int], dargs: Sequence[int], psizes: Sequence[int],
                      order: int = ORDER_C) -> Datatype:  # fmt: skip
        """Process ``rank``'s part of a distributed ``gsizes`` array (see mpi/darray.py); the
        extent is the whole array's."""
        g, dist, darg, p = (list(map(int, x)) for x in (gsizes, distribs, dargs, psizes))
        if order not in (ORDER_C, ORDER_F):
            raise ArgumentError(ERR_ARG, f"Create_darray: bad order {order}")
        try:
            owned = owned_indices(int(size), int(rank), g, dist, darg, p)
        except ValueError as exc:
            raise ArgumentError(ERR_ARG, f"Create_darray: {exc}") from None
        built = self._selection(g, owned, order)
        ints = [int(size), int(rank), len(g), *g, *dist, *darg, *p, order]
        return self._derive("darray", built, "DARRAY", (ints, [], [self]))

    def _selection(self, full: list[int], chosen: list[np.ndarray], order: int) -> TypeMap:
        """The elements at the cartesian product of ``chosen`` indices of a ``full`` array,
        in memory order, with the whole array's extent."""
        flat_order: Literal["C", "F"] = "C" if order == ORDER_C else "F"
        m = self.typemap
        if full:
            grids = np.meshgrid(*chosen, indexing="ij")
            index = np.ravel_multi_index(tuple(x.ravel(order=flat_order) for x in grids),
                                         tuple(full), order=flat_order)  # fmt: skip
        else:
            index = np.zeros(1, np.int64)
        total = int(np.prod(full, dtype=np.int64)) * m.extent
        return m.replicate(np.asarray(index, np.int64) * m.extent).resized(m.lb, total)

    def Create_resized(self, lb: int, extent: int) -> Datatype:
        """Same data with lower bound ``lb`` and extent ``extent``."""
        m = self.typemap.resized(int(lb), int(extent))
        return self._derive("resized", m, "RESIZED", ([], [int(lb), int(extent)], [self]))

    Resized = Create_resized

    # -- Fortran 90 parameterized types, value-index pairs, size matching -----------------------

    @classmethod
    def Create_f90_integer(cls, r: int) -> Datatype:
        """The smallest integer type with ``r`` decimal digits (INTEGER1..8)."""
        size = next((n for n, digits in ((1, 2), (2, 4), (4, 9), (8, 18)) if r <= digits), 0)
        return _f90("INTEGER", size, "F90_INTEGER", [int(r)])

    @classmethod
    def Create_f90_real(cls, p: int, r: int) -> Datatype:
        """The smallest real type with precision ``p`` and exponent range ``r``."""
        return _f90("REAL", _real_size(p, r), "F90_REAL", [int(p), int(r)])

    @classmethod
    def Create_f90_complex(cls, p: int, r: int) -> Datatype:
        """The complex type of two Create_f90_real(p, r) parts."""
        size = _real_size(p, r)
        return _f90("COMPLEX", 2 * size if size else 0, "F90_COMPLEX", [int(p), int(r)])

    @classmethod
    def Get_value_index(cls, value: Datatype, index: Datatype) -> Datatype:
        """The predefined (value, index) pair type for MAXLOC/MINLOC, or DATATYPE_NULL."""
        from emucluster.mpi.datatype.datatype import predefined

        if not value or not index:
            raise MPIException(ERR_TYPE, "Get_value_index: DATATYPE_NULL")
        if index is not predefined["INT"]:
            return _null()
        for name in ("SHORT", "INT", "LONG", "FLOAT", "DOUBLE", "LONG_DOUBLE"):
            if value is predefined[name]:
                return predefined["TWOINT" if name == "INT" else f"{name}_INT"]
        return _null()

    @classmethod
    def Match_size(cls, typeclass: int, size: int) -> Datatype:
        """The predefined Fortran type of ``typeclass`` (TYPECLASS_*) and ``size`` bytes."""
        from emucluster.mpi.datatype.datatype import predefined

        prefix = TYPECLASSES.get(typeclass)
        found = predefined.get(f"{prefix}{size}") if prefix else None
        if found is None or not found:
            raise MPIException(ERR_ARG, f"Match_size: no type of class {typeclass}, size {size}")
        return found

    # -- introspection ---------------------------------------------------------------------------

    def _how(self) -> tuple[str, Contents]:
        self._check()
        return self._combiner, self._contents  # type: ignore[attr-defined]

    def Get_envelope(self) -> tuple[int, int, int, int, int]:
        """(integers, addresses, large counts, datatypes, combiner) of Get_contents."""
        combiner, (ints, addrs, types) = self._how()
        return len(ints), len(addrs), 0, len(types), COMBINERS[combiner]

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
        return COMBINERS[self._how()[0]]

    @property
    def is_named(self) -> bool:
        """Whether this is a named predefined type."""
        return self._how()[0] == "NAMED"

    @property
    def is_predefined(self) -> bool:
        """Whether this is a predefined type (named, or made by Create_f90_*)."""
        return self._how()[0] in ("NAMED", "F90_INTEGER", "F90_REAL", "F90_COMPLEX")

    def decode(self) -> tuple[Datatype, str, dict[str, Any]]:
        """(old type, combiner name, constructor keyword arguments), as mpi4py's decode."""
        combiner, (ints, addrs, types) = self._how()
        if combiner == "NAMED":
            return _handle(self), "NAMED", {}  # type: ignore[arg-type]
        old = _handle(types[0]) if len(types) == 1 else _null()  # mpi4py: one old type only
        kwargs: dict[str, Any] = {}
        if combiner == "CONTIGUOUS":
            kwargs = {"count": ints[0]}
        elif combiner == "VECTOR":
            kwargs = {"count": ints[0], "blocklength": ints[1], "stride": ints[2]}
        elif combiner == "HVECTOR":
            kwargs = {"count": ints[0], "blocklength": ints[1], "stride": addrs[0]}
        elif combiner == "INDEXED":
            n = ints[0]
            kwargs = {"blocklengths": ints[1 : 1 + n], "displacements": ints[1 + n :]}
        elif combiner == "HINDEXED":
            kwargs = {"blocklengths": ints[1:], "displacements": addrs}
        elif combiner == "INDEXED_BLOCK":
            kwargs = {"blocklength": ints[1], "displacements": ints[2:]}
        elif combiner == "HINDEXED_BLOCK":
            kwargs = {"blocklength": ints[1], "displacements": addrs}
        elif combiner == "STRUCT":
            kwargs = {"blocklengths": ints[1:], "displacements": addrs,
                      "datatypes": [_handle(t) for t in types]}  # fmt: skip
        elif combiner == "SUBARRAY":
            n = ints[0]
            kwargs = {"sizes": ints[1 : 1 + n], "subsizes": ints[1 + n : 1 + 2 * n],
                      "starts": ints[1 + 2 * n : 1 + 3 * n], "order": ints[-1]}  # fmt: skip
        elif combiner == "DARRAY":
            n = ints[2]
            kwargs = {"size": ints[0], "rank": ints[1], "gsizes": ints[3 : 3 + n],
                      "distribs": ints[3 + n : 3 + 2 * n], "dargs": ints[3 + 2 * n : 3 + 3 * n],
                      "psizes": ints[3 + 3 * n : 3 + 4 * n], "order": ints[3 + 4 * n]}  # fmt: skip
        elif combiner == "RESIZED":
            kwargs = {"lb": addrs[0], "extent": addrs[1]}
        elif combiner == "F90_INTEGER":
            kwargs = {"r": ints[0]}
        elif combiner in ("F90_REAL", "F90_COMPLEX"):
            kwargs = {"p": ints[0], "r": ints[1]}
        return old, combiner, kwargs


def _handle(t: Datatype) -> Datatype:
    """Predefined types as they are; derived ones as a new handle (the caller may free it)."""
    return t if t.is_named else type(t)(t)


def _alignment(t: Datatype) -> int:
    kind = t.typemap.homogeneous()
    if kind is None:
        return max((_alignment(x) for x in t._how()[1][2]), default=1)
    return min(t.dtype.alignment, 16) if t.dtype.names is None else t.dtype.alignment


def _null() -> Datatype:
    from emucluster.mpi.datatype.datatype import predefined

    return predefined["DATATYPE_NULL"]


def _real_size(p: int, r: int) -> int:
    return next((n for n, (pp, rr) in ((4, (6, 37)), (8, (15, 307)), (16, (33, 4931)))
                 if p <= pp and r <= rr), 0)  # fmt: skip


def _f90(prefix: str, size: int, combiner: str, ints: list[int]) -> Datatype:
    from emucluster.mpi.datatype.datatype import predefined

    base = predefined.get(f"{prefix}{size}")
    if base is None or not base:
        raise MPIException(ERR_ARG, f"no {prefix} type for {ints}")
    new = base._derive(base.name, base.typemap, combiner, (ints, [], []))
    new._name = ""  # unnamed, as MPICH leaves it
    return new


def _byte() -> Datatype:
    from emucluster.mpi.datatype.datatype import predefined

    return predefined["BYTE"]


def _counts(*values: int) -> None:
    if any(int(v) < 0 for v in values):
        raise MPIException(ERR_COUNT, f"negative count in {values}")


def _pairs(blocklengths: Sequence[int],
           displacements: Sequence[int]) -> tuple[list[int], list[int]]:  # fmt: skip
    bl = [int(b) for b in blocklengths]
    disp = [int(d) for d in displacements]
    if len(bl) != len(disp):
        raise ArgumentError(ERR_ARG, "as many blocklengths as displacements needed")
    _counts(*bl)
    return bl, disp
