"""The cluster of containers' files keep their invariants: docker-compose.yml (parsed with a YAML
parser, Compose's interpolation applied), the Dockerfile and docker/dockerd-up.sh.

Addresses inside 198.18.0.0/15 only; one image; init, shm_size and SYS_NICE on every service;
the head runs ``emurun --launcher none`` and the nodes dial it with ``emuproxy``; the token is
made per job and appears nowhere in the files; the job's exit code is the head's.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from launcher.cli import build_parser, split_argv

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
BENCHMARK_NET = ipaddress.ip_network("198.18.0.0/15")
PRIVATE_NETS = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
HEX_SECRET = re.compile(r"\b[0-9a-fA-F]{32,}\b")
_VAR = re.compile(r"\$\$|\$\{(\w+)(?::?-([^}]*))?\}|\$(\w+)")


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's substitution: ``${VAR}``, ``${VAR:-default}``, ``$VAR``, ``$$`` -> ``$``."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(3)
        return env.get(name) or (match.group(2) or "")

    return _VAR.sub(one, text)


def load(env: dict[str, str] | None = None) -> dict[str, Any]:
    values = {"PWD": "/home/user/project", **(env or {})}
    doc = yaml.safe_load(interpolate(COMPOSE.read_text(), values))
    assert isinstance(doc, dict)
    return doc


def shell_words(service: dict[str, Any]) -> list[str]:
    """The words of the service's command (``sh -c SCRIPT``: the script's words)."""
    command = service["command"]
    script = command[-1] if command[0] == "sh" else shlex.join(command)
    return shlex.split(script.replace(";", " ; ").replace("&", " & "))


def program_argv(service: dict[str, Any], program: str) -> list[str]:
    """The argv the service's script runs ``program`` with (up to the next ``;`` or ``&``)."""
    words = shell_words(service)
    assert words.count(program) == 1, words
    start = words.index(program)
    ends = [i for i, word in enumerate(words) if word in (";", "&") and i > start]
    return words[start : min(ends, default=len(words))]


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_two_services_one_image() -> None:
    services = load()["services"]
    assert set(services) == {"head", "node"}
    assert services["head"]["image"] == services["node"]["image"] == "emucluster:local"


@pytest.mark.parametrize("name", ["head", "node"])
def test_every_service_has_init_shm_and_sys_nice(name: str) -> None:
    service = load()["services"][name]
    assert service["init"] is True
    size = re.fullmatch(r"(\d+)([kmg])", str(service["shm_size"]).lower())
    assert size, service["shm_size"]
    unit = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[size.group(2)]
    assert int(size.group(1)) * unit >= 128 << 20
    assert "SYS_NICE" in service["cap_add"]
    assert service["cpu_rt_runtime"] == "0ms", "an RT budget by default fails on most engines"
    assert "ports" not in service, "no published ports (no NAT on the fabric)"
    assert "container_name" not in service, "a fixed name breaks --scale"
    assert "network_mode" not in service


@pytest.mark.parametrize("name", ["head", "node"])
def test_the_program_directory_is_mounted_at_the_same_path(name: str) -> None:
    service = load({"PWD": "/srv/my project"})["services"][name]
    assert "/srv/my project:/srv/my project" in service["volumes"]
    assert service["working_dir"] == "/srv/my project"


@pytest.mark.parametrize("subnet", [None, "198.19.200.0/24"])
def test_every_network_is_pinned_inside_198_18_0_0_15(subnet: str | None) -> None:
    doc = load({"EMU_SUBNET": subnet} if subnet else None)
    networks = doc["networks"]
    assert networks
    for name, network in networks.items():
        configs = network["ipam"]["config"]
        assert configs, f"network {name} has no explicit subnet"
        for config in configs:
            net = ipaddress.ip_network(config["subnet"])
            assert net.subnet_of(BENCHMARK_NET), net  # type: ignore[arg-type]
            assert not any(net.overlaps(p) for p in PRIVATE_NETS)
    for service in doc["services"].values():
        assert set(service["networks"]) <= set(networks)


def test_the_daemon_script_keeps_docker_inside_198_18_0_0_15() -> None:
    script = (ROOT / "docker" / "dockerd-up.sh").read_text()
    bip = re.search(r'^bip="([^"]+)"', script, re.M)
    pool = re.search(r'^pool="base=([^,]+),size=(\d+)"', script, re.M)
    assert bip
    assert pool
    assert ipaddress.ip_interface(bip.group(1)).network.subnet_of(BENCHMARK_NET)  # type: ignore[arg-type]
    assert ipaddress.ip_network(pool.group(1)).subnet_of(BENCHMARK_NET)  # type: ignore[arg-type]
    assert '--bip "$bip" --default-address-pool "$pool"' in script


