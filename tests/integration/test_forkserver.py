"""emurun with and without the fork server: the same exits, signals, output and program
semantics; real forks, real processes (launcher/forkserver/)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import psutil  # type: ignore[import-untyped,unused-ignore]
import pytest

import emucluster
from tests.integration.test_emurun import WAIT_S, Job

if TYPE_CHECKING:
    from collections.abc import Iterator

FORK_HOST = str(Path(__file__).parent / "hosts" / "fork_host.py")
MODES = ["fork", "spawn"]


@pytest.fixture(params=MODES)
def job(request: pytest.FixtureRequest) -> Iterator[Job]:
    j = Job()
    j.env["EMU_FORKSERVER"] = "1" if request.param == "fork" else "0"
    yield j
    j.teardown()


def forked(job: Job) -> bool:
    return job.env["EMU_FORKSERVER"] == "1"


def infos(out: str) -> dict[int, dict[str, object]]:
    docs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {doc["rank"]: doc for doc in docs}


def test_programs_see_a_fresh_interpreter(job: Job) -> None:
    r = job.run("-np", "3", FORK_HOST, "info", "a b")
    assert r.code == 0, r.err
    got = infos(r.out)
    assert sorted(got) == [0, 1, 2]
    for doc in got.values():
        assert doc["forked"] is forked(job)
        assert doc["argv"] == [FORK_HOST, "info", "a b"]
        assert doc["name"] == "__main__"
        assert doc["file"] == FORK_HOST
        assert doc["path0"] == str(Path(FORK_HOST).resolve().parent)
        assert doc["stdin"] == ""
        assert doc["sigint"] is True
        assert doc["sigchld"] is True
        assert doc["pgid"] is True
    assert len({doc["random"] for doc in got.values()}) == 3  # re-seeded in every child
    assert sorted(line for line in r.err.splitlines() if line.startswith("stderr of")) == [
        "stderr of 0",
        "stderr of 1",
        "stderr of 2",
    ]
    job.assert_clean()


def test_the_interpreter_under_another_name_of_the_same_venv(job: Job) -> None:
    other = next(
        (
            path
            for name in ("python3", "python")
            if (path := os.path.join(os.path.dirname(sys.executable), name)) != sys.executable
            and os.path.exists(path)
        ),
        None,
    )
    if other is None:
        pytest.skip("no second name for this interpreter")
    r = job.run("-np", "2", other, FORK_HOST, "info")
    assert r.code == 0, r.err
    for doc in infos(r.out).values():
        assert doc["forked"] is forked(job)
        assert doc["executable"] == other
    job.assert_clean()


def test_a_module_program(job: Job) -> None:
    job.env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(FORK_HOST).parent), job.env.get("PYTHONPATH", "")]
    )
    job.cwd = job.tmpdir  # a directory that holds none of the zygote's modules (a checkout does)
    r = job.run("-np", "2", "-m", "fork_host", "info")
    assert r.code == 0, r.err
    got = infos(r.out)
    assert sorted(got) == [0, 1]
    for doc in got.values():
        assert doc["argv"] == [FORK_HOST, "info"]  # runpy sets argv[0] to the file, as -m does
        assert doc["path0"] == job.tmpdir
        assert doc["forked"] is forked(job)
    job.assert_clean()


def _shadowing_cwd(job: Job, tmp_path: Path) -> str:
    """A working directory holding an ``emucluster`` (the real one, by a symlink) that a fresh
    interpreter imports only where that directory comes first on its path (``-m``, ``-c``), as
    a source checkout does beside an installed build."""
    cwd = tmp_path / "checkout"  # not in the job's TMPDIR, which must end empty
    cwd.mkdir()
    (cwd / "emucluster").symlink_to(Path(emucluster.__file__).parent)
    job.cwd = str(cwd)
    return str(cwd)


def test_a_script_imports_what_a_fresh_interpreter_would_not_the_launchers_directory(
    job: Job, tmp_path: Path
) -> None:
    """The fork server's zygote once preloaded from the launcher's working directory: run from
    a checkout, a script got the checkout's modules where a fresh interpreter imports the
    installed ones (a benchmark ran the checkout's pure Python under a compiled install)."""
    cwd = _shadowing_cwd(job, tmp_path)
    r = job.run("-np", "2", FORK_HOST, "info")
    assert r.code == 0, r.err
    got = infos(r.out)
    assert sorted(got) == [0, 1]
    for doc in got.values():
        assert doc["forked"] is forked(job)  # the script's directory shadows nothing
        assert not str(doc["emucluster"]).startswith(cwd + os.sep), doc["emucluster"]
    job.assert_clean()


def test_a_module_program_whose_directory_shadows_a_preloaded_module_starts_afresh(
    job: Job, tmp_path: Path
) -> None:
    """``-m`` puts the working directory first: where it holds a module the zygote imported,
    only a fresh interpreter imports what the program would, so the launcher spawns one."""
    cwd = _shadowing_cwd(job, tmp_path)
    # no empty entry: Python reads one as the working directory, which the zygote then has too
    job.env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(FORK_HOST).parent), job.env.get("PYTHONPATH")) if p
    )
    r = job.run("-np", "2", "-m", "fork_host", "info")
    assert r.code == 0, r.err
    got = infos(r.out)
    assert sorted(got) == [0, 1]
    for doc in got.values():
        assert doc["forked"] is False
        assert str(doc["emucluster"]).startswith(cwd + os.sep), doc["emucluster"]
    job.assert_clean()


