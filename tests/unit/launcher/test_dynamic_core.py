"""emurun's decisions for processes started at run time (`launcher.dynamic.core`): node ids
after the job's and never reused, all or nothing, the spawned hosts' environment, the name
service, the universe size."""

from __future__ import annotations

import pytest

from emucluster.mpi.dynamic import wire
from launcher.dynamic.core import MAX_NODE, SpawnBook, SpawnRefused, universe_size
from launcher.multihost.hostfile import HostSpec
from launcher.plan import LaunchPlan, Program

PLAN = LaunchPlan(np=3, program=Program(("/bin/true",), "true"), job_id="j1", python="/py")
FILES = {"/bin/prog": True, "/bin/other": True, "app.py": False, "/bin/x/app": False}


def _plan(book: SpawnBook, *commands: wire.Command) -> tuple[int, list]:
    return book.plan_spawn(
        wire.Spawn(0, commands),
        which=lambda name: f"/bin/{name}" if f"/bin/{name}" in FILES else None,
        is_file=lambda path: path in FILES,
        is_executable=lambda path: FILES.get(path, False),
        env_cmd="/usr/bin/env",
    )


def test_nodes_follow_the_job_and_every_spawn_gets_new_ones() -> None:
    book = SpawnBook(PLAN)
    first, new = _plan(book, wire.Command(("prog", "-v"), 2), wire.Command(("app.py",), 1))
    assert [(n.node, n.rank) for n in new] == [(3, 0), (4, 1), (5, 2)]
    assert new[0].argv == ("/bin/prog", "-v")
    assert new[2].argv == ("/py", "app.py")
    second, more = _plan(book, wire.Command(("other",), 1, wdir="/tmp"))
    assert second == first + 1
    assert [(n.node, n.rank) for n in more] == [(6, 0)]
    assert more[0].argv == ("/usr/bin/env", "-C", "/tmp", "/bin/other")


def test_a_command_that_cannot_run_starts_nothing() -> None:
    book = SpawnBook(PLAN)
    with pytest.raises(SpawnRefused, match="missing"):
        _plan(book, wire.Command(("prog",), 2), wire.Command(("missing",), 1))
    with pytest.raises(SpawnRefused, match="not executable"):
        _plan(book, wire.Command(("/bin/x/app",), 1))
    assert book.refused == 2
    _, new = _plan(book, wire.Command(("prog",), 1))
    assert new[0].node == 3  # nothing was allocated by the refusals


def test_node_ids_run_out_at_the_wire_limit() -> None:
    book = SpawnBook(PLAN)
    book.next_node = MAX_NODE
    with pytest.raises(SpawnRefused, match="node ids"):
        _plan(book, wire.Command(("prog",), 2))
    assert _plan(book, wire.Command(("prog",), 1))[1][0].node == MAX_NODE


def test_a_spawned_host_learns_its_own_world_and_its_parents() -> None:
    book = SpawnBook(PLAN)
    spawn_id, new = _plan(book, wire.Command(("prog",), 2, env=(("A", "1"),)))
    env = book.host_env({"PATH": "/bin"}, new[1], 2, spawn_id, 1, "/run", "/run/nic4.sock")
    assert env["EMU_RANK"] == "1"
    assert env["EMU_SIZE"] == "2"
    assert env["EMU_WORLD"] == "3:2"
    assert env["EMU_PARENT"] == f"{spawn_id}:1"
    assert env["EMU_NIC_SOCKET"] == "/run/nic4.sock"
    assert env["EMU_JOB_ID"] == "j1"
    assert env["A"] == "1"
    assert env["PATH"] == "/bin"
    assert env["EMU_UNIVERSE_SIZE"] == "3"  # the plan's -np when no slots were counted


def test_the_name_service() -> None:
    book = SpawnBook(PLAN)
    assert book.name_service(wire.Lookup("svc")).error
    assert not book.name_service(wire.Publish("svc", "port-a")).error
    assert book.name_service(wire.Publish("svc", "port-b")).error  # taken
    assert book.name_service(wire.Lookup("svc")).port == "port-a"
    assert book.name_service(wire.Unpublish("svc", "port-b")).error  # not its port
    assert not book.name_service(wire.Unpublish("svc", "port-a")).error
    assert book.name_service(wire.Lookup("svc")).error


def test_universe_size_is_the_slots_never_below_np() -> None:
    assert universe_size(2, None, 8) == 8
    assert universe_size(4, None, 2) == 4
    assert universe_size(2, [HostSpec("a", 3), HostSpec("b", 2)], 64) == 5
