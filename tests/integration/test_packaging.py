"""The package as a user installs it (compiled where a C compiler works, docs/dev/build.md): the
wheel carries every data file the code loads, and a fresh environment holding only that wheel
(working directory outside the source tree, so nothing is imported from it) compiles a NICVM
module and runs a 2-node emurun job.

The fresh venv borrows the running environment's dependencies through a ``.pth`` line placed
after its own site-packages, so the test needs no network; the project itself comes only from
the wheel (``pip install --no-deps``), which is first on ``sys.path``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.integration.mpirun import ROOT

pytestmark = pytest.mark.slow

PACKAGES = ("nicd", "emucluster", "launcher")
BUILD_TIMEOUT_S = 900  # the wheel compiles nicd's cores with mypyc: ~1 min of CPU, more when loaded
JOB_TIMEOUT_S = 120
BUILD_LEFTOVERS = ("build", "dist", "*.egg-info", ".git", ".venv", "__pycache__", ".*_cache")

# A 2-node job: compile a module on the host, upload it to the NIC (which compiles it again
# with its own copy of the grammar), and broadcast with the NICVM algorithm (Fig 4.3's module).
PROGRAM = textwrap.dedent(
    """
    import sys
    import emucluster, launcher, nicd
    from emucluster import MPI, nicvm
    from nicd.nicvm.modules import NOOP

    for package in (emucluster, launcher, nicd):  # from the wheel in this venv, nowhere else
        assert package.__file__.startswith(sys.prefix + "/lib/"), package.__file__
    comm = MPI.COMM_WORLD
    nicvm.check(NOOP)
    nicvm.load("noop", NOOP)
    assert "noop" in nicvm.modules(), nicvm.modules()
    got = comm.bcast({"from": 0} if comm.rank == 0 else None, root=0, algorithm="nicvm")
    assert got == {"from": 0}, got
    print(f"wheel ok {comm.rank}", flush=True)
    """
)


def _data_files() -> set[str]:
    """Every non-Python file the source packages hold (what the code may open at run time)."""
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*"):
            # extension files are what a compiled build makes of the .py files, not data
            if path.is_file() and path.suffix not in {".py", ".pyc", ".so"}:
                found.add(path.relative_to(ROOT).as_posix())
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Build from a clean copy: setuptools reuses a checkout's build/ and *.egg-info, whose
    # stale files would hide a data file missing from the package configuration.
    source = tmp_path_factory.mktemp("source") / "emucluster"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*BUILD_LEFTOVERS))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)],
        check=True,
        timeout=BUILD_TIMEOUT_S,
        cwd=out,
    )
    (built,) = out.glob("emucluster-*.whl")
    return built


def test_wheel_carries_every_data_file(wheel: Path) -> None:
    data = _data_files()
    assert "nicd/nicvm/grammar.lark" in data  # the check below is about something real
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert data <= names, sorted(data - names)


def test_installed_wheel_runs_nicvm_outside_the_source_tree(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # Dependencies from the running environment, after the venv's own site-packages.
    (Path(site) / "zz_borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--ignore-installed", str(wheel)],
        check=True, timeout=BUILD_TIMEOUT_S, cwd=tmp_path,
    )  # fmt: skip
    program = tmp_path / "app.py"
    program.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = tempfile.mkdtemp(prefix="emuwhl-", dir="/tmp")  # short: socket paths
    job = subprocess.run(
        [venv / "bin" / "emurun", "-np", "2", "-q", "--timeout", str(JOB_TIMEOUT_S - 20),
         python, program],
        capture_output=True, text=True, timeout=JOB_TIMEOUT_S, cwd=tmp_path, env=env,
        check=False,
    )  # fmt: skip
    shutil.rmtree(env["TMPDIR"], ignore_errors=True)
    assert job.returncode == 0, job.stderr
    ok = sorted(line for line in job.stdout.splitlines() if line.startswith("wheel ok"))
    assert ok == ["wheel ok 0", "wheel ok 1"], job.stdout
