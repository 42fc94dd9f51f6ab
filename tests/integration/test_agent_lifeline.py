"""An agent killed outright (kill -9) takes its nodes with it, without pid namespaces.

Two agents on this machine, started through ``--launcher exec`` with a plain local command
(no namespace, no container): the nodes of the killed one must stop by themselves (the
agent's lifeline), and emurun must end the job as a lost host."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from tests.integration.mpirun import ROOT

pytestmark = pytest.mark.slow

RING = ROOT / "tests" / "integration" / "multihost" / "ring_rounds.py"
LOCAL_EXEC = "sh -c 'shift; exec \"$@\"' sh"  # an ssh-like command that runs here
WAIT_S = 120.0


def _agents_of(emurun: psutil.Process) -> dict[str, psutil.Process]:
    """emurun's agents by --name... host name (from their command lines)."""
    found = {}
    for proc in emurun.children(recursive=True):
        try:
            words = proc.cmdline()
        except psutil.Error:
            continue
        if "launcher.agent" in words and "--name" in words:
            found[words[words.index("--name") + 1]] = proc
    return found


def test_a_killed_agent_takes_its_nodes_with_it() -> None:
    argv = [sys.executable, "-m", "launcher.cli", "--host", "localhost:1,127.0.0.1:1",
            "--launcher", "exec", "--launcher-exec", LOCAL_EXEC,
            "--agent-cmd", f"{sys.executable} -m launcher.agent", "--timeout", "150",
            "-np", "2", str(RING), "2000", "0.05"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out: list[str] = []
    err: list[bytes] = []
    assert proc.stdout is not None
    assert proc.stderr is not None
    stdout, stderr = proc.stdout, proc.stderr
    threading.Thread(target=lambda: out.extend(x.decode() for x in stdout), daemon=True).start()
    threading.Thread(target=lambda: err.extend(stderr), daemon=True).start()
    try:
        deadline = time.monotonic() + WAIT_S
        while not any("started" in line for line in out):
            assert proc.poll() is None, b"".join(err).decode()
            assert time.monotonic() < deadline, b"".join(err).decode()
            time.sleep(0.05)
        agents = _agents_of(psutil.Process(proc.pid))
        victim = next(a for name, a in agents.items() if name != "localhost")
        nodes = victim.children(recursive=True)
        assert len(nodes) >= 2, [n.cmdline() for n in nodes]  # its nicd and its host
        os.kill(victim.pid, signal.SIGKILL)
        code = proc.wait(timeout=WAIT_S)
        assert code == 123, b"".join(err).decode()
        _, alive = psutil.wait_procs(nodes, timeout=30)
        assert alive == [], [p.cmdline() for p in alive]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
