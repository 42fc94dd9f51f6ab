"""Character codes and type strings of datatypes (``tocode``, ``fromcode``, ``typechar``,
``typestr``), with mpi4py's tables for an LP64 machine (int 4, long 8, long double 16 bytes).

A predefined type has a struct-style character (``'i'``), a numpy type string (``'i4'``) and
a code (the type string for fixed-width types, else the character). A DUP or F90 type takes
its base's or its size's; any other derived type has none (character ``'V'``, type string
``'V<extent>'``). ``fromcode`` maps a code back to the predefined type mpi4py would pick.
The lookups are plain functions of names: ``Datatype`` passes a `CodeSource` (its own name,
combiner and size, or its DUP base's) and gets back a string, or a predefined type's name.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from emucluster.mpi.datatype.named import is_named

__all__ = ["CodeSource", "code_name", "type_char", "type_code", "type_str"]


class CodeSource(NamedTuple):
    """What a datatype's codes are read from: the type itself, or the base of a DUP chain."""

    name: str
    """The handle's name (``MPI_INT``; a renamed or derived type's own name)."""
    combiner: str
    """How it was made (``NAMED``, ``F90_REAL``, ...; never ``DUP``)."""
    size: int
    """Bytes of data in one element."""


# predefined name -> struct character (mpi4py DatatypeChar)
_CHAR: dict[str, str] = {
    "PACKED": "B", "BYTE": "B", "AINT": "p", "OFFSET": "p", "COUNT": "p",
    "CHAR": "c", "WCHAR": "U", "SIGNED_CHAR": "b", "SHORT": "h", "INT": "i", "LONG": "l",
    "LONG_LONG": "q", "LONG_LONG_INT": "q", "UNSIGNED_CHAR": "B", "UNSIGNED_SHORT": "H",
    "UNSIGNED": "I", "UNSIGNED_INT": "I", "UNSIGNED_LONG": "L", "UNSIGNED_LONG_LONG": "Q",
    "FLOAT": "f", "DOUBLE": "d", "LONG_DOUBLE": "g", "C_BOOL": "?", "BOOL": "?",
    "INT8_T": "b", "INT16_T": "h", "INT32_T": "i", "INT64_T": "l",
    "UINT8_T": "B", "UINT16_T": "H", "UINT32_T": "I", "UINT64_T": "L", "FLOAT16_T": "e",
    "C_COMPLEX": "F", "C_FLOAT_COMPLEX": "F", "C_DOUBLE_COMPLEX": "D",
    "C_LONG_DOUBLE_COMPLEX": "G", "CXX_BOOL": "?", "CXX_FLOAT_COMPLEX": "F",
    "CXX_DOUBLE_COMPLEX": "D", "CXX_LONG_DOUBLE_COMPLEX": "G", "CHARACTER": "c",
    "LOGICAL": "i", "INTEGER": "i", "REAL": "f", "DOUBLE_PRECISION": "d", "COMPLEX": "F",
    "DOUBLE_COMPLEX": "D", "LOGICAL1": "?", "LOGICAL2": "h", "LOGICAL4": "i", "LOGICAL8": "l",
    "INTEGER1": "b", "INTEGER2": "h", "INTEGER4": "i", "INTEGER8": "l", "REAL2": "e",
    "REAL4": "f", "REAL8": "d", "REAL16": "g", "COMPLEX4": "E", "COMPLEX8": "F",
    "COMPLEX16": "D", "COMPLEX32": "G",
}  # fmt: skip

# fixed-width predefined types: their type string is also their code (mpi4py DatatypeCode)
_FIXED: dict[str, str] = {
    "C_BOOL": "b1", "INT8_T": "i1", "INT16_T": "i2", "INT32_T": "i4", "INT64_T": "i8",
    "UINT8_T": "u1", "UINT16_T": "u2", "UINT32_T": "u4", "UINT64_T": "u8",
    "LOGICAL1": "b1", "LOGICAL2": "i2", "LOGICAL4": "i4", "LOGICAL8": "i8",
    "INTEGER1": "i1", "INTEGER2": "i2", "INTEGER4": "i4", "INTEGER8": "i8",
    "REAL2": "f2", "REAL4": "f4", "REAL8": "f8", "REAL16": "f16",
    "COMPLEX4": "c4", "COMPLEX8": "c8", "COMPLEX16": "c16", "COMPLEX32": "c32",
}  # fmt: skip

