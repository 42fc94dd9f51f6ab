"""Reduction operations (``MPI.Op``) on Python objects and, elementwise, on numpy buffers.

Two ways to apply an Op, as in mpi4py:

* on objects (``comm.reduce``, ``op(x, y)``): SUM is ``x + y``, MAX the larger, LAND
  ``bool(x and y)``, MAXLOC/MINLOC on ``(value, index)`` pairs (ties keep the lower index),
  REPLACE keeps ``y``, NO_OP keeps ``x``; a user function is called ``function(x, y, None)``.
  numpy arrays given as objects are combined elementwise (MAX is ``numpy.maximum``).
* on buffers (``Reduce``, ``Allreduce``, ``Reduce_local``): numpy ufuncs elementwise on the
  datatype's dtype; a user function is called ``function(inbuf, inoutbuf, datatype)`` with
  byte views and must leave ``inbuf op inoutbuf`` in ``inoutbuf`` (MPI's user-function rule).

In both, ``x`` / ``inbuf`` is the contribution of the lower ranks. `ObjectCombine` and
`BufferCombine` adapt an Op to the collective contract's `Combine` (bytes in, bytes out).

An ``Op`` is a handle, as in mpi4py: ``Op(op)`` is another handle to the same operation (equal,
not identical), ``Op()`` the null handle (equal to OP_NULL). User operations take one of
mpi4py's `MAX_USER_OPS` slots until freed (RuntimeError when none is left), pickle as
``Op.Create(function, commute)``, and predefined ones pickle as themselves.
"""

from __future__ import annotations

import operator
import pickle
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from emucluster.mpi.buffer.spec import MessageSpecError, message
from emucluster.mpi.errors import ERR_BUFFER, ERR_OP
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.handles import Handled

if TYPE_CHECKING:
    from emucluster.mpi.datatype.datatype import Datatype

__all__ = [
    "BAND",
    "BOR",
    "BXOR",
    "LAND",
    "LOR",
    "LXOR",
    "MAX",
    "MAXLOC",
    "MAX_USER_OPS",
    "MIN",
    "MINLOC",
    "NO_OP",
    "OP_NULL",
    "PROD",
    "REPLACE",
    "SUM",
    "BufferCombine",
    "ObjectCombine",
    "Op",
    "predefined_ops",
]

MAX_USER_OPS = 32  # mpi4py's registry of user-defined operations holds 32
_user_slots: set[object] = set()  # keys of the user operations not yet freed

PICKLE_PROTOCOL = pickle.HIGHEST_PROTOCOL

ObjFn = Callable[[Any, Any], Any]
ArrFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


