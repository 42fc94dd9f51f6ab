"""mpi4py.util on emucluster, unmodified: ``emurun -np 3 --mpi4py python examples/mpi4py_util.py``.

* ``mpi4py.util.pkl5``: pickle protocol 5 with out-of-band buffers, so a large numpy array
  travels as its own message next to its pickle (``send``/``recv``, ``isend``/``irecv``,
  matched probes, ``bcast``);
* ``mpi4py.util.dtlib``: numpy dtypes to MPI datatypes and back, here a struct sent with
  ``Send``/``Recv``.

Each rank prints one line; any wrong value stops the program with an assertion.
"""

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib, pkl5

comm = pkl5.Intracomm(MPI.COMM_WORLD)
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

# a 4 MiB array around the ring, out of band
big = np.arange(1 << 19, dtype=np.float64) * (rank + 1)
request = comm.isend({"from": rank, "data": big}, dest=right, tag=11)
got = comm.recv(source=left, tag=11)
request.wait()
assert got["from"] == left
assert np.array_equal(got["data"], np.arange(1 << 19, dtype=np.float64) * (left + 1))

# a matched probe, then the matched receive
comm.send([rank] * 1000, dest=right, tag=12)
message = comm.mprobe(source=left, tag=12)
assert message.recv() == [left] * 1000

# a broadcast of a pickle with buffers
table = comm.bcast(np.ones((256, 256)) if rank == 0 else None, root=0)
assert table.shape == (256, 256)
assert table.sum() == 256 * 256

# a numpy structured dtype as an MPI struct datatype
particle = np.dtype([("x", "f8"), ("y", "f8"), ("id", "i4")], align=True)
datatype = dtlib.from_numpy_dtype(particle).Commit()
back = dtlib.to_numpy_dtype(datatype)  # MPI types keep no field names: f0, f1, f2
assert [back.fields[n][:2] for n in back.names] == [particle.fields[n][:2] for n in particle.names]
assert back.itemsize == particle.itemsize == datatype.extent
outgoing = np.zeros(8, dtype=particle)
outgoing["x"], outgoing["id"] = rank, np.arange(8) + 100 * rank
incoming = np.empty(8, dtype=particle)
MPI.COMM_WORLD.Sendrecv([outgoing, datatype], right, 13, [incoming, datatype], left, 13)
assert (incoming["x"] == left).all()
assert (incoming["id"] == np.arange(8) + 100 * left).all()
datatype.Free()

print(f"mpi4py.util ok {rank} of {size}")