# struct character -> numpy type string (mpi4py typechr_to_typestr)
_CHAR_STR: dict[str, str] = {
    "?": "b1", "b": "i1", "h": "i2", "i": "i4", "l": "i8", "q": "i8", "p": "i8",
    "B": "u1", "H": "u2", "I": "u4", "L": "u8", "Q": "u8", "P": "u8",
    "e": "f2", "f": "f4", "d": "f8", "g": "f16", "E": "c4", "F": "c8", "D": "c16", "G": "c32",
    "S": "S1", "U": "U1", "c": "S1", "u": "u2", "w": "U1",
}  # fmt: skip

# (code, predefined name) in mpi4py's TypeDict order: a later entry wins
_CODES: list[tuple[str, str]] = [
    ("?", "CXX_BOOL"), ("?", "C_BOOL"), ("b", "SIGNED_CHAR"), ("h", "SHORT"), ("i", "INT"),
    ("l", "LONG"), ("q", "LONG_LONG"), ("B", "UNSIGNED_CHAR"), ("H", "UNSIGNED_SHORT"),
    ("I", "UNSIGNED"), ("L", "UNSIGNED_LONG"), ("Q", "UNSIGNED_LONG_LONG"),
    ("e", "REAL2"), ("e", "FLOAT16_T"), ("f", "FLOAT"), ("d", "DOUBLE"), ("g", "LONG_DOUBLE"),
    ("Ze", "COMPLEX4"), ("Zf", "COMPLEX8"), ("Zd", "COMPLEX16"), ("E", "COMPLEX4"),
    ("F", "COMPLEX8"), ("D", "COMPLEX16"),
    ("Zf", "CXX_FLOAT_COMPLEX"), ("Zd", "CXX_DOUBLE_COMPLEX"), ("Zg", "CXX_LONG_DOUBLE_COMPLEX"),
    ("F", "CXX_FLOAT_COMPLEX"), ("D", "CXX_DOUBLE_COMPLEX"), ("G", "CXX_LONG_DOUBLE_COMPLEX"),
    ("Zf", "C_FLOAT_COMPLEX"), ("Zd", "C_DOUBLE_COMPLEX"), ("Zg", "C_LONG_DOUBLE_COMPLEX"),
    ("F", "C_FLOAT_COMPLEX"), ("D", "C_DOUBLE_COMPLEX"), ("G", "C_LONG_DOUBLE_COMPLEX"),
    ("i1", "INTEGER1"), ("i2", "INTEGER2"), ("i4", "INTEGER4"), ("i8", "INTEGER8"),
    ("i16", "INTEGER16"), ("f2", "REAL2"), ("f4", "REAL4"), ("f8", "REAL8"), ("f16", "REAL16"),
    ("c4", "COMPLEX4"), ("c8", "COMPLEX8"), ("c16", "COMPLEX16"), ("c32", "COMPLEX32"),
    ("b1", "CXX_BOOL"), ("b1", "C_BOOL"), ("i1", "SIGNED_CHAR"), ("u1", "UNSIGNED_CHAR"),
    ("i2", "SHORT"), ("u2", "UNSIGNED_SHORT"), ("i4", "INT"), ("u4", "UNSIGNED"),
    ("i8", "LONG_LONG"), ("u8", "UNSIGNED_LONG_LONG"), ("i8", "LONG"), ("u8", "UNSIGNED_LONG"),
    ("i1", "INT8_T"), ("i2", "INT16_T"), ("i4", "INT32_T"), ("i8", "INT64_T"),
    ("u1", "UINT8_T"), ("u2", "UINT16_T"), ("u4", "UINT32_T"), ("u8", "UINT64_T"),
    ("f2", "FLOAT16_T"), ("f4", "FLOAT"), ("c8", "CXX_FLOAT_COMPLEX"), ("c8", "C_FLOAT_COMPLEX"),
    ("f8", "DOUBLE"), ("c16", "CXX_DOUBLE_COMPLEX"), ("c16", "C_DOUBLE_COMPLEX"),
    ("f16", "LONG_DOUBLE"), ("c32", "CXX_LONG_DOUBLE_COMPLEX"),
    ("c32", "C_LONG_DOUBLE_COMPLEX"),
    ("n", "LONG_LONG"), ("N", "UNSIGNED_LONG_LONG"), ("n", "LONG"), ("N", "UNSIGNED_LONG"),
    ("n", "COUNT"), ("p", "LONG_LONG"), ("P", "UNSIGNED_LONG_LONG"), ("p", "LONG"),
    ("P", "UNSIGNED_LONG"), ("p", "AINT"),
    ("c", "CHAR"), ("a", "CHAR"), ("S", "CHAR"), ("S1", "CHAR"), ("s", "CHAR"), ("1s", "CHAR"),
    ("U", "WCHAR"), ("U1", "WCHAR"), ("u", "UNSIGNED_SHORT"), ("1u", "UNSIGNED_SHORT"),
    ("u", "UINT16_T"), ("1u", "UINT16_T"), ("w", "UNSIGNED"), ("1w", "UNSIGNED"),
    ("w", "UINT32_T"), ("1w", "UINT32_T"), ("w", "WCHAR"), ("1w", "WCHAR"),
    ("M", "INT64_T"), ("M8", "INT64_T"), ("m", "INT64_T"), ("m8", "INT64_T"),
]  # fmt: skip

