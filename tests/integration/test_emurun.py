"""emurun end to end: real nicds, real hosts, real signals.

After every test the job must have left nothing: no process carrying its EMU_JOB_ID, no
/dev/shm segment with its prefix, nothing in the TMPDIR it ran with. Every wait has a
generous timeout; no test asserts a duration.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil  # type: ignore[import-untyped,unused-ignore]
import pytest

from launcher.cleanup import job_processes, job_segments, sweep
from tests.integration.mpirun import as_from_a_terminal

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[2]
HOST = str(Path(__file__).parent / "hosts" / "emurun_host.py")
DEMO = str(ROOT / "examples" / "port_demo.py")
EMURUN = [sys.executable, "-m", "launcher.cli"]
WAIT_S = 90.0


@dataclass
class Result:
    code: int
    out: str
    err: str


def _terminal_on(cpus: set[int]) -> None:
    """`as_from_a_terminal`, bound to ``cpus``."""
    as_from_a_terminal()
    os.sched_setaffinity(0, cpus)


class Job:
    """One emurun invocation with its own job id and TMPDIR, checked for leftovers."""

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.tmpdir = tempfile.mkdtemp(prefix="emut-", dir="/tmp")  # short: socket paths
        self.env = {**os.environ, "TMPDIR": self.tmpdir}
        self.proc: subprocess.Popen[bytes] | None = None
        self.cwd: str | None = None
        """emurun's working directory (None: the test's)."""
        self._out = b""
        self._err = b""

    def argv(self, args: list[str]) -> list[str]:
        return [*EMURUN, "--job-id", self.id, *args]

    def run(self, *args: str, timeout: float = WAIT_S, cpus: set[int] | None = None) -> Result:
        """Run emurun to its end (bound to ``cpus`` when given: it places every node's
        processes inside its own affinity)."""
        done = subprocess.run(
            self.argv(list(args)),
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
            preexec_fn=as_from_a_terminal if cpus is None else lambda: _terminal_on(cpus),
        )
        return Result(done.returncode, done.stdout.decode(), done.stderr.decode())

    def start(self, *args: str) -> None:
        """Start emurun in a session of its own (so its group is what a terminal would
        signal on Ctrl-C)."""
        self.proc = subprocess.Popen(
            self.argv(list(args)),
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=as_from_a_terminal,
        )

    def _read_until(self, done: Callable[[], bool], what: str) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        streams = {self.proc.stdout: 1, self.proc.stderr: 2}
        deadline = time.monotonic() + WAIT_S
        while not done():
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {what}: {self._out!r} {self._err!r}"
            readable, _, _ = select.select(list(streams), [], [], remaining)
            for stream in readable:
                chunk = os.read(stream.fileno(), 65536)
                assert chunk, f"emurun closed its output early: {self._out!r} {self._err!r}"
                if streams[stream] == 1:
                    self._out += chunk
                else:
                    self._err += chunk

    def wait_ready(self, count: int) -> dict[int, int]:
        """Read until ``count`` hosts said ``ready RANK PID`` on stdout; return rank -> pid."""
        pids: dict[int, int] = {}

        def enough() -> bool:
            for line in self._out.decode().splitlines():
                words = line.split()
                if len(words) == 3 and words[0] == "ready":
                    pids[int(words[1])] = int(words[2])
            return len(pids) >= count

        self._read_until(enough, f"{count} ready lines")
        return pids

    def wait_stderr(self, text: str) -> None:
        """Read until ``text`` appeared on emurun's stderr."""
        self._read_until(lambda: text in self._err.decode(), repr(text))

    def finish(self) -> Result:
        assert self.proc is not None
        out, err = self.proc.communicate(timeout=WAIT_S)
        return Result(self.proc.returncode, (self._out + out).decode(), (self._err + err).decode())

    def nicd_pid(self, node: int) -> int:
        for proc in job_processes(self.id):
            cmd = proc.cmdline()
            if "nicd" in cmd and cmd[cmd.index("--node-id") + 1] == str(node):
                return int(proc.pid)
        raise AssertionError(f"no nicd of node {node}")

    def assert_clean(self) -> None:
        left = [(p.pid, p.cmdline()) for p in job_processes(self.id)]
        assert left == [], left
        assert job_segments(self.id) == []
        assert os.listdir(self.tmpdir) == []

    def teardown(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        sweep(self.id, None)
        shutil.rmtree(self.tmpdir, ignore_errors=True)


# -- launching ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nodes",
    [1, 2, pytest.param(8, marks=pytest.mark.slow), pytest.param(16, marks=pytest.mark.slow)],
)
def test_port_demo_on_n_nodes(job: Job, nodes: int) -> None:
    r = job.run("-np", str(nodes), DEMO)
    assert r.code == 0, r.err
    assert f"{nodes} nodes on the emulated Myrinet" in r.out
    assert "all greetings arrived" in r.out
    assert f"{nodes} nodes ready" in r.err
    assert "profile faithful (EMU_WAIT=block)" in r.err  # the default, stated on that line
    job.assert_clean()


