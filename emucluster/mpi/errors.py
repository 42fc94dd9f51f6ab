"""MPI error classes and ``MPI.Exception``, as mpi4py presents them.

Every failing call raises `Exception` (a RuntimeError, as in mpi4py) carrying an error code;
codes are the error classes themselves (values as MPICH 5's). Misuse by the program (a bad
rank, tag or buffer) and outcomes of the cluster (truncation, a dead peer) share this one
type, as MPI does; `Exception.error_class` tells them apart.
"""

from __future__ import annotations

from emucluster.errors import EmuclusterError

__all__ = [
    "ERR_ARG",
    "ERR_BUFFER",
    "ERR_COMM",
    "ERR_COUNT",
    "ERR_DIMS",
    "ERR_GROUP",
    "ERR_INTERN",
    "ERR_IN_STATUS",
    "ERR_LASTCODE",
    "ERR_OP",
    "ERR_OTHER",
    "ERR_PENDING",
    "ERR_PROC_FAILED",
    "ERR_PROC_FAILED_PENDING",
    "ERR_RANK",
    "ERR_REQUEST",
    "ERR_REVOKED",
    "ERR_ROOT",
    "ERR_TAG",
    "ERR_TOPOLOGY",
    "ERR_TRUNCATE",
    "ERR_TYPE",
    "ERR_UNKNOWN",
    "SUCCESS",
    "Exception",
    "Get_error_class",
    "Get_error_string",
]

SUCCESS = 0
ERR_BUFFER = 1
ERR_COUNT = 2
ERR_TYPE = 3
ERR_TAG = 4
ERR_COMM = 5
ERR_RANK = 6
ERR_ROOT = 7
ERR_GROUP = 8
ERR_OP = 9
ERR_TOPOLOGY = 10
ERR_DIMS = 11
ERR_ARG = 12
ERR_UNKNOWN = 13
ERR_TRUNCATE = 14
ERR_OTHER = 15
ERR_INTERN = 16
ERR_IN_STATUS = 17
ERR_PENDING = 18
ERR_REQUEST = 19
ERR_PROC_FAILED = 101  # ULFM's process-failure class (MPICH: MPIX_ERR_PROC_FAILED)
ERR_PROC_FAILED_PENDING = 102  # ULFM: a wildcard receive pending past a failure (MPICH's value)
ERR_REVOKED = 103  # ULFM: the communicator was revoked (MPICH: MPIX_ERR_REVOKED)
# the classes of MPI 2..4 objects emucluster does not offer (files, windows, sessions, ports),
# with MPICH's values, so programs that name them import and compare as they expect
ERR_ACCESS = 20
ERR_AMODE = 21
ERR_BAD_FILE = 22
ERR_CONVERSION = 23
ERR_DUP_DATAREP = 24
ERR_FILE_EXISTS = 25
ERR_FILE_IN_USE = 26
ERR_FILE = 27
ERR_INFO = 28
ERR_INFO_KEY = 29
ERR_INFO_VALUE = 30
ERR_INFO_NOKEY = 31
ERR_IO = 32
ERR_NAME = 33
ERR_NO_MEM = 34
ERR_NOT_SAME = 35
ERR_NO_SPACE = 36
ERR_NO_SUCH_FILE = 37
ERR_PORT = 38
ERR_QUOTA = 39
ERR_READ_ONLY = 40
ERR_SERVICE = 41
ERR_SPAWN = 42
ERR_UNSUPPORTED_DATAREP = 43
ERR_UNSUPPORTED_OPERATION = 44
ERR_WIN = 45
ERR_BASE = 46
ERR_LOCKTYPE = 47
ERR_KEYVAL = 48
ERR_RMA_CONFLICT = 49
ERR_RMA_SYNC = 50
ERR_SIZE = 51
ERR_DISP = 52
ERR_ASSERT = 53
ERR_RMA_RANGE = 55
ERR_RMA_ATTACH = 56
ERR_RMA_SHARED = 57
ERR_RMA_FLAVOR = 58
ERR_SESSION = 59
ERR_VALUE_TOO_LARGE = 60
ERR_ERRHANDLER = 61
ERR_LASTCODE = 0x3FFFFFFF