# F90 combiner -> kind letter of its size
_F90_KIND = {"F90_INTEGER": "i", "F90_REAL": "f", "F90_COMPLEX": "c"}
_BY_SIZE: dict[str, dict[int, str]] = {
    "i": {1: "b", 2: "h", 4: "i", 8: "l"},
    "f": {2: "e", 4: "f", 8: "d", 16: "g"},
    "c": {4: "E", 8: "F", 16: "D", 32: "G"},
}
_STR_BY_SIZE = {"i": "i{}", "f": "f{}", "c": "c{}"}


@functools.lru_cache(maxsize=4096)  # names, combiners and sizes: few distinct ones
def _lookup(src: CodeSource, which: int) -> str | None:
    """Character (0), type string (1) or code (2) of ``src``; None when it has none."""
    name = src.name[4:] if src.name.startswith("MPI_") and src.combiner == "NAMED" else None
    if name is None:
        kind = _F90_KIND.get(src.combiner)
        if kind is None:
            return None
        if which == 0:
            return _BY_SIZE[kind].get(src.size)
        return _STR_BY_SIZE[kind].format(src.size)
    char = _CHAR.get(name)
    if which == 0:
        return char
    fixed = _FIXED.get(name)
    if fixed is not None:
        return fixed
    if which == 1:
        return _CHAR_STR.get(char) if char is not None else None
    return char


def type_char(src: CodeSource | None) -> str:
    """``Datatype.typechar``: '' for DATATYPE_NULL (None), 'V' when there is no character."""
    if src is None:
        return ""
    return _lookup(src, 0) or "V"


def type_str(src: CodeSource | None, extent: int) -> str:
    """``Datatype.typestr``: '' for DATATYPE_NULL (None), ``V<extent>`` when there is none."""
    if src is None:
        return ""
    return _lookup(src, 1) or f"V{extent}"


def type_code(src: CodeSource | None) -> str:
    """``Datatype.tocode()``; ValueError when the type has no code."""
    code = _lookup(src, 2) if src is not None else None
    if code is None:
        raise ValueError("cannot map to character code or type string")
    return code


_BY_CODE: dict[str, str] = {c: n for c, n in _CODES if is_named(n)}


def code_name(code: str) -> str:
    """The predefined type ``Datatype.fromcode(code)`` is, by name; ValueError for an unknown
    code."""
    try:
        return _BY_CODE[code]
    except (KeyError, TypeError):
        raise ValueError(f"cannot map code {code!r} to MPI datatype") from None
