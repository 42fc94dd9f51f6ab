"""What an open file is underneath, for one process: its descriptor, access mode, view, file
pointers, atomic mode, hints, error handler, and the communicator its collective calls run
on (a duplicate of the one it was opened with, so its traffic never meets the program's).

The collective calls that must order one process's action against everyone's (a truncation,
a reset of the shared pointer, the deletion at Close) use `FileState.at_root`: a gather at
rank 0, the action there, a scatter of its outcome; two message steps where a barrier before
and one after would take ``2 * ceil(log2(size))``, and an error at rank 0 raised everywhere.
A file of one process communicates nothing."""

from __future__ import annotations

import errno
import fcntl
from typing import TYPE_CHECKING, Any, TypeVar

from emucluster.mpi.errors import (
    ERR_ACCESS,
    ERR_BAD_FILE,
    ERR_FILE_EXISTS,
    ERR_IO,
    ERR_NO_SPACE,
    ERR_NO_SUCH_FILE,
    ERR_QUOTA,
    ERR_READ_ONLY,
)
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.state import CommState
    from emucluster.mpi.errhandler import Handler
    from emucluster.mpi.io.sharedptr import SharedPointer
    from emucluster.mpi.io.view import FileView

__all__ = ["FileState", "error_of"]

T = TypeVar("T")

_ERRNO_CLASSES = {
    errno.ENOENT: ERR_NO_SUCH_FILE, errno.EEXIST: ERR_FILE_EXISTS, errno.EACCES: ERR_ACCESS,
    errno.EPERM: ERR_ACCESS, errno.EROFS: ERR_READ_ONLY, errno.ENOSPC: ERR_NO_SPACE,
    errno.EDQUOT: ERR_QUOTA, errno.EISDIR: ERR_BAD_FILE, errno.ENOTDIR: ERR_BAD_FILE,
    errno.ENAMETOOLONG: ERR_BAD_FILE,
}  # fmt: skip


def error_of(exc: OSError, what: str) -> MPIException:
    """The MPI error class of a failed system call, with its message."""
    code = _ERRNO_CLASSES.get(exc.errno or 0, ERR_IO)
    return MPIException(code, f"{what}: {exc.strerror or exc}")


class FileState:
    """One process's state of one open file."""

    __slots__ = ("amode", "atomic", "comm", "dirty", "errhandler", "fd", "info", "path",
                 "position", "shared", "split", "view")  # fmt: skip

    def __init__(self, comm: Any, fd: int, path: str, amode: int, view: FileView,
                 shared: SharedPointer, errhandler: Handler) -> None:  # fmt: skip
        self.comm = comm
        """The file's own duplicate of the communicator it was opened with (an Intracomm)."""
        self.fd = fd
        self.path = path
        """As opened (absolute)."""
        self.amode = amode
        self.view = view
        self.position = 0
        """The individual file pointer, in etypes of the view."""
        self.shared = shared
        self.atomic = False
        """Atomic mode: each access holds a record lock over the bytes it touches."""
        self.info: dict[str, str] = {}
        self.errhandler = errhandler
        """A counted reference (released at Close)."""
        self.split: tuple[str, int] | None = None
        """The split collective begun and not ended: (its name, bytes accessed)."""
        self.dirty = False
        """Whether this process wrote or resized the file since its last Sync: a Sync with
        nothing of its own to flush skips ``fsync`` (6-8 ms each on a loaded disk)."""

    @property
    def comm_state(self) -> CommState:
        """The file communicator's state (for the internal collectives)."""
        st: CommState = self.comm._state()
        return st

    @property
    def rank(self) -> int:
        """This process's rank in the file's group."""
        return self.comm_state.rank

    def barrier(self) -> None:
        """Every process of the file's group got here."""
        if self.comm_state.size > 1:
            self.comm.Barrier()

    def at_root(self, action: Callable[[], T]) -> T:
        """Run ``action`` at rank 0 once every process got here; its result everywhere, or
        its MPIException raised everywhere (see the module docstring)."""
        return self.gathered_at_root(None, lambda _: action())

    def gathered_at_root(self, value: object, action: Callable[[list[Any]], T]) -> T:
        """`at_root` whose action takes every process's ``value`` in rank order."""
        if self.comm_state.size == 1:
            return action([value])
        values = self.comm.gather(value, 0)
        outcome: tuple[bool, Any] = (True, None)
        if values is not None:
            try:
                outcome = (True, action(values))
            except MPIException as exc:
                outcome = (False, (exc.ierr, exc.detail))
        ok, result = self.comm.bcast(outcome, 0)
        if not ok:
            raise MPIException(*result)
        return result  # type: ignore[no-any-return]

    def lock(self, extents: list[tuple[int, int]], exclusive: bool) -> tuple[int, int] | None:
        """In atomic mode, lock the span of ``extents``; the span to unlock (None: nothing)."""
        if not self.atomic or not extents:
            return None
        start = min(at for at, _ in extents)
        end = max(at + length for at, length in extents)
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        fcntl.lockf(self.fd, mode, end - start, start)
        return start, end - start

    def unlock(self, span: tuple[int, int] | None) -> None:
        """Release what `lock` took."""
        if span is not None:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, span[1], span[0])