class Op(Handled):
    """A reduction operation (mpi4py's ``MPI.Op``)."""

    __slots__ = ("_arrays", "_commute", "_from_int", "_key", "_name", "_objects", "_user")

    def _handle_key(self) -> object:
        return self._key

    _name: str
    _objects: ObjFn | None
    _arrays: ArrFn | None
    _commute: bool
    _user: Callable[..., Any] | None
    _key: object | None

    def __init__(self, op: Op | str | None = None, objects: ObjFn | None = None,
                 arrays: ArrFn | None = None, *, commute: bool = True,
                 user: Callable[..., Any] | None = None) -> None:  # fmt: skip
        """``Op(op)``: a new handle to ``op``; ``Op()``: the null handle. (The other arguments
        build the predefined operations and user operations; see ``Create``.)"""
        self._from_int = False
        """Made from an integer handle: the same operation, but not picklable (as in mpi4py,
        where such a handle has lost its Python function)."""
        if isinstance(op, Op):
            self._name, self._objects, self._arrays = op._name, op._objects, op._arrays
            self._commute, self._user, self._key = op._commute, op._user, op._key
            return
        if op is not None and (not isinstance(op, str) or (objects is None and user is None)):
            raise TypeError(f"Op() takes an Op, not {type(op).__name__}")
        self._name = op or "MPI_OP_NULL"
        self._objects = objects
        self._arrays = arrays
        self._commute = commute
        self._user = user
        self._key = None if objects is None and user is None else object()

    @classmethod
    def Create(cls, function: Callable[..., Any], commute: bool = False) -> Op:
        """A user-defined operation: ``function(inbuf, inoutbuf, datatype)`` on buffers,
        ``function(x, y, None) -> result`` on objects. RuntimeError once `MAX_USER_OPS`
        user operations exist (mpi4py's limit; Free releases one)."""
        if not callable(function):
            raise TypeError(f"{type(function).__name__} object is not callable")
        if len(_user_slots) >= MAX_USER_OPS:
            raise RuntimeError("cannot create too many user-defined reduction operations")
        op = cls(f"user({getattr(function, '__name__', 'op')})", commute=bool(commute),
                 user=function)  # fmt: skip
        _user_slots.add(op._key)
        return op

    def Free(self) -> None:
        """Free a user-defined operation; the handle becomes null."""
        if self._key is None or self._user is None:
            raise MPIException(ERR_OP, f"cannot free {self._name}")
        _user_slots.discard(self._key)
        self._user = None
        self._key = None
        self._name = "MPI_OP_NULL"

    def free(self) -> None:
        """Free safely (mpi4py): the predefined constants and OP_NULL stay; another handle of
        a predefined operation becomes null; a user operation is freed."""
        if self._key is None or any(self is op for op in predefined_ops.values()):
            return
        if self._user is None:
            self._key, self._name = None, "MPI_OP_NULL"
            return
        self.Free()

    # -- handle semantics ---------------------------------------------------------------------

    @classmethod
    def fromhandle(cls, handle: int) -> Op:
        """The operation named by ``handle``: a predefined one itself, a user one as a new
        handle that cannot be pickled (mpi4py's ``fromint`` handle has no Python function)."""
        found = super().fromhandle(handle)
        if found._user is None:
            return found
        clone = cls(found)
        clone._from_int = True
        return clone

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Op):
            return NotImplemented
        return self._key is other._key

    __hash__ = None  # type: ignore[assignment]  # unhashable, as mpi4py's handles

    def __reduce__(self) -> tuple[Any, ...]:
        for name, op in predefined_ops.items():
            if self is op:
                return _predefined, (name,)
        for op in predefined_ops.values():
            if self == op:
                return type(self), (op,)
        if self._user is None or self._from_int:
            raise ValueError(f"cannot pickle {self!r}")
        return type(self).Create, (self._user, self._commute)

    def Is_commutative(self) -> bool:
        """Whether the operation commutes."""
        return self._commute

    @property
    def is_commutative(self) -> bool:
        """Whether the operation commutes."""
        return self._commute

    def Is_predefined(self) -> bool:
        """Whether this is one of the predefined operations."""
        return self._user is None

    @property
    def is_predefined(self) -> bool:
        """Whether this is one of the predefined operations."""
        return self._user is None

    def __call__(self, x: Any, y: Any) -> Any:
        """``x op y`` on Python objects."""
        if self._user is not None:
            return self._user(x, y, None)
        if self._objects is None:
            raise ValueError("cannot call user-defined operation")
        if self._arrays is not None and (isinstance(x, np.ndarray) or isinstance(y, np.ndarray)):
            return self._arrays(np.asarray(x), np.asarray(y))
        return self._objects(x, y)

    def Reduce_local(self, inbuf: object, inoutbuf: object) -> None:
        """``inoutbuf = inbuf op inoutbuf`` on buffers."""
        src = message(inbuf, writable=False)
        dst = message(inoutbuf, writable=True)
        if len(src.view) != len(dst.view):
            raise MessageSpecError(ERR_BUFFER, "Reduce_local: buffers differ in size")
        dst.view[:] = self.combine_bytes(src.view, dst.view, dst.datatype)

    def combine_bytes(self, left: bytes | memoryview, right: bytes | memoryview,
                      datatype: Datatype) -> bytes:  # fmt: skip
        """``left op right`` on two buffers of elements of ``datatype``; returns the bytes."""
        if self._user is not None:
            inout = bytearray(right)
            self._user(_typed(left, datatype), _typed(inout, datatype), datatype)
            return bytes(inout)
        if self._arrays is None:
            raise MPIException(ERR_OP, "OP_NULL cannot be applied")
        dtype = datatype.element_dtype
        a = np.frombuffer(left, dtype=dtype)
        b = np.frombuffer(right, dtype=dtype)
        try:
            result = self._arrays(a, b)
        except TypeError as exc:
            raise MPIException(ERR_OP, f"{self._name} is not defined on {datatype.name}") from exc
        return np.ascontiguousarray(result, dtype=dtype).tobytes()

    @property
    def name(self) -> str:
        """The operation's name, e.g. ``MPI_SUM``."""
        return self._name

    def __bool__(self) -> bool:
        return self._key is not None

    def __repr__(self) -> str:
        return f"<emucluster.MPI.Op {self._name}>"


class ObjectCombine:
    """`Combine` for lowercase collectives: unpickle, ``left op right``, pickle."""

    __slots__ = ("commute", "op")

    def __init__(self, op: Op) -> None:
        self.op = op
        self.commute = op.is_commutative

    def __call__(self, left: bytes, right: bytes) -> bytes:
        return pickle.dumps(self.op(pickle.loads(left), pickle.loads(right)), PICKLE_PROTOCOL)


