"""A killed job leaves nothing behind (audit test 17, issue 30): after ``kill -9 emurun`` its
warden ends every process of the job (also what the hosts started) and removes its segments and
run directory; without the warden, the nicds and hosts stop on their own (the lifeline) and the
next emurun sweeps what is left of the job, never a live job's. (`test_orphans.py`: the same
for programs that never open their NIC, and for a killed agent.)

Real emurun, real nicds and hosts, real SIGKILL. Every wait has a generous timeout; no test
asserts a duration.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import psutil  # type: ignore[import-untyped,unused-ignore]
import pytest

from launcher.cleanup import ENV_JOB_OWNER, OWNER_FILE, job_processes, job_segments, sweep_stale
from tests.integration.test_emurun import EMURUN, HOST, WAIT_S, Job

if TYPE_CHECKING:
    from collections.abc import Callable

ORPHAN_HOST = str(Path(__file__).parent / "hosts" / "orphan_host.py")
NODES = 3


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def wait_for(done: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"still not {what} after {timeout:g} s"
        time.sleep(0.2)


def run_other_job(tmpdir_env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    other = uuid.uuid4().hex[:12]
    return subprocess.run(
        [*EMURUN, "--job-id", other, *args],
        env=tmpdir_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )


def zygotes(job_id: str) -> list[psutil.Process]:
    """The job's fork servers still running."""
    found = []
    for proc in job_processes(job_id):
        with contextlib.suppress(psutil.Error):
            if "launcher.forkserver" in " ".join(proc.cmdline()):
                found.append(proc)
    return found


def wardens(emurun: int) -> list[psutil.Process]:
    """The warden (`launcher.warden`) of the emurun with pid ``emurun``."""
    found = []
    with contextlib.suppress(psutil.Error):
        for proc in psutil.Process(emurun).children():
            with contextlib.suppress(psutil.Error):
                if "launcher.warden" in proc.cmdline():
                    found.append(proc)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("forkserver", ["1", "0"])
def test_kill_9_emurun_leaves_nothing_not_even_what_the_hosts_started(
    job: Job, forkserver: str
) -> None:
    """Hosts that opened their port, each with a /dev/shm segment of the job and a child in a
    session of its own that ignores SIGTERM: the warden ends all of it and removes the rest."""
    job.env["EMU_FORKSERVER"] = forkserver
    job.start("-np", str(NODES), ORPHAN_HOST)
    job.wait_ready(NODES)
    started = job_processes(job.id)
    assert len(started) >= 3 * NODES  # nicds, hosts, their detached children
    assert job.proc is not None
    job.proc.kill()
    job.proc.wait(timeout=WAIT_S)
    _, alive = psutil.wait_procs(started, timeout=WAIT_S)
    assert alive == [], [p.pid for p in alive]
    wait_for(lambda: not job_segments(job.id) and not os.listdir(job.tmpdir), "removed")
    job.assert_clean()


@pytest.mark.slow
@pytest.mark.parametrize("forkserver", ["1", "0"])
def test_without_its_warden_a_killed_emurun_is_swept_by_the_next_run(
    job: Job, forkserver: str
) -> None:
    """The warden killed first: the lifeline still stops the nicds and the hosts that opened
    their port, and the next emurun sweeps what is left (the detached children, the segments,
    the run directory)."""
    job.env["EMU_FORKSERVER"] = forkserver
    job.start("-np", str(NODES), ORPHAN_HOST)
    hosts = job.wait_ready(NODES)
    nicds = [job.nicd_pid(node) for node in range(NODES)]
    assert job.proc is not None
    (warden,) = wardens(job.proc.pid)
    warden.kill()
    wait_for(lambda: not running(warden.pid), "killed")  # a zombie until emurun is gone
    job.proc.kill()
    job.proc.wait(timeout=WAIT_S)

    wait_for(lambda: not any(map(running, [*hosts.values(), *nicds])), "stopped")
    wait_for(lambda: not zygotes(job.id), "without a fork server")  # it kills its children
    # What emurun would have swept is still there: the detached children, the segments, the
    # run directory with its socket files.
    detached = job_processes(job.id)
    assert len(detached) == NODES, [p.cmdline() for p in detached]
    assert all(p.environ()[ENV_JOB_OWNER] == str(job.proc.pid) for p in detached)
    assert len(job_segments(job.id)) == NODES
    (run_dir,) = Path(job.tmpdir).iterdir()
    assert (run_dir / OWNER_FILE).is_file()

    done = run_other_job(job.env, "-np", "1", HOST, "hello")
    assert done.returncode == 0, done.stderr
    assert f"swept stale job {job.id}" in done.stderr
    job.assert_clean()


