"""emurun over emulated hosts (network namespaces, own pid namespace and /dev/shm each,
started through ``--launcher exec``): programs on 3 hosts x 2 slots, lost nicds and agents,
a cut link, pre-started agents (``--launcher none``) and a wrong token."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emubench.netns import Fabric, unavailable
from launcher.cpugauge import parse_schedstat
from tests.integration.mpirun import EXAMPLES, PROGRAMS, ROOT, Background

if TYPE_CHECKING:
    from collections.abc import Iterator

WHY = unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(WHY is not None, reason=f"{WHY}")]
AGENT = f"{sys.executable} -m launcher.agent"
HOSTS = "h0:2,h1:2,h2:2"
WAIT_S = 180.0
RING = Path(__file__).with_name("ring_rounds.py")


@pytest.fixture
def fabric() -> Iterator[Fabric]:
    fab = Fabric(3)
    try:
        yield fab
    finally:
        fab.close()


class Run(Background):
    """emurun in the head namespace, its output collected by threads."""

    def __init__(self, fab: Fabric, *args: str) -> None:
        self.fab = fab
        self.tmpdir = tempfile.mkdtemp(prefix="emumh-", dir="/tmp")
        emurun = [sys.executable, "-m", "launcher.cli", "--launcher", "exec",
                  "--launcher-exec", fab.launcher_exec(), "--agent-cmd", AGENT,
                  "--listen", f"{fab.head_addr}:0", "--timeout", "150"]  # fmt: skip
        argv = fab.in_head([*emurun, *args])
        super().__init__(argv, {**os.environ, **fab.env(), "TMPDIR": self.tmpdir}, WAIT_S)

    def assert_clean(self, lost_run_dirs: int = 0, prefix: str = "emuproxy-") -> None:
        """No process left on any host, nothing left in the job's TMPDIR but the run
        directories of SIGKILLed agents (a killed process cannot remove its files; its
        processes died with its host's pid namespace)."""
        deadline = time.monotonic() + 20
        while any(self.fab.pids(h) for h in self.fab.hosts) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert {h: self.fab.pids(h) for h in self.fab.hosts} == {h: [] for h in self.fab.hosts}
        left = os.listdir(self.tmpdir)
        assert len(left) == lost_run_dirs, left
        assert all(name.startswith(prefix) for name in left)
        shutil.rmtree(self.tmpdir)


def test_demo_on_three_hosts_by_two(fabric: Fabric, tmp_path: Path) -> None:
    stats = tmp_path / "stats"
    run = Run(fabric, "-np", "6", "--host", HOSTS, "--stats", str(stats), "--cpu-report",
              str(EXAMPLES / "demo.py"))  # fmt: skip
    code, out, err = run.finish()
    assert code == 0, err
    names = {p.name for p in stats.iterdir()}
    assert {f"nic{n}.json" for n in range(6)} | {"job.json"} <= names, names
    job = json.loads((stats / "job.json").read_text())
    assert [(h["name"], h["bind_addr"], h["nodes"]) for h in job["hosts"]] == [
        ("h0", "198.18.7.10", [0, 1]), ("h1", "198.18.7.11", [2, 3]),
        ("h2", "198.18.7.12", [4, 5]),
    ]  # fmt: skip
    assert sorted(u["node"] for u in job["usage"]["processes"] if u["role"] == "host") == [
        0, 1, 2, 3, 4, 5,
    ]  # fmt: skip
    for host in fabric.hosts:
        assert f"host {host}:" in err  # one CPU table per host
    assert "wait %" in err
    own = Path("/proc/self/schedstat")
    counted = own.exists() and parse_schedstat(own.read_text()) is not None
    for usage in job["usage"]["processes"]:  # each agent's Exit carries the run delay
        assert usage["run_delay_s"] is not None or not counted, usage
        assert usage["run_delay_s"] is None or usage["run_delay_s"] >= 0
    assert len([line for line in out.splitlines() if line.startswith("hello from rank")]) == 6
    m = re.search(r"checksum (\d+) \(expected (\d+)\)", out)
    assert m is not None, out
    assert m.group(1) == m.group(2)
    assert "6 nodes ready on 3 hosts (h0=198.18.7.10:2, h1=198.18.7.11:2, h2=198.18.7.12:2)" in err
    run.assert_clean()


@pytest.mark.parametrize("suite", ["coll", "p2p"])
def test_mpi_suite_on_three_hosts_by_two(fabric: Fabric, suite: str) -> None:
    run = Run(fabric, "-np", "6", "--hostfile", str(_hostfile()), "--map-by", "node",
              str(PROGRAMS / f"{suite}_suite.py"))  # fmt: skip
    code, out, err = run.finish()
    assert code == 0, err
    got = sorted(line for line in out.splitlines() if line.startswith(f"{suite} ok"))
    assert got == sorted(f"{suite} ok {r}" for r in range(6)), err
    run.assert_clean()


def _hostfile() -> Path:
    path = Path(tempfile.mkdtemp(prefix="emuhf-")) / "hosts"
    path.write_text("# three emulated hosts\nh0 slots=2\nh1 slots=2\nh2 slots=2\n")
    return path


def test_killed_remote_nicd_ends_the_job_naming_its_host(fabric: Fabric) -> None:
    run = Run(fabric, "-np", "6", "--host", HOSTS, str(RING), "400", "0.05")
    run.wait_for("started")
    [pid] = fabric.find("h1", sys.executable, "-m nicd", "--node-id 3")
    os.kill(pid, signal.SIGKILL)
    code, _, err = run.finish()
    assert code == 125, err
    assert "emurun: nicd of node 3 on host h1 " in err
    assert "was killed by SIGKILL; stopping the job" in err
    run.assert_clean()


def test_killed_remote_agent_is_a_lost_host(fabric: Fabric) -> None:
    run = Run(fabric, "-np", "6", "--host", HOSTS, str(RING), "400", "0.05")
    run.wait_for("started")
    [pid] = fabric.find("h2", sys.executable, "-m launcher.agent")
    os.kill(pid, signal.SIGKILL)
    code, _, err = run.finish()
    assert code == 123, err
    assert "emurun: lost host h2 (agent for nodes 4-5): connection closed" in err
    run.assert_clean(lost_run_dirs=1)


def test_a_two_second_link_cut_is_survived(fabric: Fabric) -> None:
    run = Run(fabric, "-np", "6", "--host", HOSTS, str(RING), "80", "0.1")
    run.wait_for("started")
    fabric.link("h1", up=False)
    time.sleep(2.0)
    fabric.link("h1", up=True)
    code, out, err = run.finish()
    assert code == 0, err
    assert "rounds ok 480" in out
    run.assert_clean()


def _agent(fab: Fabric, host: str, token_file: Path, port: int) -> subprocess.Popen[bytes]:
    argv = fab.exec_argv(host, [*AGENT.split(), "--connect",
            f"{fab.head_addr}:{port}", "--token-file", str(token_file), "--slots", "2",
            "--name", f"node-{host}", "--connect-timeout", "120"])  # fmt: skip
    return subprocess.Popen(argv, env={**os.environ, **fab.env()}, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def test_prestarted_agents_dial_in_and_a_wrong_token_is_refused(
    fabric: Fabric, tmp_path: Path
) -> None:
    token, wrong = tmp_path / "token", tmp_path / "wrong"
    token.write_text("job-secret\n")
    wrong.write_text("not-it\n")
    port = 7070
    early = [_agent(fabric, h, token, port) for h in fabric.hosts[:2]]  # they retry meanwhile
    time.sleep(1.0)
    argv = fabric.in_head([sys.executable, "-m", "launcher.cli", "--launcher", "none",
                           "--agents", "3", "--listen", f"{fabric.head_addr}:{port}",
                           "--token-file", str(token), "-np", "6", "--tag-output",
                           str(EXAMPLES / "hello.py")])  # fmt: skip
    head = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    intruder = _agent(fabric, "h2", wrong, port)
    late: list[subprocess.Popen[bytes]] = []
    try:
        _, intruder_err = intruder.communicate(timeout=WAIT_S)
        assert intruder.returncode != 0
        assert b"handshake" in intruder_err, intruder_err
        assert fabric.pids("h2") == []  # the intruder started nothing
        late.append(_agent(fabric, "h2", token, port))
        out, err = head.communicate(timeout=WAIT_S)
        assert head.returncode == 0, err.decode()
        assert sorted(out.decode().splitlines()) == sorted(
            f"[0] Hello from rank {r} of 6 on vm-node{r}" for r in range(6)
        )
        assert "has the wrong token" in err.decode()
        for agent in early + late:
            assert agent.wait(timeout=60) == 0
    finally:
        for p in [*early, *late, intruder, head]:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_ctrl_c_stops_every_host(fabric: Fabric) -> None:
    run = Run(fabric, "-np", "6", "--host", HOSTS, str(RING), "400", "0.05")
    run.wait_for("started")
    run.proc.send_signal(signal.SIGINT)
    code, _, err = run.finish()
    assert code == 130, err
    assert "emurun: got SIGINT; stopping the job" in err
    run.assert_clean()


def test_agents_stop_everything_when_emurun_is_lost(fabric: Fabric) -> None:
    run = Run(fabric, "-np", "6", "--host", HOSTS, str(RING), "400", "0.05")
    run.wait_for("started")
    run.proc.kill()  # emurun gone without a word: every agent sees its connection close
    run.finish()
    # no process on any host, every agent removed its run directory; only the killed emurun's
    # own directory (its copy of the token) is left, on the head
    run.assert_clean(lost_run_dirs=1, prefix="emurun-")


def test_a_trace_across_hosts_is_shipped_merged_and_aligned(fabric: Fabric, tmp_path: Path) -> None:
    from emutrace.schema import check_trace

    trace_dir = tmp_path / "trace"
    run = Run(fabric, "-np", "6", "--host", HOSTS, "--trace", str(trace_dir),
              sys.executable, str(PROGRAMS / "p2p_suite.py"))  # fmt: skip
    code, _out, err = run.finish()
    assert code == 0, err
    clocks = json.loads((trace_dir / "clocks.json").read_text())["hosts"]
    assert sorted(clocks) == ["0-h0", "1-h1", "2-h2"]
    for folder, clock in clocks.items():
        assert clock["host"] == folder[2:]
        assert sorted({p.name.split("-")[0] for p in (trace_dir / folder).iterdir()}) == sorted(
            f"{role}{n}" for role in ("host", "nic") for n in clock["nodes"]
        )
        assert 0 < clock["rtt_ns"] < 1_000_000_000
        assert abs(clock["offset_ns"]) < clock["rtt_ns"]  # namespaces share one clock
    trace = json.loads((trace_dir / "trace.json").read_text())
    assert check_trace(trace) == []
    assert trace["otherData"]["host_clocks"] == clocks
    events = trace["traceEvents"]
    assert {e["pid"] for e in events if e.get("name") == "pkt send"} == set(range(6))
    receipts = sum(e.get("name") == "pkt recv" for e in events)
    arrows = sum(e["ph"] == "f" and e["cat"] == "flow" for e in events)
    assert arrows == receipts > 0  # every receipt has its send
    run.assert_clean()


SPAWN_UNDER_AGENTS = """
import sys
from emucluster import MPI
rank = MPI.COMM_WORLD.Get_rank()
try:
    MPI.COMM_WORLD.Spawn(sys.executable, ["-c", "pass"], maxprocs=1)
except MPI.Exception as exc:
    said = "one-machine launch" in str(exc)
    print("refused", rank, exc.Get_error_class() == MPI.ERR_SPAWN, said, flush=True)
print("universe", rank, MPI.COMM_WORLD.Get_attr(MPI.UNIVERSE_SIZE), flush=True)
"""


def test_spawn_under_agents_is_err_spawn_saying_why(fabric: Fabric) -> None:
    """Processes are started at run time only by emurun's one-machine launch: under agents
    every parent gets ERR_SPAWN with the reason, and the job goes on."""
    run = Run(fabric, "-np", "2", "--host", "h0:1,h1:1", sys.executable, "-c",
              SPAWN_UNDER_AGENTS)  # fmt: skip
    code, out, err = run.finish()
    assert code == 0, err
    lines = sorted(out.splitlines())
    assert lines == ["refused 0 True True", "refused 1 True True", "universe 0 2", "universe 1 2"]
    run.assert_clean()