class BufferCombine:
    """`Combine` for buffer collectives: elementwise on ``datatype``'s dtype."""

    __slots__ = ("commute", "datatype", "op")
    uniform = True  # every rank's payload has the same size (MPI: same count and datatype)

    def __init__(self, op: Op, datatype: Datatype) -> None:
        self.op = op
        self.datatype = datatype
        self.commute = op.is_commutative

    def __call__(self, left: bytes, right: bytes) -> bytes:
        return self.op.combine_bytes(left, right, self.datatype)


# -- predefined operations ------------------------------------------------------------------------


def _obj_max(x: Any, y: Any) -> Any:
    return y if y > x else x


def _obj_min(x: Any, y: Any) -> Any:
    return y if y < x else x


def _obj_maxloc(x: Any, y: Any) -> Any:
    (u, i), (v, j) = x, y
    if u > v:
        return u, i
    if v > u:
        return v, j
    return (u, i) if i <= j else (v, j)


def _obj_minloc(x: Any, y: Any) -> Any:
    (u, i), (v, j) = x, y
    if u < v:
        return u, i
    if v < u:
        return v, j
    return (u, i) if i <= j else (v, j)


def _logical(fn: Callable[..., np.ndarray]) -> ArrFn:
    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fn(a, b).astype(np.result_type(a, b))

    return apply


def _loc(greater: bool) -> ArrFn:
    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        va, vb = a["value"], b["value"]
        better = vb > va if greater else vb < va
        take_b = better | ((vb == va) & (b["index"] < a["index"]))
        return np.where(take_b, b, a)

    return apply


predefined_ops: dict[str, Op] = {
    "SUM": Op("MPI_SUM", operator.add, np.add),
    "PROD": Op("MPI_PROD", operator.mul, np.multiply),
    "MAX": Op("MPI_MAX", _obj_max, np.maximum),
    "MIN": Op("MPI_MIN", _obj_min, np.minimum),
    "LAND": Op("MPI_LAND", lambda x, y: bool(x and y), _logical(np.logical_and)),
    "LOR": Op("MPI_LOR", lambda x, y: bool(x or y), _logical(np.logical_or)),
    "LXOR": Op("MPI_LXOR", lambda x, y: bool(x) != bool(y), _logical(np.logical_xor)),
    "BAND": Op("MPI_BAND", operator.and_, np.bitwise_and),
    "BOR": Op("MPI_BOR", operator.or_, np.bitwise_or),
    "BXOR": Op("MPI_BXOR", operator.xor, np.bitwise_xor),
    "MAXLOC": Op("MPI_MAXLOC", _obj_maxloc, _loc(greater=True)),
    "MINLOC": Op("MPI_MINLOC", _obj_minloc, _loc(greater=False)),
    "REPLACE": Op("MPI_REPLACE", lambda x, y: y, lambda a, b: b, commute=False),
    "NO_OP": Op("MPI_NO_OP", lambda x, y: x, lambda a, b: a, commute=False),
    "OP_NULL": Op(),
}
"""Every predefined operation by its ``MPI`` attribute name."""


def _typed(buf: bytes | bytearray | memoryview, datatype: Datatype) -> memoryview:
    """``buf`` as a memoryview of the datatype's element format when it has a plain one (so a
    user function may assign an ``array`` of those elements), else of bytes."""
    view = memoryview(buf).cast("B")
    try:
        dtype = np.dtype(datatype.element_dtype)
    except (TypeError, AttributeError):
        return view
    code: str = dtype.char
    if (
        dtype.fields is None
        and code in _CASTABLE
        and dtype.isnative
        and len(view) % dtype.itemsize == 0
    ):
        return view.cast(code)  # type: ignore[call-overload, no-any-return]
    return view


_CASTABLE = frozenset("bBhHiIlLqQfd?")


def _predefined(name: str) -> Op:
    return predefined_ops[name]


# The predefined operations by their MPI names (``MPI.SUM``), bound once.
SUM = predefined_ops["SUM"]
PROD = predefined_ops["PROD"]
MAX = predefined_ops["MAX"]
MIN = predefined_ops["MIN"]
LAND = predefined_ops["LAND"]
LOR = predefined_ops["LOR"]
LXOR = predefined_ops["LXOR"]
BAND = predefined_ops["BAND"]
BOR = predefined_ops["BOR"]
BXOR = predefined_ops["BXOR"]
MAXLOC = predefined_ops["MAXLOC"]
MINLOC = predefined_ops["MINLOC"]
REPLACE = predefined_ops["REPLACE"]
NO_OP = predefined_ops["NO_OP"]
OP_NULL = predefined_ops["OP_NULL"]
