"""``MPI.File``: MPI-IO over a plain (or shared) file system (MPI 4.0 chapter 14).

Each process of the group opens the file itself (the first one creates it, then the others
open it), so the file must be reachable under the same name from every host of the job: on
one machine any path; across hosts a shared directory, as for any MPI-IO over a POSIX file
system. The handle owns the management calls (open, close, delete, size, hints, atomic mode,
view, file pointers, error handler); the data access calls are `emucluster.mpi.io.access`'s
(``File.Read_at = delegate(FileAccess, FileAccess.Read_at)`` ...). The native data
representation only ("internal" is the same here); "external32" and registered
representations raise ERR_UNSUPPORTED_DATAREP.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from typing import TYPE_CHECKING, Any

from emucluster.mpi import errhandler as errhandlers
from emucluster.mpi import lifecycle, predefined
from emucluster.mpi.collective.calls import internal_allgather
from emucluster.mpi.comm.delegate import delegate
from emucluster.mpi.comm.group import Group
from emucluster.mpi.comm.roles import Hints, hints_of
from emucluster.mpi.constants import (
    MODE_APPEND,
    MODE_CREATE,
    MODE_DELETE_ON_CLOSE,
    MODE_EXCL,
    MODE_RDONLY,
    MODE_RDWR,
    MODE_SEQUENTIAL,
    MODE_WRONLY,
    SEEK_CUR,
    SEEK_END,
    SEEK_SET,
)
from emucluster.mpi.datatype.datatype import Datatype
from emucluster.mpi.datatype.datatype import predefined as datatypes
from emucluster.mpi.errhandler import ERRORS_RETURN, Errhandler
from emucluster.mpi.errors import (
    ERR_AMODE,
    ERR_ARG,
    ERR_DUP_DATAREP,
    ERR_FILE,
    ERR_UNSUPPORTED_DATAREP,
)
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import INFO_NULL, Info
from emucluster.mpi.io.access import FileAccess
from emucluster.mpi.io.sharedptr import SharedPointer
from emucluster.mpi.io.state import FileState, error_of
from emucluster.mpi.io.view import FileView
from emucluster.mpi.statehandle import StateHandle

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.errhandler import Handler

__all__ = ["FILE_NULL", "File", "Register_datarep"]

_DATAREPS = {"native", "internal"}
_REGISTERED: dict[str, tuple[object, object, object]] = {}
_default_errhandler: list[Handler] = [ERRORS_RETURN._handler()]
"""The handler a new file starts with: FILE_NULL's (MPI 4.0 sec. 9.3.4)."""


def Register_datarep(datarep: str, read_fn: Callable[..., Any] | None,
                     write_fn: Callable[..., Any] | None,
                     extent_fn: Callable[..., Any]) -> None:  # fmt: skip
    """Register a data representation by name (ERR_DUP_DATAREP if taken); a view may name
    it only if it converts nothing (both functions None: the native layout)."""
    if datarep in _DATAREPS or datarep in _REGISTERED or datarep == "external32":
        raise MPIException(ERR_DUP_DATAREP, f"data representation {datarep!r} exists already")
    _REGISTERED[datarep] = (read_fn, write_fn, extent_fn)


def _amode_flags(amode: int) -> int:
    """The open(2) flags of an access mode (ERR_AMODE when MPI says it is erroneous)."""
    access = [m for m in (MODE_RDONLY, MODE_RDWR, MODE_WRONLY) if amode & m]
    if len(access) != 1:
        raise MPIException(ERR_AMODE, "amode needs exactly one of RDONLY, RDWR, WRONLY")
    if amode & MODE_RDONLY and amode & (MODE_CREATE | MODE_EXCL):
        raise MPIException(ERR_AMODE, "amode: RDONLY with CREATE or EXCL")
    if amode & MODE_RDWR and amode & MODE_SEQUENTIAL:
        raise MPIException(ERR_AMODE, "amode: RDWR with SEQUENTIAL")
    flags = {MODE_RDONLY: os.O_RDONLY, MODE_RDWR: os.O_RDWR, MODE_WRONLY: os.O_WRONLY}[access[0]]
    return flags | os.O_CLOEXEC


