"""The pods of examples/kubernetes/emucluster.yaml, run for real as processes on loopback: the
head's and each agent's container command, taken from the manifest, with the manifest's
environment, JOB_COMPLETION_INDEX as an Indexed Job gives it, the ConfigMap's program and a
token file as the Secret would mount them.

What differs from a cluster, and only that: the head listens on 127.0.0.1 and a free port
instead of 0.0.0.0:7070, and the agents dial 127.0.0.1 instead of head.emucluster (no cluster
DNS here), the token and the program live in a temporary directory instead of their mounts,
and PATH's python is this checkout's instead of the image's. No Kubernetes runs here: the
scheduling, the Service's DNS record and the image are not exercised.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "examples" / "kubernetes" / "emucluster.yaml"
WAIT_S = 150.0


def jobs() -> tuple[dict[str, Any], dict[str, Any], str]:
    docs = {
        f"{d['kind']}/{d['metadata']['name']}": d for d in yaml.safe_load_all(MANIFEST.read_text())
    }
    app = docs["ConfigMap/emucluster-app"]["data"]["app.py"]
    return docs["Job/emucluster-head"], docs["Job/emucluster-node"], app


def pod(job: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container["command"], {e["name"]: e["value"] for e in container["env"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_head_and_the_indexed_agents_run_a_job() -> None:
    head_job, node_job, app = jobs()
    tmp = Path(tempfile.mkdtemp(prefix="emuk8s-", dir="/tmp"))
    try:
        token = tmp / "token"
        token.write_text(secrets.token_hex(32) + "\n")
        token.chmod(0o400)  # the Secret's defaultMode
        (tmp / "app.py").write_text(app)
        port = str(free_port())
        base = {**os.environ, "TMPDIR": str(tmp)}
        base["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', '')}"
        command, env = pod(head_job)
        env.update(LISTEN_HOST="127.0.0.1", HEAD_PORT=port, TOKEN_FILE=str(token),
                   APP=str(tmp / "app.py"))  # fmt: skip
        nodes = int(env["NODES"])
        head = subprocess.Popen(command, env={**base, **env}, cwd=tmp, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        agents = []
        for index in range(nodes):
            command, env = pod(node_job)
            env.update(HEAD_ADDR="127.0.0.1", HEAD_PORT=port, TOKEN_FILE=str(token),
                       JOB_COMPLETION_INDEX=str(index))  # fmt: skip
            agent = subprocess.Popen(command, env={**base, **env}, cwd=tmp, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
            agents.append(agent)
        try:
            out, err = head.communicate(timeout=WAIT_S)
            agent_out = [a.communicate(timeout=60)[0] for a in agents]
        finally:
            for proc in (head, *agents):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert head.returncode == 0, (out, err, agent_out)
        assert [a.returncode for a in agents] == [0] * nodes, agent_out
        for rank in range(nodes):
            assert f"rank {rank} of {nodes} on " in out
            assert f"ring {nodes}, sum {nodes * (nodes - 1) // 2}" in out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
