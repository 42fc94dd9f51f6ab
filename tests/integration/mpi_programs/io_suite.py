"""MPI-IO on emucluster (run by tests/integration/test_mpi_io.py): every rank writes its part
of DIR/data.bin through explicit offsets, an interleaved view, the individual, shared and
ordered pointers, then reads it back through other views; the test checks the file's bytes
from outside. Also: EXCL, the access-mode errors, DELETE_ON_CLOSE, sizes, atomic mode, the
nonblocking and split forms. Prints "io ok RANK" at the end.

Layout of data.bin (int32 values, ``size`` ranks):
* ints [0, 4 * size): rank r's 4 values r * 100 + i at ints 4r..4r+3 (Write_at);
* ints [64, 64 + 8 * size): interleaved pairs, pair j of rank r at int 64 + 2 * (j * size + r)
  holding r * 1000 + 2j, r * 1000 + 2j + 1 (a vector view, Write_all);
* ints [256, 256 + 3 * size): rank r's three values 7000 + r at 256 + 3r (Write_ordered).
"""

import os
import sys

import numpy as np

from emucluster import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
path = os.path.join(sys.argv[1], "data.bin")
INT = MPI.INT


def expect_error(error_class, call, *args):
    raised = None
    try:
        call(*args)
    except MPI.Exception as exc:
        raised = exc.Get_error_class()
    assert raised == error_class, f"{call.__name__} raised {raised}, not {error_class}"


fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_EXCL | MPI.MODE_RDWR)
expect_error(
    MPI.ERR_FILE_EXISTS,
    MPI.File.Open,
    comm,
    path,
    MPI.MODE_CREATE | MPI.MODE_EXCL | MPI.MODE_WRONLY,
)
assert fh.Get_amode() == MPI.MODE_CREATE | MPI.MODE_EXCL | MPI.MODE_RDWR
assert fh.Get_size() == 0
assert MPI.Group.Compare(fh.Get_group(), comm.Get_group()) == MPI.IDENT

# explicit offsets, etype INT
fh.Set_view(0, INT, INT)
status = MPI.Status()
fh.Write_at(4 * rank, np.arange(4, dtype=np.int32) + 100 * rank, status)
assert status.Get_count(INT) == 4
fh.Sync()
comm.Barrier()
fh.Sync()
whole = np.zeros(4 * size + 1, dtype=np.int32)
fh.Read_at(0, whole, status)
assert status.Get_count(INT) == 4 * size  # the end of the file: one int short
assert whole[:-1].tolist() == [100 * r + i for r in range(size) for i in range(4)]

# an interleaved view: pairs of ints, every size-th pair is mine
pairs = INT.Create_vector(4, 2, 2 * size).Create_resized(0, 8 * size).Commit()
fh.Set_view(4 * (64 + 2 * rank), INT, pairs)
assert fh.Get_position() == 0
mine = np.arange(8, dtype=np.int32) + 1000 * rank
request = fh.Iwrite_all(mine)
request.Wait(status)
assert status.Get_count(INT) == 8
assert fh.Get_position() == 8
assert fh.Get_byte_offset(2) == 4 * (64 + 2 * rank + 2 * size)
fh.Seek(-2, MPI.SEEK_CUR)
tail = np.zeros(2, dtype=np.int32)
fh.Read(tail)
assert tail.tolist() == [1000 * rank + 6, 1000 * rank + 7]
fh.Sync()
comm.Barrier()
fh.Sync()

# the ordered (shared) pointer, after a plain view from int 256
fh.Set_view(4 * 256, INT, INT)
fh.Write_ordered_begin(np.full(3, 7000 + rank, dtype=np.int32))
fh.Write_ordered_end(None, status)
assert status.Get_count(INT) == 3
assert fh.Get_position_shared() == 3 * size
fh.Sync()
comm.Barrier()
fh.Seek_shared(0, MPI.SEEK_SET)
back = np.zeros(3, dtype=np.int32)
fh.Read_ordered(back)
assert back.tolist() == [7000 + rank] * 3
# the shared pointer by itself: every read gets one whole chunk, nothing twice
fh.Seek_shared(0, MPI.SEEK_SET)
chunk = np.zeros(3, dtype=np.int32)
fh.Read_shared(chunk)
assert len(set(chunk.tolist())) == 1
seen = comm.allgather(int(chunk[0]))
assert sorted(seen) == [7000 + r for r in range(size)]
fh.Seek(0, MPI.SEEK_END)
assert fh.Get_position() == 3 * size
# a collective call acting at rank 0 fails everywhere (no rank is left waiting)
expect_error(MPI.ERR_ARG, fh.Seek_shared, 0, 99)
fh.Seek_shared(-1, MPI.SEEK_END)  # from the end of the view: the last value
if rank == 0:
    fh.Read_shared(chunk[:1])
    assert chunk[0] == 7000 + size - 1, chunk
comm.Barrier()
assert fh.Get_position_shared() == 3 * size

# atomic mode, split collectives at explicit offsets, size queries
fh.Set_atomicity(True)
assert fh.Get_atomicity() is True
fh.Set_view(0, INT, INT)
first = np.zeros(1, dtype=np.int32)
fh.Read_at_all_begin(4 * rank, first)
fh.Read_at_all_end(first, status)
assert first[0] == 100 * rank
expect_error(MPI.ERR_OTHER, fh.Read_all_end, first)
fh.Set_atomicity(False)
assert fh.Get_size() == 4 * (256 + 3 * size)
fh.Close()
assert fh == MPI.FILE_NULL

# access modes: a read-only file refuses writes, a write-only one reads
ro = MPI.File.Open(comm, path, MPI.MODE_RDONLY)
expect_error(MPI.ERR_READ_ONLY, ro.Write_at, 0, np.zeros(1, dtype=np.int32))
ro.Close()
wo = MPI.File.Open(comm, path, MPI.MODE_WRONLY)
expect_error(MPI.ERR_ACCESS, wo.Read_at, 0, np.zeros(1, dtype=np.int32))
wo.Close()
expect_error(MPI.ERR_AMODE, MPI.File.Open, comm, path, MPI.MODE_RDONLY | MPI.MODE_CREATE)
expect_error(MPI.ERR_NO_SUCH_FILE, MPI.File.Open, comm, path + ".missing", MPI.MODE_RDONLY)

# a scratch file: sizes, then gone at Close
scratch = os.path.join(sys.argv[1], "scratch.bin")
fh = MPI.File.Open(comm, scratch, MPI.MODE_CREATE | MPI.MODE_WRONLY | MPI.MODE_DELETE_ON_CLOSE)
fh.Preallocate(1000)
assert fh.Get_size() == 1000
fh.Preallocate(10)
assert fh.Get_size() == 1000
fh.Set_size(10)
assert fh.Get_size() == 10
fh.Write_shared(bytes([rank]) * 5)
comm.Barrier()
assert fh.Get_position_shared() == 5 * size
fh.Close()
comm.Barrier()
assert not os.path.exists(scratch)
assert sorted(os.listdir(sys.argv[1])) == ["data.bin"]  # no shared-pointer file left
print(f"io ok {rank}")
