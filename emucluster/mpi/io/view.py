"""A file view: which bytes of a file a process sees, in what order (MPI 4.0 sec. 14.3).

The view is the file type tiled from byte ``disp`` on: tile k's runs lie at ``disp + k *
extent + run displacement``, and the process sees their bytes in type-map order, one tile
after the other: the *visible stream*. Offsets and file pointers count etypes of that stream.
`FileView.extents` turns a range of the stream into the file's byte ranges (adjacent ones
merged); `visible_before` counts the stream's bytes that lie before a file position (for
``SEEK_END``). Pure: no file is touched here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emucluster.mpi.errors import ERR_ARG, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from emucluster.mpi.datatype.datatype import Datatype

__all__ = ["FileView"]


class FileView:
    """One process's view of an open file."""

    __slots__ = ("_ends", "_starts", "datarep", "disp", "esize", "etype", "filetype",
                 "tile_extent", "tile_size")  # fmt: skip

    def __init__(self, disp: int, etype: Datatype, filetype: Datatype, datarep: str) -> None:
        if disp < 0:
            raise MPIException(ERR_ARG, f"Set_view: displacement {disp} is negative")
        self.esize = etype.Get_size()
        self.tile_size = filetype.Get_size()
        if self.esize <= 0 or self.tile_size % self.esize:
            raise MPIException(
                ERR_TYPE,
                f"Set_view: the file type ({self.tile_size} bytes) is not made of whole etypes "
                f"({self.esize} bytes)",
            )
        self.tile_extent = filetype.Get_extent()[1]
        if self.tile_size and self.tile_extent <= 0:
            raise MPIException(ERR_TYPE, "Set_view: the file type's extent must be positive")
        self.disp, self.etype, self.filetype, self.datarep = disp, etype, filetype, datarep
        typemap = filetype.typemap
        lengths = typemap.run_bytes()
        self._starts: np.ndarray = typemap.disps.astype(np.int64)
        """File displacement of each run in a tile, relative to the tile's origin."""
        self._ends: np.ndarray = np.cumsum(lengths)
        """Visible bytes of a tile up to the end of each run."""

    @property
    def contiguous(self) -> bool:
        """Whether the stream is the file itself from ``disp`` on (one extent per access)."""
        return (
            len(self._starts) == 1
            and int(self._starts[0]) == 0
            and (self.tile_extent == self.tile_size)
        )

    def extents(self, start: int, nbytes: int) -> list[tuple[int, int]]:
        """The file's (offset, length) ranges holding stream bytes ``[start, start +
        nbytes)``, in stream order, adjacent ranges merged."""
        if nbytes <= 0:
            return []
        if self.contiguous:
            return [(self.disp + start, nbytes)]
        out: list[tuple[int, int]] = []
        tile, within = divmod(start, self.tile_size)
        left = nbytes
        while left:
            run = int(np.searchsorted(self._ends, within, side="right"))
            run_begin = int(self._ends[run - 1]) if run else 0
            offset_in_run = within - run_begin
            length = min(int(self._ends[run]) - within, left)
            at = self.disp + tile * self.tile_extent + int(self._starts[run]) + offset_in_run
            if out and out[-1][0] + out[-1][1] == at:
                out[-1] = (out[-1][0], out[-1][1] + length)
            else:
                out.append((at, length))
            left -= length
            within += length
            if within == self.tile_size:
                tile, within = tile + 1, 0
        return out

    def byte_offset(self, offset: int) -> int:
        """The file position of the stream's etype ``offset`` (``File.Get_byte_offset``)."""
        if self.contiguous or not self.tile_size:
            return self.disp + offset * self.esize
        tile, within = divmod(offset * self.esize, self.tile_size)
        run = int(np.searchsorted(self._ends, within, side="right"))
        run_begin = int(self._ends[run - 1]) if run else 0
        return self.disp + tile * self.tile_extent + int(self._starts[run]) + within - run_begin

    def visible_before(self, position: int) -> int:
        """Stream bytes that lie in the file before byte ``position``."""
        if position <= self.disp or not self.tile_size:
            return 0
        if self.contiguous:
            return position - self.disp
        lengths = np.diff(self._ends, prepend=0)
        reach = position - self.disp - self._starts  # how far each run's tile-0 copy is passed
        whole = np.where(reach >= lengths, (reach - lengths) // self.tile_extent + 1, 0)
        partial = np.clip(reach - whole * self.tile_extent, 0, lengths)
        return int((whole * lengths + partial).sum())