@pytest.mark.parametrize(("sig", "code"), [("SIGKILL", 137), ("SIGTERM", 143), ("SIGUSR1", 138)])
def test_a_rank_killed_by_a_signal(job: Job, sig: str, code: int) -> None:
    r = job.run("-np", "2", FORK_HOST, "kill", "1", sig)
    assert r.code == code, r.err
    assert "rank 1 (pid " in r.err
    assert f"was killed by {sig}" in r.err
    job.assert_clean()


def test_an_uncaught_exception_prints_the_programs_traceback(job: Job) -> None:
    r = job.run("-np", "2", FORK_HOST, "raise", "0")
    assert r.code == 1, r.err
    assert "rank 0 (pid" in r.err
    assert "exited with code 1" in r.err
    tb = r.err[r.err.index("Traceback") :]
    assert "ValueError: boom from the program" in tb
    first_frame = tb.splitlines()[1]
    assert FORK_HOST in first_frame, tb  # no fork-server or runpy frame before the program's
    assert "launcher/forkserver/" not in tb
    assert "runpy" not in tb
    job.assert_clean()


def test_an_uncaught_keyboard_interrupt_is_death_by_sigint(job: Job) -> None:
    r = job.run("-np", "2", FORK_HOST, "interrupt", "1")
    assert r.code == 130, r.err
    assert "was killed by SIGINT" in r.err
    assert "KeyboardInterrupt" in r.err
    job.assert_clean()


def test_the_end_flushes_files_finalizes_and_prints_the_exit_message(
    job: Job, tmp_path: Path
) -> None:
    r = job.run("-np", "2", FORK_HOST, "unclosed", str(tmp_path))
    assert r.code == 1, r.err
    assert "bye 0" in r.err.splitlines() or "bye 1" in r.err.splitlines(), r.err
    assert "cycle of" in r.out, r.out
    first_failed = 0 if "rank 0 (pid" in r.err else 1
    assert (tmp_path / f"rank{first_failed}.txt").read_text() == "flushed at exit\n"
    job.assert_clean()


@pytest.mark.parametrize("shim", [False, True])
def test_mpi_barrier_with_and_without_the_mpi4py_shim(job: Job, shim: bool) -> None:
    args = ["--mpi4py"] if shim else []
    r = job.run("-np", "3", *args, FORK_HOST, "mpi")
    assert r.code == 0, r.err
    via = "mpi4py" if shim else "emucluster"
    assert sorted(r.out.splitlines()) == [f"rank {i} of 3 via {via}" for i in range(3)]
    job.assert_clean()


def test_no_forkserver_flag_spawns_directly(job: Job) -> None:
    r = job.run("--no-forkserver", "-np", "1", FORK_HOST, "info")
    assert r.code == 0, r.err
    assert infos(r.out)[0]["forked"] is False


@pytest.mark.slow
def test_killing_the_zygote_takes_its_children_and_the_job_down() -> None:
    job = Job()
    try:
        job.env["EMU_FORKSERVER"] = "1"
        job.start("-np", "2", FORK_HOST, "hang")
        pids = job.wait_ready(2)
        zygote = psutil.Process(pids[0]).ppid()
        assert "launcher.forkserver" in " ".join(psutil.Process(zygote).cmdline())
        nicds = [job.nicd_pid(node) for node in range(2)]
        os.kill(zygote, signal.SIGKILL)
        r = job.finish()
        assert r.code != 0
        assert "was killed by SIGKILL" in r.err, r.err
        deadline = time.monotonic() + WAIT_S
        while any(psutil.pid_exists(p) for p in [*pids.values(), *nicds]):
            assert time.monotonic() < deadline, "the zygote's children outlived it"
            time.sleep(0.1)
        job.assert_clean()
    finally:
        job.teardown()