@pytest.mark.slow
def test_the_stale_sweep_never_touches_a_live_job(job: Job) -> None:
    job.start("-np", "2", HOST, "leak")
    job.wait_ready(2)
    before = sorted(p.pid for p in job_processes(job.id))
    segments = job_segments(job.id)
    done = run_other_job(job.env, "-np", "1", HOST, "hello")
    assert done.returncode == 0, done.stderr
    assert "swept stale job" not in done.stderr
    assert sorted(p.pid for p in job_processes(job.id)) == before
    assert job_segments(job.id) == segments
    assert len(list(Path(job.tmpdir).iterdir())) == 1
    assert job.proc is not None
    job.proc.send_signal(signal.SIGTERM)
    assert job.finish().code == 128 + signal.SIGTERM
    job.assert_clean()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_sweep_stale_scopes_by_owner_and_job(tmp_path: Path) -> None:
    """Only a run directory whose owner is gone is swept, with the processes that name that
    owner; a live owner's job, a directory without owner file and a same-id job of another
    launcher are left alone."""
    tmp, shm = tmp_path / "tmp", tmp_path / "shm"
    tmp.mkdir()
    shm.mkdir()
    dead, me = _dead_pid(), psutil.Process()
    pidns = os.readlink("/proc/self/ns/pid")
    job_a, job_b = f"a{uuid.uuid4().hex[:8]}", f"b{uuid.uuid4().hex[:8]}"

    def run_dir(job_id: str, pid: int | None, started: float = 0.0, pidns: str = pidns) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"emurun-{job_id}-", dir=tmp))
        (path / "nic0.sock").touch()
        if pid is not None:
            doc = {"pid": pid, "started": started, "job": job_id, "pidns": pidns}
            (path / OWNER_FILE).write_text(json.dumps(doc))
        return path

    def sleeper(job_id: str, owner: int) -> subprocess.Popen[bytes]:
        env = {**os.environ, "EMU_JOB_ID": job_id, ENV_JOB_OWNER: str(owner)}
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env)

    stale = run_dir(job_a, dead)
    reused_pid = run_dir(job_a, me.pid, started=me.create_time() - 100)  # same pid, not us
    live = run_dir(job_b, me.pid, started=me.create_time())
    unowned = run_dir(job_b, None)
    elsewhere = run_dir(job_a, dead, pidns="pid:[1]")  # another container's: not ours to judge
    (shm / f"emu_{job_a}_0_0_1").touch()
    (shm / f"emu_{job_b}_0_0_1").touch()
    orphans = [sleeper(job_a, dead), sleeper(job_a, me.pid)]
    bystanders = [sleeper(job_b, dead), sleeper(job_a, 1)]
    try:
        wait_for(lambda: len(job_processes(job_a)) == 3, "started")
        swept = sweep_stale(tmp, shm)
        assert sorted(job_id for job_id, _ in swept) == [job_a, job_a]
        killed = sorted(int(name.split("[")[1][:-1]) for _, r in swept for name in r.killed)
        assert killed == sorted(p.pid for p in orphans)
        wait_for(lambda: not any(running(p.pid) for p in orphans), "killed")
        assert all(p.poll() is None for p in bystanders)
        assert not stale.exists()
        assert not reused_pid.exists()
        assert live.exists()
        assert unowned.exists()
        assert elsewhere.exists()
        assert sorted(p.name for p in shm.iterdir()) == [f"emu_{job_b}_0_0_1"]
    finally:
        for proc in orphans + bystanders:
            proc.kill()
            proc.wait()