def test_console_script_and_module_program(job: Job) -> None:
    emurun = shutil.which("emurun") or str(Path(sys.executable).parent / "emurun")
    done = subprocess.run(
        [emurun, "--job-id", job.id, "-np", "2", "-q", "-m", "platform", "--terse"],
        env=job.env,
        capture_output=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.decode().splitlines()) == 2
    assert done.stderr == b""
    job.assert_clean()


def test_output_forwarding_and_tagging(job: Job) -> None:
    plain = job.run("-np", "3", "-q", HOST, "hello")
    assert plain.code == 0, plain.err
    assert sorted(plain.out.splitlines()) == [f"out {r} of 3" for r in range(3)]
    assert sorted(plain.err.splitlines()) == [f"err {r}" for r in range(3)]
    tagged = job.run("-np", "3", "-q", "--tag-output", HOST, "hello")
    assert tagged.code == 0, tagged.err
    assert sorted(tagged.out.splitlines()) == [f"[{r}] out {r} of 3" for r in range(3)]
    assert sorted(tagged.err.splitlines()) == [f"[{r}] err {r}" for r in range(3)]
    job.assert_clean()


def test_exports_and_environment(job: Job) -> None:
    code = (
        "import os; print(os.environ['GREETING'], os.environ['EMU_RANK'], os.environ['EMU_SIZE'])"
    )
    r = job.run("-np", "2", "-q", "-x", "GREETING=hi", sys.executable, "-c", code)
    assert r.code == 0, r.err
    assert sorted(r.out.splitlines()) == ["hi 0 2", "hi 1 2"]
    job.assert_clean()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="role binding needs 2 CPUs")
