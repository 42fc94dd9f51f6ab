"""emurun's job driver (launcher/job.py) with its one local host (launcher/localhost.py, the
agent's LocalNodes in-process) on trio's MockClock, against fake children.

The one ``spawn`` of LocalNodes is replaced by a factory of :class:`FakeChild`: no process
starts, a child's stdout
and stderr are in-memory streams, and it dies when sent a signal it obeys. The clock is
pytest-trio's ``autojump_clock``, so ``--timeout``, the ready timeout and the SIGTERM ->
SIGKILL grace cost virtual seconds only; each test checks when (in virtual time) every
signal was sent.
"""

from __future__ import annotations

import signal
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from launcher import children, control
from launcher import job as jobmod
from launcher.agent import nodes as nodesmod
from launcher.agent.nodes import LocalNodes
from launcher.errors import EXIT_INTERNAL, EXIT_TIMEOUT
from launcher.localhost import LocalGate
from launcher.plan import LaunchPlan, Program
from launcher.report import ProcessUsage
from nicd.core.ready import Ready, encode_ready, socket_path
from nicd.shell import manage

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    Behaviour = Callable[["FakeChild"], Awaitable[None]]
    """What a fake process does once started (it is a system task: no result, no errors)."""

RUN_DIR = "/nonexistent/emurun-test"
TERM, KILL = signal.SIGTERM, signal.SIGKILL
WALL_LIMIT_S = 10.0  # generous under load; the virtual times below are minutes


class FakeChild:
    """What the supervisor sees of a started process (launcher.children.Child's surface)."""

    def __init__(self, role: str, node: int, pid: int, log: list[tuple[float, str]]) -> None:
        self.role = role
        self.node = node
        self.pid = pid
        self.env: dict[str, str] = {}
        self.stopping = False
        self.usage: ProcessUsage | None = None
        self.returncode: int | None = None
        self.exited = trio.Event()
        self.obeys = frozenset({TERM, KILL})
        """Signals that end it (with -signum)."""
        self.signals: list[tuple[float, int, bool]] = []
        """(virtual time, signal, to the group) for every signal sent to it."""
        self._log = log
        self._out, out = trio.testing.memory_stream_one_way_pair()
        self._err, err = trio.testing.memory_stream_one_way_pair()
        self.process = SimpleNamespace(stdout=out, stderr=err)

    @property
    def name(self) -> str:
        return f"rank {self.node}" if self.role == "host" else f"nicd of node {self.node}"

    async def wait(self) -> None:
        await self.exited.wait()

    def signal(self, signum: int, *, group: bool) -> None:
        if self.exited.is_set():
            return
        now = trio.current_time()
        self.signals.append((now, signum, group))
        self._log.append((now, f"{signal.Signals(signum).name} {self.name}"))
        if signum in self.obeys:
            self.die(-signum)

    def die(self, code: int) -> None:
        if self.exited.is_set():
            return
        self.returncode = code
        self.usage = ProcessUsage(self.role, self.node, self.pid, 0.0, 0.0, 0.0, code)
        self._out.close()
        self._err.close()
        self.exited.set()

    async def stdout(self, data: bytes) -> None:
        await self._out.send_all(data)

    async def stderr(self, data: bytes) -> None:
        await self._err.send_all(data)


async def announce(child: FakeChild) -> None:
    """A nicd that says NICD_READY at once and runs until stopped."""
    ready = Ready(child.node, ("127.0.0.1", 40000 + child.node), socket_path(RUN_DIR, child.node))
    await child.stdout(encode_ready(ready).encode() + b"\n")


async def run_forever(child: FakeChild) -> None:
    """A host (or nicd) that runs until stopped."""


def exit_after(seconds: float, code: int = 0, output: bytes = b"") -> Behaviour:
    async def behave(child: FakeChild) -> None:
        await trio.sleep(seconds)
        if output:
            await child.stdout(output)
        child.die(code)

    return behave


