"""Processes started at run time, for real: emurun starts new nodes (nicd + host) when a rank
calls ``Comm.Spawn``, joins them to the running fabric, and the two groups talk over an
intercommunicator; ports and names connect two groups of one job; a command that cannot start
is an MPI error; a failing spawned rank stops the job; nothing of the job is left afterwards,
with the fork server and without.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import psutil  # type: ignore[import-untyped,unused-ignore]
import pytest

from launcher.cleanup import job_processes
from tests.integration.test_orphans import GONE_S, wait_gone

if TYPE_CHECKING:
    from pathlib import Path

    from tests.integration.test_emurun import Job

pytestmark = pytest.mark.slow

TIMEOUT = "150"

SPAWN = textwrap.dedent("""
    import os, sys, time
    from emucluster import MPI
    world, parent = MPI.COMM_WORLD, MPI.Comm.Get_parent()
    if parent == MPI.COMM_NULL:
        rank = world.Get_rank()
        errcodes = []
        inter = world.Spawn(sys.executable, [__file__], maxprocs=2, root=0, errcodes=errcodes)
        assert inter.Get_size() == world.Get_size() and inter.Get_remote_size() == 2
        if rank == 0:
            assert errcodes == [MPI.SUCCESS] * 2, errcodes
        for child in range(2):
            if child % world.Get_size() == rank:
                inter.send(("to child", child), dest=child, tag=1)
        answers = [inter.recv(source=c, tag=2) for c in range(2) if c % world.Get_size() == rank]
        print("parent", rank, "got", sorted(a[0] for a in answers), flush=True)
        merged = inter.Merge(high=False)
        total = merged.allreduce(merged.Get_rank())
        print("parent merged", merged.Get_rank(), merged.Get_size(), total, flush=True)
        pids = [a[1] for a in answers]
        inter.Disconnect()
        deadline = time.monotonic() + 60
        while any(os.path.exists(f"/proc/{p}") for p in pids):  # the children exit...
            assert time.monotonic() < deadline, "a child did not exit"
            time.sleep(0.05)
        world.Barrier()  # ...and the parents go on
        print("parent", rank, "continues", flush=True)
    else:
        rank = world.Get_rank()
        assert world.Get_size() == 2
        got = parent.recv(source=rank % parent.Get_remote_size(), tag=1)
        assert got == ("to child", rank), got
        parent.send((rank, os.getpid()), dest=rank % parent.Get_remote_size(), tag=2)
        merged = parent.Merge(high=True)
        merged.allreduce(merged.Get_rank())
        parent.Disconnect()
        assert MPI.Comm.Get_parent() == MPI.COMM_NULL
        print("child", rank, "of", world.Get_size(), "done", flush=True)
