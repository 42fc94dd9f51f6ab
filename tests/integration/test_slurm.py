"""emurun under a real Slurm (one slurmctld and three slurmd on this machine, see
`tests.integration.slurm_cluster`): ``salloc -N2 emurun`` picks the slurm launcher by itself
and runs the collective, point-to-point (ANY_SOURCE) and ring programs; the sbatch example
runs to the end; a failing rank's code comes back through salloc; ``scancel``, a killed
agent and Ctrl-C of emurun end the job with the code that says why, leaving no process and
no file behind."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.integration import slurm_cluster
from tests.integration.mpirun import PROGRAMS, ROOT, Background
from tests.integration.slurm_cluster import MARK, SlurmCluster

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
EMURUN = str(BIN / "emurun")
WAIT_S = 240.0
RING = ROOT / "tests" / "integration" / "multihost" / "ring_rounds.py"
EXIT_LOST_HOST = 123


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    found, started = slurm_cluster.start_or_find()
    try:
        yield found
    finally:
        if started is not None:
            slurm_cluster.stop(started)


class Job(Background):
    """One Slurm client command (salloc, sbatch) of a test, marked, its output collected."""

    def __init__(self, cluster: SlurmCluster, tool: str, *args: str) -> None:
        self.mark = uuid.uuid4().hex
        self.name = f"emut{self.mark[:8]}"
        self.tmpdir = tempfile.mkdtemp(prefix="emuslurmjob-", dir="/tmp")
        env = cluster.env(**{MARK: self.mark, "TMPDIR": self.tmpdir,
                             "PATH": f"{BIN}:{os.environ['PATH']}"})  # fmt: skip
        super().__init__([tool, f"--job-name={self.name}", *args], env, WAIT_S)

    def assert_clean(self) -> None:
        """No process of the job left anywhere, nothing left in its TMPDIR (a SIGKILLed
        agent's run directory included: its warden sweeps it, launcher/warden.py)."""
        left = slurm_cluster.wait_none_left(self.mark)
        assert left == {}, left
        deadline = time.monotonic() + 30
        while os.listdir(self.tmpdir) and time.monotonic() < deadline:
            time.sleep(0.1)  # the warden's sweep runs as the job ends
        assert os.listdir(self.tmpdir) == []
        shutil.rmtree(self.tmpdir)


def salloc(cluster: SlurmCluster, nodes: int, tasks: int, *emurun: str) -> Job:
    return Job(cluster, "salloc", f"-N{nodes}", f"-n{tasks}", "-O", "--time=10",
               EMURUN, "--timeout", "200", *emurun)  # fmt: skip


def test_the_test_slurm_runs_several_slurmd(cluster: SlurmCluster) -> None:
    assert len(cluster.nodes) >= 2, cluster.nodes


@pytest.mark.parametrize("suite", ["coll", "p2p"])
def test_salloc_emurun_picks_slurm_and_runs_a_suite(cluster: SlurmCluster, suite: str) -> None:
    job = salloc(cluster, 2, 4, str(PROGRAMS / f"{suite}_suite.py"))
    code, out, err = job.finish()
    assert code == 0, err
    got = sorted(line for line in out.splitlines() if line.startswith(f"{suite} ok"))
    assert got == sorted(f"{suite} ok {r}" for r in range(4)), err
    # the slurm launcher: one agent per allocated node, named as Slurm names them
    assert re.search(r"4 nodes ready on 2 hosts \(n\d=[\d.]+:\d, n\d=[\d.]+:\d\)", err), err
    assert "starting:" not in err  # stderr is no terminal: the one ready line, no live count
    job.assert_clean()


def test_sbatch_example_runs_a_ring(cluster: SlurmCluster, tmp_path: Path) -> None:
    output = tmp_path / "job.out"
    script = ROOT / "examples" / "slurm" / "emurun.sbatch"
    job = Job(cluster, "sbatch", "--wait", "-N2", "--ntasks-per-node=3", "-O",
              f"--output={output}", f"--chdir={ROOT}", str(script),
              str(RING), "20", "0.01")  # fmt: skip
    code, _out, err = job.finish()
    text = output.read_text() if output.exists() else "(no output file)"
    assert code == 0, f"{err}\n{text}"
    assert "rounds ok 120" in text, text  # 6 ranks x 20 rounds, summed by allreduce
    assert "6 nodes ready on 2 hosts" in text, text
    job.assert_clean()


def test_failing_rank_code_comes_back_through_salloc(cluster: SlurmCluster) -> None:
    job = salloc(cluster, 2, 4, str(PROGRAMS / "failing.py"), "exit")
    code, _out, err = job.finish()
    assert code == 3, err  # rank 1's sys.exit(3)
    job.assert_clean()


def _processes(mark: str, ending: bytes) -> list[int]:
    """The marked processes running a command whose path ends with ``ending``."""
    marked = slurm_cluster.marked(mark).items()
    return [pid for pid, words in marked if any(w.endswith(ending) for w in words[:2])]


def test_killed_agent_ends_the_job_and_leaves_nothing(cluster: SlurmCluster) -> None:
    job = salloc(cluster, 2, 4, str(RING), "400", "0.05")
    job.wait_for("started")
    agents = _processes(job.mark, b"/emuproxy")
    assert len(agents) == 2, agents
    os.kill(agents[-1], signal.SIGKILL)
    code, _out, err = job.finish()
    assert code == EXIT_LOST_HOST, err
    assert "lost host n" in err, err
    job.assert_clean()  # the killed agent's warden swept its run directory too


def test_scancel_ends_the_job_and_leaves_nothing(cluster: SlurmCluster) -> None:
    job = salloc(cluster, 2, 4, str(RING), "400", "0.05")
    job.wait_for("started")
    done = subprocess.run(["scancel", "--name", job.name], env=cluster.env(), timeout=60,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    code, _out, err = job.finish()
    assert code == 128 + signal.SIGTERM, err  # what Slurm sends every process of the step
    assert re.search(r"the Slurm job \d+ (was cancelled|is ending)", err), err
    assert "rounds ok" not in "".join(job.out)
    job.assert_clean()


def test_ctrl_c_of_emurun_ends_the_step_and_leaves_nothing(cluster: SlurmCluster) -> None:
    job = salloc(cluster, 2, 4, str(RING), "400", "0.05")
    job.wait_for("started")
    emuruns = _processes(job.mark, b"/emurun")
    assert len(emuruns) == 1, emuruns
    os.kill(emuruns[0], signal.SIGINT)
    code, _out, err = job.finish()
    assert code == 130, err
    job.assert_clean()
