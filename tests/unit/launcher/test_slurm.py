"""Slurm as emurun's launcher, the pure parts: an allocation's environment -> hosts, slots and
-np; the default launcher inside an allocation; the one srun step (no token on its command
line); the agent's name from its task's environment; what a job state says about the end."""

from __future__ import annotations

import sys

import pytest

from launcher.agent.__main__ import options_from_argv
from launcher.cli import plan_from_argv
from launcher.errors import EXIT_LOST_HOST, EXIT_TIMEOUT, UsageError
from launcher.multihost import slurm
from launcher.multihost.hostfile import HostSpec, map_ranks

ALLOC = {
    "SLURM_JOB_ID": "42",
    "SLURM_JOB_NODELIST": "n[01-03,07]",
    "SLURM_TASKS_PER_NODE": "2(x3),1",
    "SLURM_NTASKS": "7",
    "PATH": "/usr/bin",
}


def test_allocation_hosts_expand_the_node_list_and_the_task_counts() -> None:
    assert slurm.allocation_hosts(ALLOC) == [
        HostSpec("n01", 2), HostSpec("n02", 2), HostSpec("n03", 2), HostSpec("n07", 1),
    ]  # fmt: skip
    assert slurm.allocation_ntasks(ALLOC) == 7
    assert slurm.allocation_job_id(ALLOC) == "42"


def test_old_variable_names_are_read_too() -> None:
    env = {"SLURM_JOBID": "7", "SLURM_NODELIST": "a,b", "SLURM_NPROCS": "2"}
    assert slurm.in_allocation(env)
    assert slurm.allocation_hosts(env) == [HostSpec("a"), HostSpec("b")]  # one slot each
    assert slurm.allocation_ntasks(env) == 2


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"SLURM_JOB_ID": "1"},  # no node list: not an allocation emurun can use
        {"SLURM_JOB_NODELIST": "n1"},
        {"SLURM_JOB_ID": " ", "SLURM_JOB_NODELIST": "n1"},
    ],
)
def test_not_an_allocation(env: dict[str, str]) -> None:
    assert not slurm.in_allocation(env)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"SLURM_JOB_NODELIST": "n[01-"}, "SLURM_JOB_NODELIST"),
        ({"SLURM_TASKS_PER_NODE": "2(x2)"}, "each of the 4 nodes"),
        ({"SLURM_TASKS_PER_NODE": "two"}, "SLURM_TASKS_PER_NODE"),
        ({"SLURM_TASKS_PER_NODE": "2,0,1,1"}, "count >= 1"),
    ],
)
def test_bad_allocation_variables_are_usage_errors(change: dict[str, str], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        slurm.allocation_hosts({**ALLOC, **change})


def test_bad_ntasks_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="SLURM_NTASKS"):
        slurm.allocation_ntasks({"SLURM_NTASKS": "x"})


def test_inside_an_allocation_the_default_launcher_is_slurm_and_np_comes_from_it() -> None:
    plan = plan_from_argv(["app.py"], ALLOC)
    assert plan.np == 7
    assert plan.hosts is not None
    assert plan.hosts.launcher == "slurm"
    assert plan.hosts.hosts == tuple(slurm.allocation_hosts(ALLOC))
    assert map_ranks(plan.hosts.hosts, plan.np, "slot") == [[0, 1], [2, 3], [4, 5], [6]]


def test_np_defaults_to_every_slot_without_ntasks() -> None:
    env = {k: v for k, v in ALLOC.items() if k != "SLURM_NTASKS"}
    assert plan_from_argv(["app.py"], env).np == 7


def test_np_given_wins_and_is_checked_against_the_slots() -> None:
    assert plan_from_argv(["-np", "3", "app.py"], ALLOC).np == 3
    with pytest.raises(UsageError, match="needs 8 slots"):
        plan_from_argv(["-np", "8", "app.py"], ALLOC)


def test_launcher_local_keeps_the_job_on_this_machine() -> None:
    plan = plan_from_argv(["-np", "2", "--launcher", "local", sys.executable], ALLOC)
    assert plan.hosts is None
    with pytest.raises(UsageError, match="takes no hosts"):
        plan_from_argv(["-np", "2", "--launcher", "local", "--host", "a", "x"], ALLOC)


def test_explicit_hosts_inside_an_allocation_still_use_ssh() -> None:
    plan = plan_from_argv(["-np", "2", "--host", "a:2", "app.py"], ALLOC)
    assert plan.hosts is not None
    assert plan.hosts.launcher == "ssh"


def test_slurm_launcher_refuses_hosts_and_needs_an_allocation() -> None:
    with pytest.raises(UsageError, match="from the allocation"):
        plan_from_argv(["--launcher", "slurm", "--host", "a", "app.py"], ALLOC)
    with pytest.raises(UsageError, match="needs a Slurm allocation"):
        plan_from_argv(["--launcher", "slurm", "app.py"], {"PATH": "/usr/bin"})


def test_np_is_required_outside_an_allocation() -> None:
    with pytest.raises(UsageError, match="-np N is required"):
        plan_from_argv([sys.executable], {"PATH": "/usr/bin"})


def test_the_agent_step_is_one_srun_with_one_task_per_node_and_no_token() -> None:
    argv = slurm.agent_step(["n01", "n02"], ("emuproxy",), "10.0.0.1:5000", quiet=True)
    assert argv[0] == "srun"
    for word in ("--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=n01,n02",
                 "--kill-on-bad-exit=1", "--mpi=none", "--input=all"):  # fmt: skip
        assert word in argv
    agent = argv[argv.index("emuproxy") :]
    assert agent == ["emuproxy", "--connect", "10.0.0.1:5000", "--token-file", "-", "--slurm",
                     "-q"]  # fmt: skip


def test_the_agent_takes_its_name_from_slurm() -> None:
    opts = options_from_argv(["--connect", "h:1", "--token-file", __file__, "--slurm"],
                             {slurm.SLURM_NAME_ENV: "n07"})  # fmt: skip
    assert opts.name == "n07"
    with pytest.raises(UsageError, match="SLURMD_NODENAME"):
        options_from_argv(["--connect", "h:1", "--token-file", __file__, "--slurm"], {})


@pytest.mark.parametrize(
    ("state", "code"),
    [
        ("CANCELLED", 143),
        ("COMPLETING", 143),
        ("TIMEOUT", EXIT_TIMEOUT),
        ("NODE_FAIL", EXIT_LOST_HOST),
        ("RUNNING", None),
        (None, None),
    ],
)
def test_a_job_state_says_who_ended_the_job(state: str | None, code: int | None) -> None:
    got = slurm.ended_by("42", state)
    assert (got[0] if got else None) == code
    if got:
        assert got[1].startswith("the Slurm job 42 ")
