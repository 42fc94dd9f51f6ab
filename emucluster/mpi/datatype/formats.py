"""Buffer formats -> predefined datatypes: the type a buffer carries when the program names
none (mpi4py infers it too), from its struct format character or, for a numpy record array,
from its layout (the MAXLOC/MINLOC pair types)."""

from __future__ import annotations

import numpy as np

from emucluster.mpi.datatype.datatype import Datatype, predefined
from emucluster.mpi.errors import ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException

__all__ = ["datatype_of_buffer"]

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