def _check_datarep(datarep: str) -> None:
    if datarep in _DATAREPS:
        return
    registered = _REGISTERED.get(datarep)
    if registered is not None and registered[0] is None and registered[1] is None:
        return
    raise MPIException(
        ERR_UNSUPPORTED_DATAREP, f"data representation {datarep!r}: emucluster writes native only"
    )


class File(StateHandle):
    """An open file (mpi4py's ``MPI.File``); FILE_NULL once closed."""

    __slots__ = ()
    _kind = "file"
    _st: FileState | None

    def __new__(cls, file: File | None = None) -> File:
        """A handle to ``file`` (FILE_NULL if None)."""
        if file is not None and not isinstance(file, File):
            raise TypeError(f"{cls.__name__}() takes a File, not {type(file).__name__}")
        self = object.__new__(cls)
        self._st = None if file is None else file._st
        return self

    def _state(self) -> FileState:
        if self._st is None:
            raise MPIException(ERR_FILE, "the file is FILE_NULL (or closed)")
        return self._st

    def __reduce__(self) -> tuple[Any, ...]:
        if self is FILE_NULL:
            return predefined.lookup, ("FILE_NULL",)
        if self._st is None:
            return type(self), ()
        raise ValueError(f"cannot serialize {self!r}")

    def __repr__(self) -> str:
        return (
            "<emucluster.MPI.File NULL>"
            if self._st is None
            else f"<emucluster.MPI.File {self._st.path}>"
        )

    def free(self) -> None:
        """Close the file if open (mpi4py's ``free``)."""
        if self._st is not None:
            self.Close()

    # -- opening and closing ---------------------------------------------------------------

    @classmethod
    def Open(cls, comm: Any, filename: Any, amode: int = MODE_RDONLY,
             info: Any = INFO_NULL) -> File:  # fmt: skip
        """Open ``filename`` on every process of ``comm`` (collective)."""
        flags = _amode_flags(amode)
        path = os.path.abspath(os.fsdecode(os.fspath(filename)))
        dup = comm.Dup()
        st = dup._state()
        first: tuple[int, str, str] | None = None
        if st.rank == 0:
            create = os.O_CREAT | (os.O_EXCL if amode & MODE_EXCL else 0)
            first = _try_open(path, flags | create if amode & MODE_CREATE else flags)
        fd, message, token = internal_allgather(st, first)[0]
        if st.rank != 0:
            fd, message, _ = _try_open(path, flags)
        failures = [m for m in internal_allgather(st, message if fd < 0 else "") if m]
        if failures:
            if fd >= 0:
                os.close(fd)
            dup.Free()
            raise _open_error(failures[0])
        view = FileView(0, datatypes["BYTE"], datatypes["BYTE"], "native")
        state = FileState(dup, fd, path, amode, view, SharedPointer(path, token),
                          _default_errhandler[0].acquire())  # fmt: skip
        state.info = hints_of(info)
        file = cls()
        file._st = state
        if amode & MODE_APPEND:
            end = os.fstat(fd).st_size
            state.position = end
            state.at_root(lambda: _on_shared(state, "Open", end))
        return file

    def Close(self) -> None:
        """Close the file (collective); a MODE_DELETE_ON_CLOSE file is deleted."""
        st = self._state()
        if st.split is not None:
            raise MPIException(ERR_ARG, f"Close: {st.split[0]}_begin has not ended")
        os.close(st.fd)
        st.shared.close(remove=False)

        def remove() -> None:  # at rank 0, once every process closed
            st.shared.close(remove=True)
            if st.amode & MODE_DELETE_ON_CLOSE:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(st.path)

        st.at_root(remove)
        st.errhandler.release()
        st.comm.Free()
        self._st = None

    @classmethod
    def Delete(cls, filename: Any, info: Any = INFO_NULL) -> None:
        """Delete ``filename`` (ERR_NO_SUCH_FILE if it does not exist)."""
        path = os.fsdecode(os.fspath(filename))
        try:
            os.unlink(path)
        except OSError as exc:
            raise error_of(exc, f"Delete {path}") from None

    # -- size, group, mode, hints ----------------------------------------------------------

    def Get_size(self) -> int:
        """The file's size in bytes."""
        return os.fstat(self._state().fd).st_size

    @property
    def size(self) -> int:
        """The file's size in bytes."""
        return self.Get_size()

    def Set_size(self, size: int) -> None:
        """Truncate or extend the file to ``size`` bytes (collective)."""
        st = self._state()
        if size < 0:
            raise MPIException(ERR_ARG, f"Set_size: {size} is negative")

        def truncate() -> None:  # at rank 0, once every process got here
            try:
                if os.fstat(st.fd).st_size != size:  # ftruncate costs 6-14 ms on a busy disk
                    os.ftruncate(st.fd, size)
                    st.dirty = True
            except OSError as exc:
                raise error_of(exc, "Set_size") from None

        st.at_root(truncate)

    def Preallocate(self, size: int) -> None:
        """Make the file at least ``size`` bytes, with its storage allocated (collective)."""
        st = self._state()
        if size < 0:
            raise MPIException(ERR_ARG, f"Preallocate: {size} is negative")

        def allocate() -> None:  # at rank 0, once every process got here
            try:
                if size > os.fstat(st.fd).st_size:
                    try:
                        os.posix_fallocate(st.fd, 0, size)
                    except OSError:
                        os.ftruncate(st.fd, size)  # a file system without fallocate
                    st.dirty = True
            except OSError as exc:
                raise error_of(exc, "Preallocate") from None

        st.at_root(allocate)

    def Get_group(self) -> Group:
        """The group of the processes that opened the file."""
        return Group._of(self._state().comm_state.nodes)

    @property
    def group(self) -> Group:
        """The file's group."""
        return self.Get_group()

    @property
    def group_size(self) -> int:
        """Processes in the file's group."""
        return self._state().comm_state.size

    @property
    def group_rank(self) -> int:
        """This process's rank in the file's group."""
        return self._state().rank

    def Get_amode(self) -> int:
        """The access mode it was opened with."""
        return self._state().amode

    @property
    def amode(self) -> int:
        """The access mode."""
        return self.Get_amode()

    Get_info = delegate(Hints, Hints.Get_info)
    Set_info = delegate(Hints, Hints.Set_info)

    @property
    def info(self) -> Info:
        """The hints (a new Info object)."""
        return self.Get_info()

    @info.setter
    def info(self, info: Info) -> None:
        self.Set_info(info)

    def Get_atomicity(self) -> bool:
        """Whether the file is in atomic mode."""
        return self._state().atomic

    def Set_atomicity(self, flag: bool) -> None:
        """Enter or leave atomic mode (collective)."""
        st = self._state()
        st.barrier()
        st.atomic = bool(flag)

    @property
    def atomicity(self) -> bool:
        """Atomic mode."""
        return self.Get_atomicity()

    @atomicity.setter
    def atomicity(self, flag: bool) -> None:
        self.Set_atomicity(flag)

    def Sync(self) -> None:
        """Flush this process's writes to storage (collective; MPI 4.0 sec. 14.6.1): an
        ``fdatasync`` when it wrote or resized the file since its last Sync, none when it
        did not (nothing of its own to flush: the ``Sync``-``Barrier``-``Sync`` of the
        consistency rules costs one flush, not two). Collective without synchronizing, as
        ROMIO's: the consistency rules take their order from the program's barrier."""
        st = self._state()
        if st.dirty:
            try:
                _flush(st.fd)
            except OSError as exc:
                raise error_of(exc, "Sync") from None
            st.dirty = False

    # -- the view and the file pointers ----------------------------------------------------

    def Set_view(self, disp: int = 0, etype: Datatype | None = None,
                 filetype: Datatype | None = None, datarep: str = "native",
                 info: Any = INFO_NULL) -> None:  # fmt: skip
        """Set the view (collective); both file pointers go back to 0."""
        st = self._state()
        etype = datatypes["BYTE"] if etype is None else etype
        _check_datarep(datarep)
        st.view = FileView(disp, etype, etype if filetype is None else filetype, datarep)
        st.position = 0
        st.info.update(hints_of(info))
        st.at_root(lambda: _on_shared(st, "Set_view", 0))

    def Get_view(self) -> tuple[int, Datatype, Datatype, str]:
        """(displacement, etype, file type, data representation); derived types are new
        handles the caller frees."""
        view = self._state().view

        def handle(datatype: Datatype) -> Datatype:
            return datatype if datatype.is_predefined else datatype.Dup()

        return view.disp, handle(view.etype), handle(view.filetype), view.datarep

    def _seek_target(self, offset: int, whence: int, current: int) -> int:
        st = self._state()
        if whence == SEEK_SET:
            target = offset
        elif whence == SEEK_CUR:
            target = current + offset
        elif whence == SEEK_END:
            target = st.view.visible_before(os.fstat(st.fd).st_size) // st.view.esize + offset
        else:
            raise MPIException(ERR_ARG, f"Seek: whence {whence} is not SEEK_SET/CUR/END")
        if target < 0:
            raise MPIException(ERR_ARG, f"Seek: position {target} is before the view's start")
        return target

    def Seek(self, offset: int, whence: int = SEEK_SET) -> None:
        """Move the individual file pointer (etypes of the view)."""
        st = self._state()
        st.position = self._seek_target(offset, whence, st.position)

    def Get_position(self) -> int:
        """The individual file pointer (etypes of the view)."""
        return self._state().position

    def Seek_shared(self, offset: int, whence: int = SEEK_SET) -> None:
        """Move the shared file pointer (collective, the same arguments everywhere)."""
        st = self._state()

        def seek() -> None:  # at rank 0, once every process got here
            try:
                current = st.shared.get()
            except OSError as exc:
                raise error_of(exc, "Seek_shared") from None
            _on_shared(st, "Seek_shared", self._seek_target(offset, whence, current))

        st.at_root(seek)

    def Get_position_shared(self) -> int:
        """The shared file pointer (etypes of the view)."""
        return self._state().shared.get()

    def Get_byte_offset(self, offset: int) -> int:
        """The file position of the view's etype ``offset``."""
        return self._state().view.byte_offset(offset)

    def Get_type_extent(self, datatype: Datatype) -> int:
        """The extent of ``datatype`` in the file (native: its extent)."""
        self._state()
        return datatype.Get_extent()[1]

    # -- error handlers --------------------------------------------------------------------

    def Get_errhandler(self) -> Errhandler:
        """A new handle to the file's error handler (FILE_NULL's: new files' default)."""
        if self._st is None:
            return Errhandler._of(_default_errhandler[0])
        return Errhandler._of(self._st.errhandler)

    def Set_errhandler(self, errhandler: Errhandler) -> None:
        """Set the file's handler (on FILE_NULL: the one new files start with)."""
        handler = errhandler._handler()
        if self._st is None:
            _default_errhandler[0] = handler
            return
        self._st.errhandler.release()
        self._st.errhandler = handler.acquire()

    @classmethod
    def Create_errhandler(cls, errhandler_fn: Callable[..., Any]) -> Errhandler:
        """A user error handler: ``errhandler_fn(file, errorcode)``."""
        return Errhandler._create(errhandler_fn)

    def Call_errhandler(self, errorcode: int) -> None:
        """Run the file's error handler for ``errorcode``."""
        handler = _default_errhandler[0] if self._st is None else self._st.errhandler
        errhandlers.call(handler, self, errorcode, lifecycle.abort)

    # -- data access (emucluster.mpi.io.access) --------------------------------------------

    Read_at = delegate(FileAccess, FileAccess.Read_at)
    Write_at = delegate(FileAccess, FileAccess.Write_at)
    Read_at_all = delegate(FileAccess, FileAccess.Read_at_all)
    Write_at_all = delegate(FileAccess, FileAccess.Write_at_all)
    Iread_at = delegate(FileAccess, FileAccess.Iread_at)
    Iwrite_at = delegate(FileAccess, FileAccess.Iwrite_at)
    Iread_at_all = delegate(FileAccess, FileAccess.Iread_at_all)
    Iwrite_at_all = delegate(FileAccess, FileAccess.Iwrite_at_all)
    Read = delegate(FileAccess, FileAccess.Read)
    Write = delegate(FileAccess, FileAccess.Write)
    Read_all = delegate(FileAccess, FileAccess.Read_all)
    Write_all = delegate(FileAccess, FileAccess.Write_all)
    Iread = delegate(FileAccess, FileAccess.Iread)
    Iwrite = delegate(FileAccess, FileAccess.Iwrite)
    Iread_all = delegate(FileAccess, FileAccess.Iread_all)
    Iwrite_all = delegate(FileAccess, FileAccess.Iwrite_all)
    Read_shared = delegate(FileAccess, FileAccess.Read_shared)
    Write_shared = delegate(FileAccess, FileAccess.Write_shared)
    Iread_shared = delegate(FileAccess, FileAccess.Iread_shared)
    Iwrite_shared = delegate(FileAccess, FileAccess.Iwrite_shared)
    Read_ordered = delegate(FileAccess, FileAccess.Read_ordered)
    Write_ordered = delegate(FileAccess, FileAccess.Write_ordered)
    Read_at_all_begin = delegate(FileAccess, FileAccess.Read_at_all_begin)
    Read_at_all_end = delegate(FileAccess, FileAccess.Read_at_all_end)
    Write_at_all_begin = delegate(FileAccess, FileAccess.Write_at_all_begin)
    Write_at_all_end = delegate(FileAccess, FileAccess.Write_at_all_end)
    Read_all_begin = delegate(FileAccess, FileAccess.Read_all_begin)
    Read_all_end = delegate(FileAccess, FileAccess.Read_all_end)
    Write_all_begin = delegate(FileAccess, FileAccess.Write_all_begin)
    Write_all_end = delegate(FileAccess, FileAccess.Write_all_end)
    Read_ordered_begin = delegate(FileAccess, FileAccess.Read_ordered_begin)
    Read_ordered_end = delegate(FileAccess, FileAccess.Read_ordered_end)
    Write_ordered_begin = delegate(FileAccess, FileAccess.Write_ordered_begin)
    Write_ordered_end = delegate(FileAccess, FileAccess.Write_ordered_end)


def _flush(fd: int) -> None:
    """Flush the data and the size (``fdatasync``; ``fsync`` where there is none)."""
    getattr(os, "fdatasync", os.fsync)(fd)


def _on_shared(st: FileState, what: str, value: int) -> None:
    """Set the shared pointer to ``value`` (an MPIException if its file fails)."""
    try:
        st.shared.set(value)
    except OSError as exc:
        raise error_of(exc, what) from None


def _try_open(path: str, flags: int) -> tuple[int, str, str]:
    """(fd or -1, the failure's message, a fresh token for the shared pointer's file)."""
    token = secrets.token_hex(6)
    try:
        return os.open(path, flags, 0o666), "", token
    except OSError as exc:
        error = error_of(exc, f"Open {path}")
        return -1, f"{error.ierr}:{error.detail}", token


def _open_error(failure: str) -> MPIException:
    code, _, text = failure.partition(":")
    return MPIException(int(code), text)


FILE_NULL = File()
"""The null file handle."""