_STRINGS = {
    SUCCESS: "MPI_SUCCESS: no errors",
    ERR_BUFFER: "MPI_ERR_BUFFER: invalid buffer pointer",
    ERR_COUNT: "MPI_ERR_COUNT: invalid count argument",
    ERR_TYPE: "MPI_ERR_TYPE: invalid datatype",
    ERR_TAG: "MPI_ERR_TAG: invalid tag",
    ERR_COMM: "MPI_ERR_COMM: invalid communicator",
    ERR_RANK: "MPI_ERR_RANK: invalid rank",
    ERR_REQUEST: "MPI_ERR_REQUEST: invalid request",
    ERR_ROOT: "MPI_ERR_ROOT: invalid root",
    ERR_GROUP: "MPI_ERR_GROUP: invalid group",
    ERR_OP: "MPI_ERR_OP: invalid reduce operation",
    ERR_TOPOLOGY: "MPI_ERR_TOPOLOGY: invalid topology",
    ERR_DIMS: "MPI_ERR_DIMS: invalid dimension argument",
    ERR_ARG: "MPI_ERR_ARG: invalid argument of some other kind",
    ERR_UNKNOWN: "MPI_ERR_UNKNOWN: unknown error",
    ERR_TRUNCATE: "MPI_ERR_TRUNCATE: message truncated",
    ERR_OTHER: "MPI_ERR_OTHER: known error not in list",
    ERR_INTERN: "MPI_ERR_INTERN: internal error",
    ERR_IN_STATUS: "MPI_ERR_IN_STATUS: error code in status",
    ERR_PENDING: "MPI_ERR_PENDING: pending request",
    ERR_PROC_FAILED: "MPIX_ERR_PROC_FAILED: process failure",
    ERR_PROC_FAILED_PENDING: "MPIX_ERR_PROC_FAILED_PENDING: operation pending past a failure",
    ERR_REVOKED: "MPIX_ERR_REVOKED: communicator revoked",
    ERR_LASTCODE: "MPI_ERR_LASTCODE: last error code",
}
_OTHER_CLASSES = {
    name: value for name, value in globals().items()
    if name.startswith("ERR_") and value not in _STRINGS
}  # fmt: skip
for _name, _value in _OTHER_CLASSES.items():
    _STRINGS[_value] = f"MPI_{_name}: {_name[4:].lower().replace('_', ' ')}"
_PREDEFINED = frozenset(_STRINGS)

_user_class_of: dict[int, int] = {}  # user error code (or class) -> its class
_user_strings: dict[int, str] = {}
_last_used = ERR_LASTCODE


def Add_error_class() -> int:
    """A new error class (above ERR_LASTCODE)."""
    global _last_used
    _last_used += 1
    _user_class_of[_last_used] = _last_used
    return _last_used


def Add_error_code(errorclass: int) -> int:
    """A new error code of ``errorclass``."""
    global _last_used
    if errorclass not in _PREDEFINED and _user_class_of.get(errorclass) != errorclass:
        raise Exception(ERR_ARG, f"Add_error_code: {errorclass} is not an error class")
    _last_used += 1
    _user_class_of[_last_used] = errorclass
    return _last_used


def Add_error_string(errorcode: int, string: str) -> None:
    """Set the string of a user error code or class."""
    if errorcode not in _user_class_of:
        raise Exception(ERR_ARG, f"Add_error_string: {errorcode} was not added by the program")
    _user_strings[errorcode] = string


