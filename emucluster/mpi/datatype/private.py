"""mpi4py's private datatype queries that its pure-Python packages call (``mpi4py.util.dtlib``
reads ``MPI._typecode`` and ``MPI._typealign``): the code and the C alignment of a predefined
type, None where mpi4py has none."""

from __future__ import annotations

import functools

import numpy as np

from emucluster.mpi.datatype.datatype import Datatype, predefined

__all__ = ["typealign", "typecode"]

_PAIRS = {"SHORT_INT": "h", "INT_INT": "i", "LONG_INT": "l", "FLOAT_INT": "f",
          "DOUBLE_INT": "d", "LONG_DOUBLE_INT": "g"}  # fmt: skip
"""The MINLOC/MAXLOC pair types: their value's code (the index is a C int)."""


def typecode(datatype: Datatype) -> str | None:
    """The character code or type string of a predefined type (``tocode``), else None."""
    try:
        return datatype.tocode()
    except ValueError:
        return None


def typealign(datatype: Datatype) -> int | None:
    """The C alignment of a predefined type or MINLOC/MAXLOC pair, else None."""
    code = typecode(datatype)
    if code is not None:
        return _alignment(code)
    for name, value in _PAIRS.items():
        if datatype == predefined[name]:
            return _alignment(f"{value},i")
    return None


@functools.lru_cache(maxsize=256)  # the codes of the predefined types: a few dozen
def _alignment(code: str) -> int:
    """The alignment of numpy's (aligned) dtype of ``code``."""
    return int(np.dtype(code, align=True).alignment)
