"""NICVM through MPI: Fig 4.3's broadcast from every root and size, the module API, safety.

Run under emurun (any -np >= 1); prints ``nicvm ok <rank>`` when every check passed.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from emucluster import MPI, nicvm
from emucluster.offload.nicvm.bcast import MODULE_NAME

if TYPE_CHECKING:
    from collections.abc import Callable

LOOP = """\
func main()
    var i;
    while 1 do
        i = i + 1;
    end while;
    return NICVM_RESULT_SUCCESS;
end func;
"""
BAD = """\
func main()
    var x;
    x = y + 1;
    return NICVM_RESULT_SUCCESS;
end func;
"""


E = TypeVar("E", bound=Exception)


def _raises(kind: type[E], call: Callable[[], object]) -> E:
    try:
        call()
    except kind as exc:
        return exc
    raise AssertionError(f"{call} did not raise {kind.__name__}")


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    # Fig 4.3 broadcast: every root, pickled objects and buffers, small to past the module path.
    for root in range(size):
        for n in (0, 1, 100, 4096, 20000):
            obj = {"root": root, "data": bytes(range(256)) * (n // 256) + b"x" * (n % 256)}
            got = comm.bcast(obj if rank == root else None, root=root, algorithm="nicvm")
            assert got == obj, (root, n)
        buf = np.arange(1000, dtype="f8") * (root + 1) if rank == root else np.zeros(1000)
        comm.Bcast(buf, root=root, algorithm="nicvm")
        assert np.array_equal(buf, np.arange(1000, dtype="f8") * (root + 1)), root
    big = np.arange(20000, dtype="f8") if rank == 0 else np.zeros(20000)  # 160 kB: fallback
    comm.Bcast(big, root=0, algorithm="nicvm")
    assert np.array_equal(big, np.arange(20000, dtype="f8"))
    loaded = nicvm.modules()
    assert MODULE_NAME in loaded, loaded
    assert loaded[MODULE_NAME]["invocations"] > 0, loaded[MODULE_NAME]
    # A bad module is refused by the NIC's compiler with its position.
    refused = _raises(nicvm.NicvmError, lambda: nicvm.client().load("bad", BAD, precheck=False))
    assert (refused.line, refused.column) == (3, 9), (refused.line, refused.column, str(refused))
    # A looping module runs out of fuel: delegate fails in bounded time, nicd keeps serving.
    nicvm.load("loop", LOOP)
    start = time.monotonic()
    stopped = _raises(nicvm.NicvmRunError, lambda: nicvm.delegate("loop", b"abc", timeout=10.0))
    assert stopped.outcome == "out_of_fuel", stopped.outcome
    assert time.monotonic() - start < 10.0
    nicvm.purge("loop")
    assert "loop" not in nicvm.modules()
    got = comm.bcast("after" if rank == 0 else None, root=0, algorithm="nicvm")
    assert got == "after"
    comm.Barrier()
    print(f"nicvm ok {rank}", flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