def _remove(errorcode: int, *, want_class: bool) -> None:
    kind = "class" if want_class else "code"
    if errorcode not in _user_class_of or (_user_class_of[errorcode] == errorcode) != want_class:
        raise Exception(ERR_ARG, f"Remove_error_{kind}: {errorcode} is no user error {kind}")
    if errorcode in _user_strings:
        raise Exception(ERR_ARG, f"Remove_error_{kind}: remove its string first")
    if want_class and any(c == errorcode and k != c for k, c in _user_class_of.items()):
        raise Exception(ERR_ARG, "Remove_error_class: the class still has codes")
    del _user_class_of[errorcode]


def Remove_error_class(errorclass: int) -> None:
    """Remove a user error class (its codes and string first)."""
    _remove(errorclass, want_class=True)


def Remove_error_code(errorcode: int) -> None:
    """Remove a user error code (its string first)."""
    _remove(errorcode, want_class=False)


def Remove_error_string(errorcode: int) -> None:
    """Remove the string of a user error code or class."""
    if errorcode not in _user_class_of:
        raise Exception(ERR_ARG, f"Remove_error_string: {errorcode} was not added by the program")
    _user_strings.pop(errorcode, None)


def last_used_code() -> int:
    """The attribute LASTUSEDCODE: the largest error code or class in use."""
    return _last_used


def Get_error_class(errorcode: int) -> int:
    """The error class of ``errorcode`` (library codes are classes here)."""
    if errorcode in _user_class_of:
        return _user_class_of[errorcode]
    if errorcode in _PREDEFINED:
        return errorcode
    raise Exception(ERR_ARG, f"Get_error_class: {errorcode} is no error code")


def Get_error_string(errorcode: int) -> str:
    """The standard text of ``errorcode`` ("" for a user code with no string yet)."""
    if errorcode in _user_class_of:
        return _user_strings.get(errorcode, "")
    if errorcode in _STRINGS:
        return _STRINGS[errorcode]
    raise Exception(ERR_ARG, f"Get_error_string: {errorcode} is no error code")


def _code(other: object) -> int:
    if isinstance(other, int | Exception):
        return int(other)
    raise TypeError(f"cannot compare MPI.Exception with {type(other).__name__}")


class Exception(RuntimeError, EmuclusterError):
    """An MPI call failed. Raised by every call of the surface; ``error_class`` says why.

    The program may catch it (``except MPI.Exception as e: e.Get_error_class()``); an
    uncaught one ends the rank with a traceback and a non-zero exit, which stops the job.
    """

    def __init__(self, ierr: int = SUCCESS, detail: str = "") -> None:
        if ierr < SUCCESS:
            ierr = ERR_UNKNOWN
        self.ierr = ierr
        self.detail = detail
        text = _STRINGS.get(ierr) or _user_strings.get(ierr) or f"MPI error {ierr}"
        super().__init__(f"{text}, {detail}" if detail else text)

    def __repr__(self) -> str:
        return f"MPI.Exception({self.ierr})"

    def __bool__(self) -> bool:
        return self.ierr != SUCCESS

    def __lt__(self, other: object) -> bool:
        return self.ierr < _code(other)

    def __le__(self, other: object) -> bool:
        return self.ierr <= _code(other)

    def __gt__(self, other: object) -> bool:
        return self.ierr > _code(other)

    def __ge__(self, other: object) -> bool:
        return self.ierr >= _code(other)

    def Get_error_code(self) -> int:
        """The error code."""
        return self.ierr

    def Get_error_class(self) -> int:
        """The error class."""
        return _user_class_of.get(self.ierr, self.ierr)

    def Get_error_string(self) -> str:
        """The error string (with the detail of this occurrence)."""
        return str(self)

    @property
    def error_code(self) -> int:
        """The error code."""
        return self.ierr

    @property
    def error_class(self) -> int:
        """The error class."""
        return self.Get_error_class()

    @property
    def error_string(self) -> str:
        """The error string."""
        return str(self)

    def __int__(self) -> int:
        return self.ierr

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int | Exception):
            return self.ierr == int(other)
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.ierr)
