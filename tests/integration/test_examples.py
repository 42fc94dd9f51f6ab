"""The MPI examples of examples/ run through emurun and print what their docstrings promise."""

from __future__ import annotations

import json

import pytest

from tests.integration.mpirun import EXAMPLES, mpirun

pytestmark = pytest.mark.slow


def test_quick_start_demo() -> None:
    result = mpirun(4, EXAMPLES / "demo.py")
    assert result.code == 0, result.err
    assert len(result.lines("hello from rank")) == 4
    assert "checksum 786432 (expected 786432)" in result.out
    assert "ping-pong, ranks 0-1" in result.out


def test_hello() -> None:
    result = mpirun(3, EXAMPLES / "hello.py")
    assert result.code == 0, result.err
    assert result.lines("Hello") == [f"Hello from rank {r} of 3 on vm-node{r}" for r in range(3)]


def test_ring() -> None:
    result = mpirun(3, EXAMPLES / "ring.py")
    assert result.code == 0, result.err
    assert "count 30 (expected 30)" in result.out


def test_pi() -> None:
    result = mpirun(3, EXAMPLES / "pi.py", "20000")
    assert result.code == 0, result.err
    (line,) = result.lines("pi is approximately")
    assert float(line.split()[3].rstrip(",")) == pytest.approx(3.14159265, abs=1e-8)


def test_allreduce_numpy_and_stencil_with_faults() -> None:
    """Rendezvous-sized Allreduce and the Sendrecv stencil, datagrams lost and duplicated."""
    faults = ("--loss", "0.05", "--dup", "0.05", "--fault-seed", "7")
    numpy_run = mpirun(3, EXAMPLES / "allreduce_numpy.py", emurun_args=faults)
    assert numpy_run.code == 0, numpy_run.err
    assert "sum of ranks in every element: 3; max ok" in numpy_run.out
    assert "maxloc: value 2 at rank" in numpy_run.out
    stencil = mpirun(3, EXAMPLES / "stencil.py", emurun_args=faults)
    assert stencil.code == 0, stencil.err
    assert "total heat" in stencil.out


def test_columns_vector_datatype_and_v_collectives() -> None:
    """Uneven blocks: Gatherv, a strided column sent as a vector datatype, Alltoallv."""
    result = mpirun(3, EXAMPLES / "columns.py")
    assert result.code == 0, result.err
    assert "Gatherv: 37x11 from row blocks [13, 12, 12]" in result.out
    assert "vector datatype: 3 strided columns received" in result.out
    assert "Alltoallv: column blocks [4, 4, 3] checked on 3 ranks" in result.out
    assert "columns: OK" in result.out


def test_skew_cpu_measures_both_reduces_with_the_host_clock() -> None:
    """The user-level skew program: CPU of each variant through a sleeping catch-up."""
    result = mpirun(4, EXAMPLES / "skew_cpu.py", "--skew-us", "300", "--iters", "4",
                    "--warmup", "1")  # fmt: skip
    assert result.code == 0, result.err
    [line] = [line for line in result.out.splitlines() if line.startswith("{")]
    figures = json.loads(line)
    assert figures["nodes"] == 4
    assert figures["clock"] == "host"
    assert set(figures["cpu_us"]) == {"binomial", "app-bypass"}
    assert all(us > 0 for us in figures["cpu_us"].values())
    assert figures["factor"] > 0
    assert figures["bound_us"] > 0  # the catch-up's bound, measured by the program


@pytest.mark.parametrize(("method", "offload"), [("mcast", "nic-mcast"), ("nicvm", "nicvm")])
def test_bcast_skew_cpu_measures_both_broadcasts(method: str, offload: str) -> None:
    """The user-level broadcast skew program: both variants run, deliver and are measured."""
    result = mpirun(4, EXAMPLES / "bcast_skew_cpu.py", "--method", method, "--avg-skew-us", "50",
                    "--skew-us", "150", "--iters", "3", "--warmup", "1")  # fmt: skip
    assert result.code == 0, result.err
    [line] = [line for line in result.out.splitlines() if line.startswith("{")]
    figures = json.loads(line)
    assert figures["method"] == method
    assert figures["nodes"] == 4
    assert set(figures["cpu_us"]) == {"binomial", offload}
    assert all(us > 0 for us in figures["cpu_us"].values())
    assert figures["factor"] > 0


def test_mpi4py_util_example_runs_unmodified_under_the_shim() -> None:
    """mpi4py's own pkl5 and dtlib (the installed mpi4py package) over emucluster.MPI."""
    result = mpirun(3, EXAMPLES / "mpi4py_util.py", emurun_args=("--mpi4py",))
    assert result.code == 0, result.err
    assert result.lines("mpi4py.util ok") == [f"mpi4py.util ok {r} of 3" for r in range(3)]


def test_mpi4py_futures_example_runs_as_a_shared_pool() -> None:
    """``emurun -np 4 --mpi4py python -m mpi4py.futures app.py``: rank 0 runs the program,
    ranks 1-3 serve as its pool over an intercommunicator."""
    result = mpirun(4, "-m", "mpi4py.futures", str(EXAMPLES / "mpi4py_futures.py"),
                    emurun_args=("--mpi4py",))  # fmt: skip
    assert result.code == 0, result.err
    assert result.lines("mpi4py.futures ok") == ["mpi4py.futures ok: 40 results"]


def test_mpi4py_futures_spawn_example_starts_its_workers_as_new_nodes() -> None:
    """``emurun -np 1 --mpi4py python examples/mpi4py_futures_spawn.py``: MPIPoolExecutor
    spawns 2 workers (new nodes joined to the fabric), maps over them, shuts them down."""
    result = mpirun(1, EXAMPLES / "mpi4py_futures_spawn.py", emurun_args=("--mpi4py",))
    assert result.code == 0, result.err
    assert result.lines("mpi4py.futures spawn ok") == [
        "mpi4py.futures spawn ok: 40 results from 2 spawned nodes"
    ]


def test_python_dash_m_mpi4py_runs_and_a_failing_rank_sets_the_exit_code() -> None:
    """``python -m mpi4py -c CODE`` (mpi4py.run, from the installed mpi4py) under the shim: rank
    1 ends with status 5 while rank 0 waits in a barrier; the job stops with 5, never hangs."""
    code = (
        "from mpi4py import MPI\n"
        "if MPI.COMM_WORLD.rank == 1:\n    raise SystemExit(5)\n"
        "MPI.COMM_WORLD.Barrier()\n"
    )
    result = mpirun(2, "-m", "mpi4py", "-c", code, emurun_args=("--mpi4py",))
    assert result.code == 5, result.err
