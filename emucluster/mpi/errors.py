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
    "ERR_RANK",
    "ERR_REQUEST",
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
}


def Get_error_class(errorcode: int) -> int:
    """The error class of ``errorcode`` (codes are classes here)."""
    return errorcode


def Get_error_string(errorcode: int) -> str:
    """The standard text of ``errorcode``."""
    return _STRINGS.get(errorcode, f"MPI error {errorcode}")


class Exception(RuntimeError, EmuclusterError):
    """An MPI call failed. Raised by every call of the surface; ``error_class`` says why.

    The program may catch it (``except MPI.Exception as e: e.Get_error_class()``); an
    uncaught one ends the rank with a traceback and a non-zero exit, which stops the job.
    """

    def __init__(self, ierr: int = SUCCESS, detail: str = "") -> None:
        self.ierr = ierr
        self.detail = detail
        text = Get_error_string(ierr)
        super().__init__(f"{text}, {detail}" if detail else text)

    def Get_error_code(self) -> int:
        """The error code."""
        return self.ierr

    def Get_error_class(self) -> int:
        """The error class."""
        return Get_error_class(self.ierr)

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
        return Get_error_class(self.ierr)

    @property
    def error_string(self) -> str:
        """The error string."""
        return str(self)

    def __int__(self) -> int:
        return self.ierr

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            return self.ierr == other
        return super().__eq__(other)

    def __hash__(self) -> int:
        return hash(self.ierr)