class FakeCluster:
    """Replaces spawn, manage.set_routes and the cleanup sweep; records what happened."""

    def __init__(
        self,
        nicd: Behaviour = announce,
        host: Behaviour = run_forever,
        *,
        host_obeys: frozenset[int] = frozenset({TERM, KILL}),
        hosts: Mapping[int, Behaviour] | None = None,
    ) -> None:
        self.nicd, self.host, self.host_obeys = nicd, host, host_obeys
        self.by_rank = dict(hosts or {})
        self.nicds: list[FakeChild] = []
        self.hosts: list[FakeChild] = []
        self.routes: dict[str, dict[int, tuple[str, int]]] = {}
        self.log: list[tuple[float, str]] = []
        self._pids = 10_000_000  # never a real pid: nothing is signalled for real

    async def spawn(
        self,
        role: str,
        node: int,
        argv: Sequence[str],
        env: Mapping[str, str],
        lifeline: object = None,
        forkserver: object = None,
        cpus: object = None,
    ) -> FakeChild:
        self._pids += 1
        child = FakeChild(role, node, self._pids, self.log)
        child.env = dict(env)
        if role == "nicd":
            self.nicds.append(child)
            behaviour = self.nicd
        else:
            child.obeys = self.host_obeys
            self.hosts.append(child)
            behaviour = self.by_rank.get(node, self.host)
        trio.lowlevel.spawn_system_task(behaviour, child)
        return child

    def set_routes(
        self, path: str, routes: Mapping[int, tuple[str, int]], timeout: float = 10.0
    ) -> None:
        self.routes[path] = dict(routes)

    async def sweep(self) -> control.Swept:
        self.log.append((trio.current_time(), "sweep"))
        return control.Swept([], [], [])

    def events(self) -> list[tuple[float, str]]:
        return self.log


async def _run_sync_inline(fn: Callable[..., object], *args: object) -> object:
    return fn(*args)


@pytest.fixture
def cluster_factory(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeCluster]:
    def make(*args: object, **kwargs: object) -> FakeCluster:
        cluster = FakeCluster(*args, **kwargs)  # type: ignore[arg-type]
        monkeypatch.setattr(nodesmod, "spawn", cluster.spawn)
        monkeypatch.setattr(manage, "set_routes", cluster.set_routes)
        monkeypatch.setattr(LocalNodes, "sweep", lambda _nodes: cluster.sweep())
        # No threads: while one runs, the autojump clock could jump past a job deadline.
        monkeypatch.setattr(trio.to_thread, "run_sync", _run_sync_inline)
        return cluster

    return make


def make_plan(**overrides: object) -> LaunchPlan:
    fields: dict[str, object] = {
        "np": 2,
        "program": Program(("app",), "app"),
        "job_id": "shelltest",
        "python": "python",
        "bind_to": "none",
        "nic_priority": "none",
        "quiet": True,
        "forkserver": False,  # the fake spawn starts nothing: no zygote either
    }
    fields.update(overrides)
    return LaunchPlan(**fields)  # type: ignore[arg-type]


async def run(plan: LaunchPlan) -> tuple[int, jobmod.Job, float]:
    """Run a job on its local host (run directory not made, no lifeline); return its exit
    status, the job and the virtual seconds it took."""
    gate = LocalGate(plan)
    gate.run_dir = RUN_DIR
    job = jobmod.Job(plan, gate)
    start, wall = trio.current_time(), time.monotonic()
    code = await job.run()
    assert time.monotonic() - wall < WALL_LIMIT_S
    return code, job, trio.current_time() - start


# -- a job that ends by itself ------------------------------------------------------------


