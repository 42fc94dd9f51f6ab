"""``MPI.Status``: source, tag, error and size of a received (or probed) message."""

from __future__ import annotations

from array import array

from emucluster.mpi.constants import ANY_SOURCE, ANY_TAG, UNDEFINED
from emucluster.mpi.datatype.datatype import Datatype, predefined
from emucluster.mpi.errors import SUCCESS

__all__ = ["F_ERROR", "F_SOURCE", "F_STATUS_SIZE", "F_TAG", "Status"]

F_SOURCE = 2  # where source, tag and error sit in a status's Fortran form (MPICH's layout:
F_TAG = 3  # count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR)
F_ERROR = 4
F_STATUS_SIZE = 5

_BYTE = predefined["BYTE"]


class Status:
    """What a receive or probe found (mpi4py's ``MPI.Status``).

    A fresh status holds source ANY_SOURCE, tag ANY_TAG, error SUCCESS and count 0; a receive
    from PROC_NULL leaves source PROC_NULL, tag ANY_TAG, count 0. The count is kept in bytes:
    ``Get_count(datatype)`` divides by the datatype's size (UNDEFINED if it does not divide);
    for lowercase receives it is the size of the pickled message.
    """

    __slots__ = ("__weakref__", "_bytes", "_cancelled", "_mem")

    def __init__(self, status: Status | None = None) -> None:
        if status is not None and not isinstance(status, Status):
            raise TypeError(f"Status() takes a Status, not {type(status).__name__}")
        self._mem = array("i", [ANY_SOURCE, ANY_TAG, SUCCESS])
        """source, tag and error, as C ints (``tomemory`` exposes them)."""
        self._bytes = 0
        self._cancelled = False
        if status is not None:
            self._mem = array("i", status._mem)
            self._bytes, self._cancelled = status._bytes, status._cancelled

    @property
    def source(self) -> int:
        """Rank of the sender in the communicator."""
        return self._mem[0]

    @source.setter
    def source(self, value: int) -> None:
        self._mem[0] = value

    @property
    def tag(self) -> int:
        """Tag of the message."""
        return self._mem[1]

    @tag.setter
    def tag(self, value: int) -> None:
        self._mem[1] = value

    @property
    def error(self) -> int:
        """Error class of the receive (SUCCESS, or ERR_TRUNCATE ...)."""
        return self._mem[2]

    @error.setter
    def error(self, value: int) -> None:
        self._mem[2] = value

    def tomemory(self) -> memoryview:
        """The status's source, tag and error as writable C ints (writes change the status)."""
        return memoryview(self._mem)

    def py2f(self) -> list[int]:
        """The status as `F_STATUS_SIZE` integers (its Fortran form, MPICH's layout: the byte
        count's low 32 bits, its high bits shifted left by one with the cancelled flag in bit
        0, then source, tag and error at `F_SOURCE`, `F_TAG`, `F_ERROR`)."""
        low, high = self._bytes & 0xFFFFFFFF, self._bytes >> 32
        return [low, high << 1 | int(self._cancelled), *self._mem]

    @classmethod
    def f2py(cls, arg: list[int]) -> Status:
        """A status from its Fortran form (`py2f`)."""
        status = cls()
        status._mem = array("i", arg[F_SOURCE : F_ERROR + 1])
        status._bytes = arg[0] | (arg[1] >> 1) << 32
        status._cancelled = bool(arg[1] & 1)
        return status

    def __reduce__(self) -> tuple[object, tuple[list[int]]]:
        return (type(self).f2py, (self.py2f(),))

    def Get_source(self) -> int:
        """Rank of the sender."""
        return self.source

    def Set_source(self, source: int) -> None:
        """Set the source."""
        self.source = source

    def Get_tag(self) -> int:
        """Tag of the message."""
        return self.tag

    def Set_tag(self, tag: int) -> None:
        """Set the tag."""
        self.tag = tag

    def Get_error(self) -> int:
        """Error class of the operation."""
        return self.error

    def Set_error(self, error: int) -> None:
        """Set the error."""
        self.error = error

    def Get_count(self, datatype: Datatype = _BYTE) -> int:
        """Number of ``datatype`` elements received (UNDEFINED if not a whole number)."""
        size = datatype.Get_size()
        if size == 0:
            return 0 if self._bytes == 0 else UNDEFINED
        whole, rest = divmod(self._bytes, size)
        return UNDEFINED if rest else whole

    def Get_elements(self, datatype: Datatype) -> int:
        """Number of basic elements received, counting those of a last, partial ``datatype``
        element (UNDEFINED if the data ends inside a basic element; MPI 4.0 sec. 4.1.11)."""
        size = datatype.Get_size()
        if size == 0:
            return 0 if self._bytes == 0 else UNDEFINED
        whole, rest = divmod(self._bytes, size)
        partial = datatype.typemap.elements_in(rest)
        return UNDEFINED if partial is None else whole * datatype.elements + partial

    def Set_elements(self, datatype: Datatype, count: int) -> None:
        """Set the size to ``count`` elements of ``datatype``."""
        self._bytes = count * datatype.Get_size()

    @property
    def count(self) -> int:
        """Bytes received (``Get_count()``)."""
        return self._bytes

    @count.setter
    def count(self, value: int) -> None:
        self._bytes = value

    def Is_cancelled(self) -> bool:
        """Whether the request was cancelled."""
        return self._cancelled

    def Set_cancelled(self, flag: bool) -> None:
        """Mark the request cancelled (or not)."""
        self._cancelled = flag

    @property
    def cancelled(self) -> bool:
        """Whether the request was cancelled."""
        return self._cancelled

    @cancelled.setter
    def cancelled(self, flag: bool) -> None:
        self._cancelled = bool(flag)

    def set(self, source: int, tag: int, nbytes: int, error: int = SUCCESS,
            cancelled: bool = False) -> None:  # fmt: skip
        """Fill every field at once (used by the library)."""
        self.source, self.tag, self._bytes = source, tag, nbytes
        self.error, self._cancelled = error, cancelled

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return self.py2f() == other.py2f()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Status(source={self.source}, tag={self.tag}, error={self.error}, count={self._bytes})"
        )
