"""An agent killed outright (kill -9) takes its nodes with it, without pid namespaces.

Two agents on this machine, started through ``--launcher exec`` with a plain local command
(no namespace, no container): the nodes of the killed one must stop by themselves (the
agent's lifeline), and emurun must end the job as a lost host."""

from __future__ import annotations

import os
import signal
import sys

import psutil
import pytest

from tests.integration.mpirun import LOCAL_EXEC, ROOT, Background, agents_of

pytestmark = pytest.mark.slow

RING = ROOT / "tests" / "integration" / "multihost" / "ring_rounds.py"
WAIT_S = 120.0


def test_a_killed_agent_takes_its_nodes_with_it() -> None:
    argv = [sys.executable, "-m", "launcher.cli", "--host", "localhost:1,127.0.0.1:1",
            "--launcher", "exec", "--launcher-exec", LOCAL_EXEC,
            "--agent-cmd", f"{sys.executable} -m launcher.agent", "--timeout", "150",
            "-np", "2", str(RING), "2000", "0.05"]  # fmt: skip
    job = Background(argv, dict(os.environ), wait_s=WAIT_S)
    try:
        job.wait_for("started")
        victim = next(a for name, a in agents_of(job.proc.pid).items() if name != "localhost")
        nodes = victim.children(recursive=True)
        assert len(nodes) >= 2, [n.cmdline() for n in nodes]  # its nicd and its host
        os.kill(victim.pid, signal.SIGKILL)
        code, _, err = job.finish()
        assert code == 123, err
        _, alive = psutil.wait_procs(nodes, timeout=30)
        assert alive == [], [p.cmdline() for p in alive]
    finally:
        if job.proc.poll() is None:
            job.proc.kill()
            job.proc.wait()