async def test_job_runs_hosts_with_routes_and_forwards_output(
    autojump_clock: trio.testing.MockClock,
    cluster_factory: Callable[..., FakeCluster],
    capfd: pytest.CaptureFixture[str],
) -> None:
    async def chatty_nicd(child: FakeChild) -> None:
        await child.stderr(b"nicd[%d] WARNING own tag\nplain\n" % child.node)
        await announce(child)

    cluster = cluster_factory(chatty_nicd, exit_after(1.0, 0, b"hello\n"))
    code, job, took = await run(make_plan(tag_output=True))
    assert code == 0
    assert job.outcome is None
    assert took == pytest.approx(1.0)
    table = {n: ("127.0.0.1", 40000 + n) for n in range(2)}
    assert cluster.routes == {socket_path(RUN_DIR, n): table for n in range(2)}
    assert [h.env["EMU_NIC_SOCKET"] for h in cluster.hosts] == [
        socket_path(RUN_DIR, n) for n in range(2)
    ]
    assert all(h.signals == [] for h in cluster.hosts)  # they ended by themselves
    assert all(n.signals == [(1.0, TERM, False)] for n in cluster.nicds)
    out, err = capfd.readouterr()
    assert sorted(out.splitlines()) == ["[0] hello", "[1] hello"]
    assert "nicd[1] WARNING own tag\n" in err  # nicd's own tag is not doubled
    assert "nicd[1] plain\n" in err


# -- timeouts -----------------------------------------------------------------------------


async def test_timeout_stops_hosts_then_nicds_then_sweeps(
    autojump_clock: trio.testing.MockClock, cluster_factory: Callable[..., FakeCluster]
) -> None:
    cluster = cluster_factory()
    code, job, took = await run(make_plan(timeout=3600.0))
    assert code == EXIT_TIMEOUT
    assert job.outcome is not None
    assert job.outcome.message == "timed out after 3600 s"
    assert took == pytest.approx(3600.0)
    assert all(h.signals == [(3600.0, TERM, True)] for h in cluster.hosts)
    assert all(n.signals == [(3600.0, TERM, False)] for n in cluster.nicds)
    assert [what for _, what in cluster.events()] == [
        "SIGTERM rank 0",
        "SIGTERM rank 1",
        "SIGTERM nicd of node 0",
        "SIGTERM nicd of node 1",
        "sweep",
    ]


async def test_a_host_ignoring_sigterm_is_killed_after_the_grace(
    autojump_clock: trio.testing.MockClock, cluster_factory: Callable[..., FakeCluster]
) -> None:
    cluster = cluster_factory(host_obeys=frozenset({KILL}))
    code, _, took = await run(make_plan(timeout=10.0, stop_grace=3.0))
    assert code == EXIT_TIMEOUT
    assert took == pytest.approx(13.0)
    for host in cluster.hosts:
        assert host.signals == [(10.0, TERM, True), (13.0, KILL, True)]
        assert host.returncode == -KILL
    assert all(n.signals == [(13.0, TERM, False)] for n in cluster.nicds)


async def test_an_unkillable_host_is_reported_and_left(
    autojump_clock: trio.testing.MockClock,
    cluster_factory: Callable[..., FakeCluster],
    capfd: pytest.CaptureFixture[str],
) -> None:
    cluster = cluster_factory(host_obeys=frozenset(), hosts={0: exit_after(0.5, 0)})
    code, _, took = await run(make_plan(timeout=10.0, stop_grace=3.0))
    assert code == EXIT_TIMEOUT
    stuck = cluster.hosts[1]
    assert stuck.signals == [(10.0, TERM, True), (13.0, KILL, True)]
    assert not stuck.exited.is_set()
    kill_wait = children.KILL_WAIT_S
    assert all(n.signals == [(13.0 + kill_wait, TERM, False)] for n in cluster.nicds)
    # its output streams never close: the drain wait ends the job
    assert took == pytest.approx(13.0 + kill_wait + nodesmod._DRAIN_S)
    assert f"emurun: rank 1 (pid {stuck.pid}) would not die" in capfd.readouterr().err


async def test_no_ready_line_within_the_ready_timeout(
    autojump_clock: trio.testing.MockClock, cluster_factory: Callable[..., FakeCluster]
) -> None:
    cluster = cluster_factory(nicd=run_forever)
    code, job, took = await run(make_plan(np=3, ready_timeout=60.0))
    assert code == EXIT_INTERNAL
    assert job.outcome is not None
    assert job.outcome.message == "no NICD_READY from nodes 0, 1, 2 within 60 s"
    assert took == pytest.approx(60.0)
    assert cluster.hosts == []
    assert cluster.routes == {}


