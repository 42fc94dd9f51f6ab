"""The data access calls of ``MPI.File`` (MPI 4.0 sec. 14.4): reads and writes at explicit
offsets, at the individual file pointer and at the shared one, each blocking, nonblocking,
collective and split collective.

Every access moves the bytes of a message spec (packed when its datatype is not contiguous)
to or from the view's file ranges (`FileView.extents`) with ``pwrite``/``preadv``; a read that
meets the end of the file stops there, and its status counts what was read. Nonblocking
calls do their work before they return a complete request (the data are in the file, or in
the buffer, already: an allowed schedule, and no progress is owed later). Collective calls
need no exchange except the ordered ones, which agree on each process's place after the
shared pointer in rank order (a gather of the sizes at rank 0, which advances the pointer, and
a broadcast of the places); a split collective does its work at ``_begin`` and reports it at
``_end``, one at a time per file. A call that needs the size first parses its buffer once.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from emucluster.mpi.buffer.spec import Msg, message
from emucluster.mpi.constants import ANY_SOURCE, ANY_TAG, MODE_RDONLY, MODE_SEQUENTIAL, MODE_WRONLY
from emucluster.mpi.errors import ERR_ACCESS, ERR_OTHER, ERR_READ_ONLY, ERR_UNSUPPORTED_OPERATION
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.io.state import error_of
from emucluster.mpi.request.pending import Completed
from emucluster.mpi.request.request import Request

if TYPE_CHECKING:
    from emucluster.mpi.io.state import FileState
    from emucluster.mpi.request.status import Status

__all__ = ["FileAccess"]


class _Done(Completed):
    """A file access already complete: its status counts ``nbytes``."""

    __slots__ = ("nbytes",)

    def __init__(self, nbytes: int) -> None:
        super().__init__(None, ANY_SOURCE)
        self.nbytes = nbytes

    def finish(self, status: Status | None) -> object:
        if status is not None:
            status.set(ANY_SOURCE, ANY_TAG, self.nbytes)
        return None


def _fill(status: Status | None, nbytes: int) -> None:
    if status is not None:
        status.set(ANY_SOURCE, ANY_TAG, nbytes)


class FileAccess:
    """The data access calls of one file (``File`` delegates here)."""

    __slots__ = ("_st",)

    def __init__(self, file: Any) -> None:
        self._st: FileState = file._state()

    # -- the two movements -----------------------------------------------------------------

    def _write(self, stream_etype: int, buf: Any) -> int:
        st = self._st
        if st.amode & MODE_RDONLY:
            raise MPIException(ERR_READ_ONLY, "write to a file opened MODE_RDONLY")
        data = (buf if isinstance(buf, Msg) else message(buf, writable=False)).view
        extents = st.view.extents(stream_etype * st.view.esize, len(data))
        span = st.lock(extents, exclusive=True)
        st.dirty = st.dirty or bool(extents)
        try:
            done = 0
            for at, length in extents:
                end = done + length
                while done < end:
                    done += os.pwrite(st.fd, data[done:end], at + done - (end - length))
        except OSError as exc:
            raise error_of(exc, "write") from None
        finally:
            st.unlock(span)
        return len(data)

    def _read(self, stream_etype: int, buf: Any) -> int:
        st = self._st
        if st.amode & MODE_WRONLY:
            raise MPIException(ERR_ACCESS, "read from a file opened MODE_WRONLY")
        msg = buf if isinstance(buf, Msg) else message(buf, writable=True, staged=True)
        extents = st.view.extents(stream_etype * st.view.esize, len(msg.view))
        span = st.lock(extents, exclusive=False)
        done = 0
        try:
            for at, length in extents:
                got = os.preadv(st.fd, [msg.view[done : done + length]], at)
                done += got
                if got < length:  # the end of the file
                    break
        except OSError as exc:
            raise error_of(exc, "read") from None
        finally:
            st.unlock(span)
        if msg.deliver is not None:
            msg.deliver(done)
        return done

    def _explicit(self, what: str) -> None:
        if self._st.amode & MODE_SEQUENTIAL:
            raise MPIException(
                ERR_UNSUPPORTED_OPERATION,
                f"{what}: a MODE_SEQUENTIAL file has only a shared pointer",
            )

    def _advance(self, nbytes: int) -> int:
        """The individual pointer before, moved past ``nbytes``."""
        st = self._st
        before = st.position
        st.position += nbytes // st.view.esize
        return before

    # -- explicit offsets ------------------------------------------------------------------

    def Read_at(self, offset: int, buf: Any, status: Status | None = None) -> None:
        """Read at ``offset`` (etypes of the view)."""
        self._explicit("Read_at")
        _fill(status, self._read(offset, buf))

    def Write_at(self, offset: int, buf: Any, status: Status | None = None) -> None:
        """Write at ``offset`` (etypes of the view)."""
        self._explicit("Write_at")
        _fill(status, self._write(offset, buf))

    def Read_at_all(self, offset: int, buf: Any, status: Status | None = None) -> None:
        """Read at ``offset`` (collective)."""
        self.Read_at(offset, buf, status)

    def Write_at_all(self, offset: int, buf: Any, status: Status | None = None) -> None:
        """Write at ``offset`` (collective)."""
        self.Write_at(offset, buf, status)

    def Iread_at(self, offset: int, buf: Any) -> Request:
        """Nonblocking Read_at."""
        self._explicit("Iread_at")
        return Request._of(_Done(self._read(offset, buf)), None)

    def Iwrite_at(self, offset: int, buf: Any) -> Request:
        """Nonblocking Write_at."""
        self._explicit("Iwrite_at")
        return Request._of(_Done(self._write(offset, buf)), None)

    def Iread_at_all(self, offset: int, buf: Any) -> Request:
        """Nonblocking Read_at_all."""
        return self.Iread_at(offset, buf)

    def Iwrite_at_all(self, offset: int, buf: Any) -> Request:
        """Nonblocking Write_at_all."""
        return self.Iwrite_at(offset, buf)

    # -- the individual file pointer -------------------------------------------------------

    def _read_here(self, buf: Any) -> int:
        self._explicit("Read at the individual pointer")
        nbytes = self._read(self._st.position, buf)
        self._advance(nbytes)
        return nbytes

    def _write_here(self, buf: Any) -> int:
        self._explicit("Write at the individual pointer")
        nbytes = self._write(self._st.position, buf)
        self._advance(nbytes)
        return nbytes

    def Read(self, buf: Any, status: Status | None = None) -> None:
        """Read at the individual file pointer, and advance it."""
        _fill(status, self._read_here(buf))

    def Write(self, buf: Any, status: Status | None = None) -> None:
        """Write at the individual file pointer, and advance it."""
        _fill(status, self._write_here(buf))

    def Read_all(self, buf: Any, status: Status | None = None) -> None:
        """Read at the individual file pointer (collective)."""
        _fill(status, self._read_here(buf))

    def Write_all(self, buf: Any, status: Status | None = None) -> None:
        """Write at the individual file pointer (collective)."""
        _fill(status, self._write_here(buf))

    def Iread(self, buf: Any) -> Request:
        """Nonblocking Read."""
        return Request._of(_Done(self._read_here(buf)), None)

    def Iwrite(self, buf: Any) -> Request:
        """Nonblocking Write."""
        return Request._of(_Done(self._write_here(buf)), None)

    def Iread_all(self, buf: Any) -> Request:
        """Nonblocking Read_all."""
        return self.Iread(buf)

    def Iwrite_all(self, buf: Any) -> Request:
        """Nonblocking Write_all."""
        return self.Iwrite(buf)

    # -- the shared file pointer -----------------------------------------------------------

    def _shared(self, buf: Any, write: bool) -> int:
        st = self._st
        msg = message(buf, writable=not write, staged=True)
        try:
            start = st.shared.fetch_add(len(msg.view) // st.view.esize)
        except OSError as exc:
            raise error_of(exc, "shared file pointer") from None
        return self._write(start, msg) if write else self._read(start, msg)

    def Read_shared(self, buf: Any, status: Status | None = None) -> None:
        """Read at the shared file pointer, and advance it."""
        _fill(status, self._shared(buf, write=False))

    def Write_shared(self, buf: Any, status: Status | None = None) -> None:
        """Write at the shared file pointer, and advance it."""
        _fill(status, self._shared(buf, write=True))

    def Iread_shared(self, buf: Any) -> Request:
        """Nonblocking Read_shared."""
        return Request._of(_Done(self._shared(buf, write=False)), None)

    def Iwrite_shared(self, buf: Any) -> Request:
        """Nonblocking Write_shared."""
        return Request._of(_Done(self._shared(buf, write=True)), None)

    def _ordered(self, buf: Any, write: bool) -> int:
        """Collective: the group's accesses one after the other in rank order from the
        shared pointer, which ends past all of them."""
        st = self._st
        msg = message(buf, writable=not write, staged=True)

        def place(counts: list[int]) -> list[int]:  # at rank 0: where each process starts
            try:
                start = st.shared.fetch_add(sum(counts))
            except OSError as exc:
                raise error_of(exc, "shared file pointer") from None
            return [start + sum(counts[:rank]) for rank in range(len(counts))]

        start = st.gathered_at_root(len(msg.view) // st.view.esize, place)[st.rank]
        return self._write(start, msg) if write else self._read(start, msg)

    def Read_ordered(self, buf: Any, status: Status | None = None) -> None:
        """Read in rank order at the shared pointer (collective)."""
        _fill(status, self._ordered(buf, write=False))

    def Write_ordered(self, buf: Any, status: Status | None = None) -> None:
        """Write in rank order at the shared pointer (collective)."""
        _fill(status, self._ordered(buf, write=True))

    # -- split collectives -----------------------------------------------------------------

    def _begin(self, name: str, nbytes: int) -> None:
        st = self._st
        if st.split is not None:
            raise MPIException(ERR_OTHER, f"{name}_begin: {st.split[0]}_begin has not ended")
        st.split = (name, nbytes)

    def _end(self, name: str, status: Status | None) -> None:
        st = self._st
        if st.split is None or st.split[0] != name:
            begun = "none" if st.split is None else f"{st.split[0]}_begin"
            raise MPIException(ERR_OTHER, f"{name}_end: the split collective begun is {begun}")
        _fill(status, st.split[1])
        st.split = None

    def Read_at_all_begin(self, offset: int, buf: Any) -> None:
        """Begin a split Read_at_all."""
        self._explicit("Read_at_all_begin")
        self._begin("Read_at_all", self._read(offset, buf))

    def Read_at_all_end(self, buf: Any, status: Status | None = None) -> None:
        """End it."""
        self._end("Read_at_all", status)

    def Write_at_all_begin(self, offset: int, buf: Any) -> None:
        """Begin a split Write_at_all."""
        self._explicit("Write_at_all_begin")
        self._begin("Write_at_all", self._write(offset, buf))

    def Write_at_all_end(self, buf: Any, status: Status | None = None) -> None:
        """End it."""
        self._end("Write_at_all", status)

    def Read_all_begin(self, buf: Any) -> None:
        """Begin a split Read_all."""
        self._begin("Read_all", self._read_here(buf))

    def Read_all_end(self, buf: Any, status: Status | None = None) -> None:
        """End it."""
        self._end("Read_all", status)

    def Write_all_begin(self, buf: Any) -> None:
        """Begin a split Write_all."""
        self._begin("Write_all", self._write_here(buf))

    def Write_all_end(self, buf: Any, status: Status | None = None) -> None:
        """End it."""
        self._end("Write_all", status)

    def Read_ordered_begin(self, buf: Any) -> None:
        """Begin a split Read_ordered."""
        self._begin("Read_ordered", self._ordered(buf, write=False))

    def Read_ordered_end(self, buf: Any, status: Status | None = None) -> None:
        """End it."""
        self._end("Read_ordered", status)

    def Write_ordered_begin(self, buf: Any) -> None:
        """Begin a split Write_ordered."""
        self._begin("Write_ordered", self._ordered(buf, write=True))

    def Write_ordered_end(self, buf: Any, status: Status | None = None) -> None:
        """End it."""
        self._end("Write_ordered", status)
