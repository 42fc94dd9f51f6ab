"""The warden (`launcher.warden`): stood down it touches nothing; at its launcher's death it
kills exactly the processes with the job's marks and removes the job's segments and run dir."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil  # type: ignore[import-untyped,unused-ignore]
import pytest
import trio

from emucluster.config import ENV_JOB_ID
from launcher.cleanup import ENV_AGENT, ENV_JOB_OWNER
from launcher.warden import (
    STAND_DOWN,
    Warden,
    job_marks,
    parse_args,
    strike,
    warden_argv,
    watch,
)
from nicd.shell.lifeline import ENV_LIFELINE

WAIT_S = 30.0
NAMES = (ENV_JOB_ID, ENV_JOB_OWNER, ENV_AGENT)


def _sleeper(job_id: str, owner: int, agent: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "EMU_JOB_ID": job_id, ENV_JOB_OWNER: str(owner), ENV_AGENT: agent}
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env)


def _started(proc: subprocess.Popen[bytes], job_id: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:  # until its environment is the one it was given (after exec)
        try:
            if psutil.Process(proc.pid).environ().get("EMU_JOB_ID") == job_id:
                return
        except psutil.Error:
            pass
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _until_exec(proc: psutil.Process) -> None:
    deadline = time.monotonic() + WAIT_S
    while "launcher.warden" not in proc.cmdline():
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.fixture
def job(tmp_path: Path) -> tuple[str, Path, Path]:
    job_id = uuid.uuid4().hex[:12]
    run_dir = tmp_path / f"emurun-{job_id}-x"
    run_dir.mkdir()
    (run_dir / "nic0.sock").touch()
    segment = Path("/dev/shm") / f"emu_{job_id}_0_warden_test"
    segment.write_bytes(b"x")
    return job_id, run_dir, segment


def test_stood_down_it_touches_nothing(job: tuple[str, Path, Path]) -> None:
    job_id, run_dir, segment = job
    owner = os.getpid()
    proc = _sleeper(job_id, owner, "a")
    try:
        _started(proc, job_id)
        r, w = os.pipe()
        os.write(w, STAND_DOWN)
        assert watch(r, job_id, str(run_dir), owner, "a", None, NAMES) == 0
        assert proc.poll() is None
        assert run_dir.exists()
        assert segment.exists()
    finally:
        proc.kill()
        proc.wait()
        segment.unlink(missing_ok=True)


def test_at_eof_it_sweeps_only_its_job_owner_and_agent(job: tuple[str, Path, Path]) -> None:
    job_id, run_dir, segment = job
    owner = os.getpid()
    ours = _sleeper(job_id, owner, "a")
    others = [_sleeper(job_id, owner, "b"), _sleeper(job_id, 1, "a"), _sleeper("other", owner, "a")]
    try:
        for proc in [ours, *others[:2]]:
            _started(proc, job_id)
        _started(others[2], "other")
        r, w = os.pipe()
        os.close(w)  # the launcher died
        assert watch(r, job_id, str(run_dir), owner, "a", [0], NAMES) == 0
        ours.wait(timeout=WAIT_S)  # ended (killed; reaped by the sweep or here)
        assert all(p.poll() is None for p in others)
        assert not run_dir.exists()
        assert not segment.exists()
    finally:
        for proc in [ours, *others]:
            proc.kill()
            proc.wait()
        segment.unlink(missing_ok=True)


def test_the_strike_kills_exactly_the_processes_with_every_mark() -> None:
    job_id = uuid.uuid4().hex[:12]
    ours = _sleeper(job_id, 7, "a")
    others = [_sleeper(job_id, 7, "b"), _sleeper(job_id, 8, "a"), _sleeper(job_id + "x", 7, "a")]
    try:
        for proc, job in zip([ours, *others], [job_id] * 3 + [job_id + "x"], strict=True):
            _started(proc, job)
        marks = dict(zip(NAMES, (job_id, "7", "a"), strict=True))
        assert strike(marks) == [ours.pid]
        assert ours.wait(timeout=WAIT_S) == -signal.SIGKILL
        assert all(p.poll() is None for p in others)
    finally:
        for proc in [ours, *others]:
            proc.kill()
            proc.wait()


def test_the_marks_are_the_ones_the_sweep_and_the_lifeline_read() -> None:
    assert job_marks() == (*NAMES, ENV_LIFELINE)


def test_arguments_round_trip_and_bad_ones_are_refused() -> None:
    argv = warden_argv("py", "j1", "/tmp/d", 42, "j1.42", [3, 1], NAMES)
    assert argv[:3] == ["py", "-m", "launcher.warden"]
    assert parse_args(argv[3:]) == ("j1", "/tmp/d", 42, "j1.42", [1, 3], list(NAMES))
    argv = warden_argv("py", "j1", "/d", 7, "m", None, NAMES)
    assert parse_args(argv[3:]) == ("j1", "/d", 7, "m", None, list(NAMES))
    for bad in (
        [],
        ["j", "d", "1", "m", "all"],  # no variable names
        ["j", "d", "x", "m", "all", *NAMES],
        ["j", "d", "1", "m", "1,x", *NAMES],
        ["j", "d", "1", "m", "", *NAMES],
    ):
        assert parse_args(bad) is None


def test_the_process_stands_down_and_carries_no_job_mark() -> None:
    async def main() -> None:
        env = {**os.environ, "EMU_JOB_ID": "j", ENV_JOB_OWNER: "1", ENV_AGENT: "m"}
        warden = await Warden.start("j", "/nonexistent", "m", None, env)
        proc = psutil.Process(warden.process.pid)
        await trio.to_thread.run_sync(_until_exec, proc)
        environ = proc.environ()
        assert not set(job_marks()) & set(environ)
        await warden.stand_down()
        assert warden.process.returncode == 0

    trio.run(main)