async def test_one_late_nicd_is_named(
    autojump_clock: trio.testing.MockClock, cluster_factory: Callable[..., FakeCluster]
) -> None:
    async def node1_late(child: FakeChild) -> None:
        if child.node == 1:
            await trio.sleep(120.0)
        await announce(child)

    cluster_factory(nicd=node1_late)
    code, job, took = await run(make_plan(ready_timeout=60.0))
    assert code == EXIT_INTERNAL
    assert job.outcome is not None
    assert job.outcome.message == "no NICD_READY from nodes 1 within 60 s"
    assert took == pytest.approx(60.0)


# -- failures -----------------------------------------------------------------------------


async def test_a_garbage_ready_line_stops_the_job_at_once(
    autojump_clock: trio.testing.MockClock, cluster_factory: Callable[..., FakeCluster]
) -> None:
    async def garbage(child: FakeChild) -> None:
        await child.stdout(b"hello\n")

    cluster = cluster_factory(nicd=garbage)
    code, job, took = await run(make_plan(np=1))
    assert code == EXIT_INTERNAL
    assert job.outcome is not None
    assert job.outcome.message == "nicd of node 0: not a ready line: 'hello'"
    assert took == 0.0
    assert cluster.nicds[0].signals == [(0.0, TERM, False)]


async def test_a_failing_rank_stops_the_others_with_its_code(
    autojump_clock: trio.testing.MockClock, cluster_factory: Callable[..., FakeCluster]
) -> None:
    cluster = cluster_factory(hosts={1: exit_after(1.0, 3)})
    code, job, took = await run(make_plan(np=3))
    assert code == 3
    assert job.outcome is not None
    assert job.outcome.message == f"rank 1 (pid {cluster.hosts[1].pid}) exited with code 3"
    stop_at = 1.0 + jobmod.ROOT_CAUSE_WAIT_S  # waited for a nicd to be blamed instead
    assert took == pytest.approx(stop_at)
    for rank in (0, 2):
        assert cluster.hosts[rank].signals == [(pytest.approx(stop_at), TERM, True)]
    assert cluster.hosts[1].signals == []


async def test_a_dying_nicd_is_blamed_before_its_rank(
    autojump_clock: trio.testing.MockClock, cluster_factory: Callable[..., FakeCluster]
) -> None:
    async def nicd0_crashes(child: FakeChild) -> None:
        await announce(child)
        if child.node == 0:
            await trio.sleep(5.0)
            child.die(-signal.SIGSEGV)

    async def rank0_loses_its_nic(child: FakeChild) -> None:
        await trio.sleep(5.0)
        await trio.sleep(0.05)  # notices a moment later
        child.die(1)

    cluster = cluster_factory(nicd=nicd0_crashes, hosts={0: rank0_loses_its_nic})
    code, job, _ = await run(make_plan())
    assert code == EXIT_INTERNAL
    assert job.outcome is not None
    pid = cluster.nicds[0].pid
    assert job.outcome.message == f"nicd of node 0 (pid {pid}) was killed by SIGSEGV"


async def test_the_last_rank_failing_still_sets_the_code(
    autojump_clock: trio.testing.MockClock, cluster_factory: Callable[..., FakeCluster]
) -> None:
    # Every rank has exited once the failing one has: the job must not end (and cancel the
    # wait that blames a nicd first) before the failure is recorded.
    cluster = cluster_factory(hosts={0: exit_after(1.0, 0), 1: exit_after(1.0, 3)})
    code, job, took = await run(make_plan())
    assert code == 3
    assert job.outcome is not None
    assert job.outcome.message == f"rank 1 (pid {cluster.hosts[1].pid}) exited with code 3"
    assert took == pytest.approx(1.0 + jobmod.ROOT_CAUSE_WAIT_S)
