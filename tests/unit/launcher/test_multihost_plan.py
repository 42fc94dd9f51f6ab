"""The multi-host command lines: emurun's host options -> HostsPlan, the agent's argv and the
launcher commands (the token never on a command line), the agent's own plan and its bind
address rules."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import pytest

from launcher import control
from launcher.agent.__main__ import options_from_argv, read_token
from launcher.agent.session import check_bind_addr, plan_from_launch
from launcher.cli import plan_from_argv
from launcher.errors import LaunchError, ProgramNotFound, UsageError
from launcher.multihost.hostfile import HostSpec
from launcher.multihost.starters import Starter, agent_words

if TYPE_CHECKING:
    from pathlib import Path


def test_one_machine_has_no_hosts_plan() -> None:
    assert plan_from_argv(["-np", "2", sys.executable], os.environ).hosts is None


def test_host_list_plan_keeps_the_program_unresolved(tmp_path: Path) -> None:
    plan = plan_from_argv(
        ["-np", "3", "--host", "a:2,b", "--launcher", "exec", "--launcher-exec", "sh x.sh",
         "--map-by", "node", "remote_only.py", "-v"], os.environ,
    )  # fmt: skip
    assert plan.hosts is not None
    assert plan.hosts.hosts == (HostSpec("a", 2), HostSpec("b", 1))
    assert plan.hosts.exec_cmd == ("sh", "x.sh")
    assert plan.hosts.map_by == "node"
    assert plan.hosts.program_words == ("remote_only.py", "-v")  # not looked up here


def test_hostfile_plan_defaults_to_ssh(tmp_path: Path) -> None:
    hf = tmp_path / "hosts"
    hf.write_text("n1 slots=4\n")
    plan = plan_from_argv(["-np", "4", "--hostfile", str(hf), "app.py"], os.environ)
    assert plan.hosts is not None
    assert plan.hosts.launcher == "ssh"


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["-np", "5", "--host", "a:2,b:2", "p.py"], "needs 5 slots"),
        (["-np", "1", "--host", "a", "--hostfile", "f", "p.py"], "exclude each other"),
        (["-np", "1", "--launcher", "exec", "--host", "a", "p.py"], "--launcher-exec"),
        (["-np", "1", "--launcher", "none", "p.py"], "--agents"),
        (["-np", "1", "--launcher", "none", "--agents", "2", "p.py"], "--token-file"),
        (["-np", "1", "--launcher", "none", "--agents", "1", "--host", "a", "p.py"], "no hosts"),
        (["-np", "1", "--launcher", "ssh", "p.py"], "--hostfile"),
        (["-np", "1", "--host", "a", "--listen", "nope", "p.py"], "ADDR:PORT"),
    ],
)
def test_bad_host_options(argv: list[str], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        plan_from_argv(argv, os.environ)


def test_launcher_commands_carry_no_token() -> None:
    words = agent_words(["emuproxy"], "198.18.7.1:7070", 2, "n2", quiet=False)
    assert words == ["emuproxy", "--connect", "198.18.7.1:7070", "--token-file", "-",
                     "--agent-id", "2", "--name", "n2"]  # fmt: skip
    assert Starter("exec", ("docker", "exec", "-i")).argv("c1", words) == [
        "docker", "exec", "-i", "c1", *words,
    ]  # fmt: skip
    ssh = Starter("ssh").argv("n2", words)
    assert ssh[:4] == ["ssh", "-x", "-o", "BatchMode=yes"]
    assert ssh[4:] == ["n2", " ".join(words)]


def test_agent_options_read_the_token_from_a_file(tmp_path: Path) -> None:
    token = tmp_path / "t"
    token.write_text("  s3cret \n")
    argv = ["--connect", "head:7070", "--token-file", str(token), "--slots", "2", "--name", "n"]
    opts = options_from_argv([*argv, "--bind-addr", "198.18.7.11"])
    assert (opts.host, opts.port, opts.token, opts.slots) == ("head", 7070, b"s3cret", 2)
    assert opts.bind_addr == "198.18.7.11"
    token.write_text("\n")
    with pytest.raises(UsageError, match="no token"):
        read_token(str(token))
    for bad in ("head", "head:x", ":1", "head:70000"):
        with pytest.raises(UsageError, match="HOST:PORT"):
            options_from_argv(["--connect", bad, "--token-file", str(tmp_path / "t")])


@pytest.mark.parametrize(
    ("addr", "multi", "ok"),
    [("198.18.7.11", True, True), ("127.0.0.1", False, True), ("127.0.0.1", True, False),
     ("0.0.0.0", False, False), ("eth0", False, False)],
)  # fmt: skip
def test_bind_address_rules(addr: str, multi: bool, ok: bool) -> None:
    if ok:
        check_bind_addr(addr, multi)
    else:
        with pytest.raises(LaunchError):
            check_bind_addr(addr, multi)


def _launch(**changes: object) -> control.Launch:
    fields: dict[str, object] = {
        "job_id": "j1", "np": 4, "nodes": [2, 3], "program": [sys.executable, "-c", "1"],
        "module": None, "cwd": "/", "env": {"EMU_BCAST": "binomial"},
        "faults": {"loss": 0.1, "seed": 2}, "nicd_args": [], "stats": True,
        "bind_to": "core", "nic_priority": "rt", "stop_grace": 1.0, "ready_timeout": 9.0,
        "multi_host": True, "trace": False,
    }  # fmt: skip
    fields.update(changes)
    return control.Launch(**fields)  # type: ignore[arg-type]


def test_the_agent_plan_binds_its_address_and_forwards_only_the_given_env() -> None:
    cwd = os.getcwd()
    try:
        plan = plan_from_launch(_launch(), "198.18.7.11", "/tmp/run")
    finally:
        os.chdir(cwd)
    assert plan.listen_host == "198.18.7.11"
    assert plan.env == {"EMU_BCAST": "binomial"}
    assert plan.faults.loss == 0.1
    assert plan.stats_dir == "/tmp/run/stats"


@pytest.mark.parametrize(
    ("changes", "error"),
    [({"program": ["/no/such/prog"]}, ProgramNotFound), ({"nodes": [4]}, LaunchError),
     ({"nodes": [1, 1]}, LaunchError), ({"faults": {"loss": 2.0}}, LaunchError),
     ({"faults": {"nope": 1}}, LaunchError), ({"cwd": "/no/such/dir"}, LaunchError),
     ({"bind_to": "socket"}, LaunchError)],
)  # fmt: skip
def test_a_bad_launch_is_a_clear_error(changes: dict[str, object], error: type) -> None:
    cwd = os.getcwd()
    try:
        with pytest.raises(error):
            plan_from_launch(_launch(**changes), "198.18.7.11", "/tmp/run")
    finally:
        os.chdir(cwd)