@pytest.mark.parametrize("start", ["--forkserver", "--no-forkserver"])
def test_bind_to_role_puts_the_hosts_on_the_second_half_of_the_cpus(job: Job, start: str) -> None:
    """Bound from their first instruction: the program reads its CPUs before anything else
    (binding after the start raced it, CI of 3bd8fd0)."""
    cpus = sorted(os.sched_getaffinity(0))
    hosts = cpus[len(cpus) // 2 :]
    code = "import os; print(sorted(os.sched_getaffinity(0)))"
    flags = [] if start == "--forkserver" else [start]
    r = job.run("-np", "3", "--bind-to", "role", *flags, sys.executable, "-c", code)
    assert r.code == 0, r.err
    assert "bind-to role" in r.err  # emurun's first line states it
    assert sorted(r.out.splitlines()) == sorted(str([hosts[n % len(hosts)]]) for n in range(3))
    job.assert_clean()


# -- failures -----------------------------------------------------------------------------


@pytest.mark.parametrize("rank", [0, 3])
def test_first_failing_rank_sets_the_exit_code(job: Job, rank: int) -> None:
    r = job.run("-np", "4", "-q", HOST, "fail", str(rank), "3")
    assert r.code == 3, r.err
    assert f"emurun: rank {rank} " in r.err
    assert "exited with code 3; stopping the job" in r.err
    job.assert_clean()


@pytest.mark.slow
def test_killed_host_stops_the_job(job: Job) -> None:
    job.start("-np", "3", "-q", HOST, "hang")
    pids = job.wait_ready(3)
    os.kill(pids[1], signal.SIGKILL)
    r = job.finish()
    assert r.code == 128 + signal.SIGKILL, r.err
    assert "rank 1 " in r.err
    assert "was killed by SIGKILL; stopping the job" in r.err
    job.assert_clean()


@pytest.mark.slow
def test_killed_nicd_stops_the_job_and_is_blamed(job: Job) -> None:
    job.start("-np", "3", "-q", HOST, "recv")  # rank 1 fails too when its NIC goes
    job.wait_ready(3)
    os.kill(job.nicd_pid(1), signal.SIGKILL)
    r = job.finish()
    assert r.code == 125, r.err
    assert "emurun: nicd of node 1 " in r.err
    assert "was killed by SIGKILL; stopping the job" in r.err
    assert "emurun: rank" not in r.err
    job.assert_clean()


@pytest.mark.slow
def test_timeout_stops_a_hanging_job(job: Job) -> None:
    r = job.run("-np", "2", "-q", "--timeout", "2", HOST, "hang")
    assert r.code == 124, r.err
    assert "emurun: timed out after 2 s; stopping the job" in r.err
    job.assert_clean()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stops_everything(job: Job, signum: int) -> None:
    job.start("-np", "3", "-q", HOST, "hang")
    job.wait_ready(3)
    assert job.proc is not None
    if signum == signal.SIGINT:
        os.killpg(job.proc.pid, signum)  # what a terminal does on Ctrl-C
    else:
        job.proc.send_signal(signum)
    r = job.finish()
    assert r.code == 128 + signum, r.err
    assert f"emurun: got {signal.Signals(signum).name}; stopping the job" in r.err
    job.assert_clean()


@pytest.mark.slow
def test_hosts_ignoring_sigterm_are_killed_after_the_grace(job: Job) -> None:
    r = job.run("-np", "2", "-q", "--timeout", "2", "--stop-grace", "0.5", HOST, "stubborn")
    assert r.code == 124, r.err
    job.assert_clean()


@pytest.mark.slow
def test_second_ctrl_c_kills_at_once(job: Job) -> None:
    job.start("-np", "2", "-q", "--stop-grace", "600", HOST, "stubborn")
    job.wait_ready(2)
    assert job.proc is not None
    os.killpg(job.proc.pid, signal.SIGINT)
    job.wait_stderr("stopping the job")
    os.killpg(job.proc.pid, signal.SIGINT)
    r = job.finish()
    assert r.code == 130, r.err
    assert "emurun: got SIGINT again: killing everything" in r.err
    job.assert_clean()


@pytest.mark.slow
def test_sweep_removes_leaked_segments_and_stray_children(job: Job) -> None:
    job.start("-np", "2", HOST, "leak")
    job.wait_ready(2)
    assert len(job_segments(job.id)) == 2
    strays = [p for p in job_processes(job.id) if "SIG_IGN" in " ".join(p.cmdline())]
    assert len(strays) == 2
    assert job.proc is not None
    job.proc.send_signal(signal.SIGINT)
    r = job.finish()
    assert r.code == 130, r.err
    assert "cleanup killed leftover processes" in r.err
    assert "cleanup removed shared-memory segments" in r.err
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in strays)
    job.assert_clean()


def test_missing_program(job: Job) -> None:
    r = job.run("-np", "2", "no-such-program-here")
    assert r.code == 127
    assert "no-such-program-here: command not found" in r.err
    job.assert_clean()


# -- faults, stats, reports -----------------------------------------------------------------


@pytest.mark.slow
def test_fault_flags_reach_every_nicd(job: Job, tmp_path: Path) -> None:
    stats = tmp_path / "stats"
    r = job.run(
        "-np", "3", "-q", "--loss", "0.2", "--fault-seed", "5", "--stats", str(stats),
        "--cpu-report", HOST, "exchange", "20",
    )  # fmt: skip
    assert r.code == 0, r.err
    assert sorted(r.out.splitlines()) == [f"rank {n} received 40" for n in range(3)]
    for node in range(3):
        counters = json.loads((stats / f"nic{node}.json").read_text())
        assert counters["node"] == node
        assert counters["faults"]["dropped"] > 0
    summary = json.loads((stats / "job.json").read_text())
    assert summary["exit_code"] == 0
    assert summary["faults"]["loss"] == 0.2
    roles = sorted((p["role"], p["node"]) for p in summary["usage"]["processes"])
    assert roles == sorted([("host", n) for n in range(3)] + [("nicd", n) for n in range(3)])
    assert "all nicds" in r.err  # the --cpu-report table
    job.assert_clean()
