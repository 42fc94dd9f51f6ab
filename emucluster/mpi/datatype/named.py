"""The predefined (named) datatypes as data: each ``MPI`` attribute name and its numpy dtype.

The lowest module of the datatype room: `datatype.Datatype` makes one handle per entry (the
``predefined`` table of handles), and the modules below the class (type codes, constructors)
name predefined types by these keys instead of importing the handles. The pair types of
MAXLOC/MINLOC (DOUBLE_INT, ...) are aligned numpy record dtypes (value, index), as the C
structs are laid out. Entries are in registration order: each gets its own basic kind of the
type maps, in this order.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ALIASES", "NAMED", "NULL", "is_named"]


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
NAMED: dict[str, np.dtype[np.generic]] = {name: np.dtype(spec) for name, spec in _TABLE}
"""Every predefined datatype but DATATYPE_NULL: name -> the dtype of one element."""

ALIASES = {"INT_INT": "TWOINT"}
"""Names of one type under two names (MPI_2INT): the alias's handle is its target's."""

NULL = "DATATYPE_NULL"
"""The name of the null handle (no dtype, no data)."""


def is_named(name: str) -> bool:
    """Whether ``name`` is a live predefined type's (the ``MPI`` attribute name, e.g. INT)."""
    return name in NAMED
