"""Nothing outlives a killed launcher (issue 30): after ``kill -9`` of emurun, or of an agent,
every process it started ends (and the fork server, and the nicds), its segments and its run
directory go, whatever the program was doing: computing, sleeping, blocked in a system call,
never having imported emucluster (so never watching the lifeline), through the fork server or
not.

Real emurun, real agents, real SIGKILL. The bound after the kill is generous (the job's
warden acts at once); no test asserts a duration.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid

import psutil  # type: ignore[import-untyped,unused-ignore]
import pytest

from launcher.cleanup import job_processes, job_segments, sweep
from tests.integration.mpirun import LOCAL_EXEC, Background, agents_of
from tests.integration.test_emurun import EMURUN, Job

pytestmark = pytest.mark.slow

GONE_S = 30.0
"""How long the job's processes may take to end after the kill (far more than needed)."""
START_S = 120.0

_READY = "import os\nprint('ready', os.environ['EMU_RANK'], os.getpid(), flush=True)\n"
PROGRAMS = {
    "computing": _READY + "while True:\n    pass\n",
    "sleeping": _READY + "import time\ntime.sleep(3600)\n",
    "blocked_in_read": _READY + "r, w = os.pipe()\nos.read(r, 1)\n",
    "blocked_in_select": _READY + "import select\nr, w = os.pipe()\nselect.select([r], [], [])\n",
}
"""Programs that never import emucluster (so never open their NIC nor watch the lifeline)."""
NP = 2


def wait_gone(job_id: str, what: str) -> None:
    """Until no process of ``job_id`` runs, its segments and run directory are gone."""
    deadline = time.monotonic() + GONE_S
    while True:
        left = [(p.pid, _cmdline(p)) for p in job_processes(job_id)]
        if not left and not job_segments(job_id):
            return
        assert time.monotonic() < deadline, f"{what}: still running {GONE_S:g} s later: {left}"
        time.sleep(0.2)


def _cmdline(proc: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return " ".join(proc.cmdline())[:120]
    return "?"


@pytest.mark.parametrize("forkserver", ["1", "0"], ids=["forkserver", "direct"])
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_kill_9_emurun_ends_every_process_of_the_job(
    job: Job, program: str, forkserver: str
) -> None:
    job.env["EMU_FORKSERVER"] = forkserver
    job.start("-np", str(NP), sys.executable, "-c", PROGRAMS[program])
    hosts = job.wait_ready(NP)
    started = job_processes(job.id)
    assert set(hosts.values()) <= {p.pid for p in started}
    assert job.proc is not None
    job.proc.kill()
    job.proc.wait(timeout=START_S)
    wait_gone(job.id, f"{program} hosts after kill -9 emurun")
    _, alive = psutil.wait_procs(started, timeout=GONE_S)  # reaped, not only unmarked
    assert alive == [], [_cmdline(p) for p in alive]
    deadline = time.monotonic() + GONE_S
    while os.listdir(job.tmpdir):  # the run directory
        assert time.monotonic() < deadline, os.listdir(job.tmpdir)
        time.sleep(0.2)
    job.assert_clean()


def test_without_its_warden_the_fork_server_still_ends_its_children(job: Job) -> None:
    """The warden killed first: the fork server sees its control socket close when emurun
    dies and kills its children (hosts that never watch the lifeline), then exits."""
    job.cwd = job.tmpdir  # ``-c`` puts the cwd first: a checkout's would not be forked
    job.start("-np", str(NP), sys.executable, "-c", PROGRAMS["sleeping"])
    hosts = job.wait_ready(NP)
    assert job.proc is not None
    emurun = psutil.Process(job.proc.pid)
    (warden,) = [p for p in emurun.children() if "launcher.warden" in p.cmdline()]
    zygote = next(p for p in emurun.children() if "launcher.forkserver" in " ".join(p.cmdline()))
    started = [zygote, *(psutil.Process(pid) for pid in hosts.values())]
    assert all(p.ppid() == zygote.pid for p in started[1:])
    warden.kill()
    deadline = time.monotonic() + GONE_S
    while warden.status() != psutil.STATUS_ZOMBIE:  # a zombie until emurun is gone
        assert time.monotonic() < deadline
        time.sleep(0.05)
    job.proc.kill()
    job.proc.wait(timeout=START_S)
    _, alive = psutil.wait_procs(started, timeout=GONE_S)
    assert alive == [], [_cmdline(p) for p in alive]


# -- an agent killed -9 ---------------------------------------------------------------------


@pytest.mark.parametrize("forkserver", ["1", "0"], ids=["forkserver", "direct"])
@pytest.mark.parametrize("program", ["computing", "sleeping"])
def test_kill_9_of_an_agent_ends_every_process_it_started(program: str, forkserver: str) -> None:
    job_id = uuid.uuid4().hex[:12]
    tmpdir = tempfile.mkdtemp(prefix="emut-", dir="/tmp")
    env = {**os.environ, "TMPDIR": tmpdir, "EMU_FORKSERVER": forkserver}
    argv = [*EMURUN, "--job-id", job_id, "--host", "localhost:1,127.0.0.1:1",
            "--launcher", "exec", "--launcher-exec", LOCAL_EXEC,
            "--agent-cmd", f"{sys.executable} -m launcher.agent", "--timeout", "300",
            "-np", str(NP), sys.executable, "-c", PROGRAMS[program]]  # fmt: skip
    job = Background(argv, env, wait_s=START_S)
    proc = job.proc
    try:
        job.wait_for("ready", count=NP)
        agents = agents_of(proc.pid)
        victim = next(a for name, a in agents.items() if name != "localhost")
        started = victim.children(recursive=True)
        assert len(started) >= 2, [_cmdline(p) for p in started]  # its nicd and its host
        os.kill(victim.pid, signal.SIGKILL)
        code, _, err = job.finish()
        assert code == 123, err
        _, alive = psutil.wait_procs(started, timeout=GONE_S)
        assert alive == [], [_cmdline(p) for p in alive]
        wait_gone(job_id, f"{program} hosts after kill -9 of their agent")
        deadline = time.monotonic() + GONE_S
        while os.listdir(tmpdir):  # both agents' run directories
            assert time.monotonic() < deadline, os.listdir(tmpdir)
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sweep(job_id, None)
        shutil.rmtree(tmpdir, ignore_errors=True)
