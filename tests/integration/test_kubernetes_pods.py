"""The pods of examples/kubernetes/emucluster.yaml, run for real as processes on loopback: the
head's and each agent's container command, taken from the manifest, with the manifest's
environment, JOB_COMPLETION_INDEX as an Indexed Job gives it, the ConfigMap's program and a
token file as the Secret would mount them.

Two ways. On loopback: the head listens on 127.0.0.1 and a free port instead of 0.0.0.0:7070
and the agents dial 127.0.0.1 instead of head.emucluster. In network namespaces (root): one
namespace per pod on a bridge in 198.18.7.0/24, the manifest's listen address, port and head
name unchanged, head.emucluster resolved by the namespaces' /etc/hosts. Both: the token and the
program live in a temporary directory instead of their mounts, and PATH's python is this
checkout's instead of the image's. No Kubernetes runs here: the scheduling, the Service's DNS
record and the image are not exercised.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from emubench.netns import Fabric, unavailable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.slow
NETNS_WHY = unavailable()

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


def run_pods(
    tmp: Path,
    head_env: dict[str, str],
    node_env: dict[str, str],
    *,
    head_wrap: Callable[[list[str]], list[str]],
    node_wrap: Callable[[int, list[str]], list[str]],
) -> None:
    """Start the head pod and NODES agent pods (their manifest commands and environments,
        updated by ``head_env`` and ``node_env``; each started through its wrap: as it is, or in
    a network namespace), wait for the job, check its output."""
    head_job, node_job, app = jobs()
    token = tmp / "token"
    token.write_text(secrets.token_hex(32) + "\n")
    token.chmod(0o400)  # the Secret's defaultMode
    (tmp / "app.py").write_text(app)
    base = {**os.environ, "TMPDIR": str(tmp)}
    base["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', '')}"
    command, env = pod(head_job)
    env.update(TOKEN_FILE=str(token), APP=str(tmp / "app.py"), **head_env)
    nodes = int(env["NODES"])
    head = subprocess.Popen(head_wrap(command), env={**base, **env}, cwd=tmp, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    agents = []
    for index in range(nodes):
        command, env = pod(node_job)
        env.update(TOKEN_FILE=str(token), JOB_COMPLETION_INDEX=str(index), **node_env)
        agent = subprocess.Popen(
            node_wrap(index, command), env={**base, **env}, cwd=tmp, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
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


@pytest.fixture
def tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="emuk8s-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_head_and_the_indexed_agents_run_a_job_on_loopback(tmp: Path) -> None:
    port = str(free_port())
    run_pods(tmp, {"LISTEN_HOST": "127.0.0.1", "HEAD_PORT": port},
             {"HEAD_ADDR": "127.0.0.1", "HEAD_PORT": port},
             head_wrap=lambda argv: argv, node_wrap=lambda index, argv: argv)  # fmt: skip


@pytest.mark.skipif(NETNS_WHY is not None, reason=f"{NETNS_WHY}")
def test_the_pods_in_network_namespaces_with_the_manifests_names(tmp: Path) -> None:
    """Each pod in a network namespace of its own (and its own pid namespace and /dev/shm)
    on one bridge; the head listens on 0.0.0.0:7070 and the agents dial head.emucluster, as
    in the manifest: the name resolves through the namespaces' own /etc/hosts (what
    ``ip netns exec`` mounts from /etc/netns/NAME), standing in for the Service's record."""
    _, node_job, _ = jobs()
    nodes = int(node_job["spec"]["completions"])
    fab = Fabric(nodes)
    etc = [Path("/etc/netns") / fab.ns(host) for host in fab.hosts]
    made_root = not Path("/etc/netns").exists()
    try:
        for path in etc:
            path.mkdir(parents=True)
            (path / "hosts").write_text(f"127.0.0.1 localhost\n{fab.head_addr} head.emucluster\n")
        run_pods(tmp, {}, fab.env(), head_wrap=fab.in_head,
                 node_wrap=lambda index, argv: fab.exec_argv(fab.hosts[index], argv))  # fmt: skip
    finally:
        fab.close()
        for path in etc:
            shutil.rmtree(path, ignore_errors=True)
        if made_root:
            with contextlib.suppress(OSError):
                Path("/etc/netns").rmdir()
