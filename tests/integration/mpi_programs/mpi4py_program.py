"""An unmodified mpi4py program (it imports mpi4py, not emucluster): run by
tests/integration/test_mpi4py_shim.py under ``emurun --mpi4py``. Exercises what issue 15
names for point-to-point: matched probe, persistent requests, attached buffers and Bsend,
cancel of a pending receive, Status copies, Get_status_all, a subclassed Intracomm."""

import sys

from mpi4py import MPI

assert MPI.get_vendor()[0] == "emucluster", MPI.get_vendor()


class MyComm(MPI.Intracomm):
    def __new__(cls, comm=None):
        if comm is not None and comm != MPI.COMM_NULL:
            comm = comm.Dup()
        return super().__new__(cls, comm)


comm = MyComm(MPI.COMM_WORLD)
assert type(comm) is MyComm
assert comm != MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

# matched probe: claim the message, then receive it into a buffer of the probed size
comm.Send(bytes([rank]) * (rank + 5), right, tag=7)
status = MPI.Status()
msg = comm.Mprobe(left, 7, status)
buf = bytearray(status.Get_count(MPI.BYTE))
msg.Recv(buf)
assert buf == bytes([left]) * (left + 5), buf
assert not msg

# persistent requests, started three times
sbuf, rbuf = bytearray(8), bytearray(8)
sreq, rreq = comm.Send_init(sbuf, right, 3), comm.Recv_init(rbuf, left, 3)
for round_ in range(3):
    sbuf[:] = bytes([round_ * 10 + rank]) * 8
    MPI.Prequest.Startall([sreq, rreq])
    MPI.Request.Waitall([sreq, rreq])
    assert rbuf == bytes([round_ * 10 + left]) * 8, rbuf
    assert sreq  # persistent: still alive after completion
    assert rreq
sreq.Free()
rreq.Free()

# buffered send from an attached buffer; Detach waits for it to leave
mem = MPI.Alloc_mem(1 << 12)
MPI.Attach_buffer(mem)
comm.bsend({"from": rank}, right, tag=4)
assert comm.recv(source=left, tag=4) == {"from": left}
MPI.Detach_buffer()

# cancel of a receive that nobody will match
req = comm.irecv(source=left, tag=99)
req.Cancel()
status = MPI.Status()
req.Wait(status)
assert status.Is_cancelled()

# Status copy and memory view
copy = MPI.Status(status)
copy.tomemory()[1] = 1234
assert copy.tag == 1234
assert status.tag != 1234

# Get_status_all does not complete the requests
reqs = [comm.isend(rank, right, tag=5), comm.irecv(source=left, tag=5)]
while not MPI.Request.Get_status_all(reqs):
    pass
assert all(reqs)
assert MPI.Request.waitall(reqs)[1] == left

# a missing file is an MPI error of its own class, on every rank
try:
    MPI.File.Open(comm, "/tmp/nothing-such-file-here")
except MPI.Exception as exc:
    if exc.Get_error_class() != MPI.ERR_NO_SUCH_FILE:
        sys.exit(f"File.Open of a missing file raised {exc}")
else:
    sys.exit("File.Open of a missing file did not raise")

comm.Free()
print(f"mpi4py ok {rank}")