""")

PORTS = textwrap.dedent("""
    import os, socket, sys, time
    from emucluster import MPI
    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    group = world.Split(rank // 2, rank)
    if rank == 0:
        port = MPI.Open_port()
        MPI.Publish_name("svc", port)
    world.Barrier()
    if rank < 2:
        inter = group.Accept(port if rank == 0 else None, root=0)
    else:
        inter = group.Connect(MPI.Lookup_name("svc") if rank == 2 else None, root=0)
    peer = group.Get_rank()
    inter.send(("from", rank), dest=peer, tag=3)
    print("ports", rank, "got", inter.recv(source=peer, tag=3), flush=True)
    merged = inter.Merge(high=rank >= 2)
    print("ports merged", rank, merged.Get_rank(), merged.allreduce(1), flush=True)
    inter.Disconnect()
    if rank == 0:
        MPI.Unpublish_name("svc", port)
        MPI.Close_port(port)
    # Join: ranks 1 and 3 over a Unix socket
    path = os.path.join(os.environ["EMU_RUN_DIR"], "join.sock")
    if rank == 1:
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        server.listen(1)
    world.Barrier()
    if rank in (1, 3):
        if rank == 1:
            sock, _ = server.accept()
        else:
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(path)
        joined = MPI.Comm.Join(sock.fileno())
        joined.send(rank, dest=0, tag=4)
        print("joined", rank, "with", joined.recv(source=0, tag=4), flush=True)
        joined.Disconnect()
        sock.close()
""")

MISSING = textwrap.dedent("""
    from emucluster import MPI
    errcodes = []
    try:
        MPI.COMM_WORLD.Spawn("no-such-command-here", maxprocs=2, errcodes=errcodes)
    except MPI.Exception as exc:
        rank = MPI.COMM_WORLD.Get_rank()
        assert exc.Get_error_class() == MPI.ERR_SPAWN, exc
        assert errcodes == ([MPI.ERR_SPAWN] * 2 if rank == 0 else []), errcodes
        print("refused", rank, "no-such-command-here" in str(exc), flush=True)
    MPI.COMM_WORLD.Barrier()
""")

LATE = textwrap.dedent("""
    import os, sys, time
    flag = os.path.join(os.environ["EMU_RUN_DIR"], "children-spawned")
    rank = int(os.environ["EMU_RANK"])
    if rank == 2 and "EMU_PARENT" not in os.environ:  # initialises MPI only once the others
        deadline = time.monotonic() + 120             # have spawned: its NIC knows 5 nodes
        while not os.path.exists(flag):
            assert time.monotonic() < deadline, "ranks 0 and 1 did not spawn"
            time.sleep(0.05)
    from emucluster import MPI
    world, parent = MPI.COMM_WORLD, MPI.Comm.Get_parent()
    if parent != MPI.COMM_NULL:
        parent.Barrier()
        parent.Disconnect()
    else:
        if rank < 2:
            child = MPI.COMM_SELF.Spawn(sys.executable, [__file__], maxprocs=1)
            child.Barrier()
            child.Disconnect()
            open(f"{flag}.{rank}", "w").close()
            if rank == 0:  # both have spawned: let rank 2 in
                deadline = time.monotonic() + 120
                while not os.path.exists(f"{flag}.1"):
                    assert time.monotonic() < deadline, "rank 1 did not spawn"
                    time.sleep(0.05)
                open(flag, "w").close()
        size = world.Get_size()
        if size != 3:  # fail at once rather than hang in the Barrier below
            raise SystemExit(f"rank {rank}: a COMM_WORLD of {size}")
        world.Barrier()
        total = world.allreduce(1)
        print("rank", rank, "world", size, total, flush=True)
""")

FAILING = textwrap.dedent("""
    import sys
    from emucluster import MPI
    parent = MPI.Comm.Get_parent()
    if parent == MPI.COMM_NULL:
        inter = MPI.COMM_WORLD.Spawn(sys.executable, [__file__], maxprocs=2)
        inter.Barrier()  # never completes: child 1 fails; the job stops
    elif MPI.COMM_WORLD.Get_rank() == 1:
        raise SystemExit(3)
    else:
        parent.Barrier()
""")


SLEEPING = textwrap.dedent("""
    import os, sys, time
    from emucluster import MPI
    parent = MPI.Comm.Get_parent()
    if parent == MPI.COMM_NULL:
        MPI.COMM_WORLD.Spawn(sys.executable, [__file__], maxprocs=2)
        print("ready", 0, os.getpid(), flush=True)
    else:
        print("ready", 1 + MPI.COMM_WORLD.Get_rank(), os.getpid(), flush=True)
    time.sleep(3600)
""")


def _program(tmp_path: Path, text: str) -> str:
    path = tmp_path / "prog.py"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("forkserver", [True, False])
@pytest.mark.parametrize("parents", [1, 2])
def test_spawned_children_talk_both_ways_merge_exit_and_the_parents_go_on(
    job: Job, tmp_path: Path, parents: int, forkserver: bool
) -> None:
    flags = [] if forkserver else ["--no-forkserver"]
    result = job.run("-np", str(parents), "--timeout", TIMEOUT, *flags,
                     _program(tmp_path, SPAWN))  # fmt: skip
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    for rank in range(parents):
        assert f"parent {rank} continues" in lines
        mine = [c for c in range(2) if c % parents == rank]
        assert f"parent {rank} got {mine}" in lines
    assert sorted(line for line in lines if line.startswith("child")) == [
        "child 0 of 2 done", "child 1 of 2 done",
    ]  # fmt: skip
    total = sum(range(parents + 2))
    merged = sorted(line for line in lines if line.startswith("parent merged"))
    assert merged == [f"parent merged {r} {parents + 2} {total}" for r in range(parents)]
    assert f"spawned nodes {parents}-{parents + 1} for node 0" in result.err
    job.assert_clean()


def test_accept_connect_names_and_join_between_groups_of_one_job(job: Job, tmp_path: Path) -> None:
    result = job.run("-np", "4", "--timeout", TIMEOUT, _program(tmp_path, PORTS))
    assert result.code == 0, result.err
    lines = set(result.out.splitlines())
    for rank in range(4):
        peer = (rank + 2) % 4
        assert f"ports {rank} got ('from', {peer})" in lines
        assert f"ports merged {rank} {rank} 4" in lines  # the accepting group first
    assert {"joined 1 with 3", "joined 3 with 1"} <= lines
    job.assert_clean()


def test_a_rank_that_initialises_after_others_spawned_has_the_jobs_world(
    job: Job, tmp_path: Path
) -> None:
    """Rank 2 initialises MPI only after ranks 0 and 1 spawned a child each: its NIC's table
    then holds 5 nodes, yet its COMM_WORLD is the job's 3 (a world of 5 made it run the tree
    barrier alone, and the first world Barrier hung: mpi4py's test_spawn, seen in CI)."""
    result = job.run("-np", "3", "--timeout", TIMEOUT, _program(tmp_path, LATE))
    assert result.code == 0, result.err
    assert sorted(result.out.splitlines()) == [f"rank {r} world 3 3" for r in range(3)]
    job.assert_clean()


def test_a_command_that_cannot_start_is_err_spawn_and_the_job_goes_on(
    job: Job, tmp_path: Path
) -> None:
    result = job.run("-np", "2", "--timeout", TIMEOUT, _program(tmp_path, MISSING))
    assert result.code == 0, result.err
    assert sorted(result.out.splitlines()) == ["refused 0 True", "refused 1 True"]
    job.assert_clean()


def test_a_failing_spawned_rank_stops_the_job_with_its_status(job: Job, tmp_path: Path) -> None:
    result = job.run("-np", "1", "--timeout", TIMEOUT, _program(tmp_path, FAILING))
    assert result.code == 3, result.err
    assert "rank 2 (pid" in result.err  # child 1 runs on node 2
    job.assert_clean()


@pytest.mark.parametrize("forkserver", ["1", "0"], ids=["forkserver", "direct"])
def test_kill_9_emurun_leaves_no_spawned_process_behind(job: Job, tmp_path: Path,
                                                      forkserver: str) -> None:  # fmt: skip
    """Issue 30 with processes started at run time: they carry the job's marks and lifeline,
    so the warden ends them with the rest when emurun is killed."""
    job.env["EMU_FORKSERVER"] = forkserver
    job.start("-np", "1", _program(tmp_path, SLEEPING))
    pids = job.wait_ready(3)
    started = job_processes(job.id)
    assert set(pids.values()) <= {p.pid for p in started}
    assert job.proc is not None
    job.proc.kill()
    job.proc.wait(timeout=60)
    wait_gone(job.id, "spawned hosts after kill -9 emurun")
    _, alive = psutil.wait_procs(started, timeout=GONE_S)
    assert alive == []