def test_head_runs_emurun_waiting_for_the_nodes_agents() -> None:
    values = {
        "NODES": "6",
        "NP": "12",
        "APP": "app.py --size 3",
        "EMURUN_ARGS": "--bcast nic-mcast",
    }
    doc = load(values)
    argv = program_argv(doc["services"]["head"], "emurun")
    assert argv[:3] == ["emurun", "--launcher", "none"]
    assert option(argv, "--agents") == "6"
    assert option(argv, "-np") == "12"
    assert option(argv, "--bcast") == "nic-mcast"
    assert argv[-3:] == ["app.py", "--size", "3"]
    assert option(argv, "--token-file") == "/run/emucluster/token"
    assert option(argv, "--bind-to") == "none", "one machine: not every node on CPU 0"
    core = program_argv(load({"EMU_BIND_TO": "core"})["services"]["head"], "emurun")
    assert option(core, "--bind-to") == "core"
    host, port = option(argv, "--listen").rsplit(":", 1)
    assert host == "0.0.0.0"
    assert port.isdigit()


def test_nodes_dial_the_head_on_its_listening_port() -> None:
    doc = load({"SLOTS": "2"})
    head = program_argv(doc["services"]["head"], "emurun")
    node = program_argv(doc["services"]["node"], "emuproxy")
    assert node[0] == "emuproxy"
    assert option(node, "--connect") == "head:" + option(head, "--listen").rsplit(":", 1)[1]
    assert option(node, "--token-file") == option(head, "--token-file")
    assert option(node, "--slots") == "2"


def test_the_head_command_parses_with_emuruns_own_parser() -> None:
    parser = build_parser()
    if "--launcher" not in parser._option_string_actions:
        pytest.skip("emurun has no --launcher yet (the multi-host launcher of branch i16-agent)")
    argv = program_argv(load()["services"]["head"], "emurun")
    ours, theirs = split_argv(argv[1:], parser.valued)
    parser.parse_args(ours)
    assert theirs == ["examples/demo.py"]


def test_the_token_is_made_per_job_and_never_written_down() -> None:
    text = COMPOSE.read_text()
    assert not HEX_SECRET.search(text), "a literal secret in docker-compose.yml"
    assert not re.search(r"--token(?!-file)\b", text), "a token on a command line"
    doc = load()
    for service in doc["services"].values():
        for key in service.get("environment", {}):
            assert "TOKEN" not in key.upper()
            assert "SECRET" not in key.upper()
    # the token volume is tmpfs: it lives only while the job's containers run
    token_volume = doc["volumes"]["token"]["driver_opts"]
    assert token_volume["type"] == "tmpfs"
    assert "token:/run/emucluster:ro" in doc["services"]["node"]["volumes"]
    head_script = " ".join(shell_words(doc["services"]["head"]))
    assert "secrets.token_hex" in head_script, "the head makes a fresh token when the job starts"
    assert head_script.index("token_hex") < head_script.index("exec emurun")


def test_the_documented_command_takes_the_exit_code_from_the_head() -> None:
    header = COMPOSE.read_text().split("\nx-emucluster", 1)[0]
    assert "--exit-code-from head" in header
    guide = (ROOT / "docs" / "guide" / "hosts.md").read_text()
    section = guide.split("## Cluster of containers", 1)[1].split("\n## ", 1)[0]
    assert "--exit-code-from head" in section
    assert "docker-compose up" in section
    assert "docker compose up" in section
    services = load()["services"]
    for service in services.values():
        assert "restart" not in service, "a restarted container would outlive the job"
    # a node whose agent is done must not end first: compose would stop the head (SIGTERM)
    node_script = services["node"]["command"][-1]
    assert node_script.rstrip().endswith("sleep infinity & wait")
    assert "exec emuproxy" not in node_script


def test_the_dockerfile_builds_without_a_registry() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    lines = [line.strip() for line in dockerfile.splitlines()]
    assert not any(re.match(r"#\s*syntax\s*=", line, re.I) for line in lines), "pulls a frontend"
    assert "ARG BASE_IMAGE=emucluster-base:bookworm" in lines
    froms = [line for line in lines if line.upper().startswith("FROM ")]
    assert froms == ["FROM ${BASE_IMAGE}"]
    install = dockerfile[dockerfile.index("pip install") :]
    assert "--no-index" in install.split("&&")[0]
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert ignore[ignore.index("*") :] == ["*", "!build/docker/wheels"]
