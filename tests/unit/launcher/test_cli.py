"""emurun's command line: splitting emurun's words from the program's, and the plan built."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

from launcher.cli import build_parser, main, plan_from_argv, split_argv
from launcher.errors import EXIT_NOT_FOUND, UsageError
from launcher.plan import describe_profile

if TYPE_CHECKING:
    from pathlib import Path

VALUED = build_parser().valued


@pytest.mark.parametrize(
    ("argv", "ours", "theirs"),
    [
        (["-np", "4", "app.py", "-np", "2"], ["-np", "4"], ["app.py", "-np", "2"]),
        (["-n", "2", "--tag-output", "x"], ["-n", "2", "--tag-output"], ["x"]),
        (["-np", "2", "-m", "pytest", "-q", "-x"], ["-np", "2", "-m", "pytest"], ["-q", "-x"]),
        (["-np", "2", "-x", "A=1", "--", "-weird"], ["-np", "2", "-x", "A=1"], ["-weird"]),
        (["--timeout=5", "-np", "1", "prog"], ["--timeout=5", "-np", "1"], ["prog"]),
        (["-np", "1"], ["-np", "1"], []),
    ],
)
def test_split(argv: list[str], ours: list[str], theirs: list[str]) -> None:
    assert split_argv(argv, VALUED) == (ours, theirs)


def test_every_valued_option_is_known() -> None:
    for opt in ("-np", "-n", "--timeout", "-x", "--stats", "--loss", "--fault-seed", "-m"):
        assert opt in VALUED
    for flag in ("--tag-output", "--cpu-report", "-q"):
        assert flag not in VALUED


def test_full_plan(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text("print('hi')\n")
    env = {"EMU_DUP": "0.1", "KEEP": "k"}
    plan = plan_from_argv(
        [
            "-np", "8", "--timeout", "30", "--tag-output", "-x", "A=1", "-x", "KEEP",
            "--loss", "0.2", "--fault-seed", "4", "--stats", str(tmp_path / "s"),
            "--cpu-report", "--bind-to", "none", "--nic-priority", "nice", "--job-id", "j1",
            "--nicd-args", "--mtu 1024", "-q", str(app), "--flag", "-np", "3",
        ],
        env,
    )  # fmt: skip
    assert plan.np == 8
    assert plan.timeout == 30.0
    assert plan.tag_output
    assert plan.cpu_report
    assert plan.quiet
    assert dict(plan.env) == {"A": "1", "KEEP": "k", "EMU_WAIT": "block"}  # --profile faithful
    assert (plan.faults.loss, plan.faults.dup, plan.faults.seed) == (0.2, 0.1, 4)
    assert plan.stats_dir == str(tmp_path / "s")
    assert (plan.bind_to, plan.nic_priority, plan.job_id) == ("none", "nice", "j1")
    assert plan.nicd_args == ("--mtu", "1024")
    assert plan.program.argv == (sys.executable, str(app), "--flag", "-np", "3")


def test_defaults(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text("")
    plan = plan_from_argv(["-n", "2", str(app)], {})
    assert (plan.bind_to, plan.nic_priority, plan.timeout) == ("core", "rt", None)
    assert not plan.faults.active
    assert len(plan.job_id) == 8


@pytest.mark.parametrize(
    ("argv", "env", "wait"),
    [
        ([], {}, "block"),  # faithful, the default: waiting hosts yield their cores
        (["--profile", "faithful"], {}, "block"),
        (["--profile", "throughput"], {}, "hybrid"),
        (["--profile", "throughput"], {"EMU_WAIT": "spin"}, None),  # emurun's own: passed on
        (["-x", "EMU_WAIT=spin"], {}, "spin"),  # the user's choice wins
    ],
)
def test_profile_chooses_the_hosts_wait_policy_unless_the_user_did(
    argv: list[str], env: dict[str, str], wait: str | None
) -> None:
    plan = plan_from_argv(["-np", "2", *argv, "true"], env)
    assert plan.env.get("EMU_WAIT") == wait
    assert plan.profile == ("throughput" if "throughput" in argv else "faithful")
    described = describe_profile(plan)
    assert described.startswith(f"profile {plan.profile} (")
    assert (wait or "from the environment") in described


def test_collective_algorithms_become_host_environment() -> None:
    plan = plan_from_argv(
        ["-np", "2", "--bcast", "Binomial", "--reduce", "app-bypass", "--coll",
         "allreduce=reduce-bcast", "-x", "EMU_BCAST=ignored", "true"],
        {},
    )  # fmt: skip
    assert dict(plan.env) == {
        "EMU_BCAST": "binomial",  # the flag wins over -x
        "EMU_REDUCE": "app-bypass",  # reserved for an offload: passed, the host decides
        "EMU_ALLREDUCE": "reduce-bcast",
        "EMU_WAIT": "block",  # --profile faithful
    }


def test_module_program() -> None:
    plan = plan_from_argv(["-np", "1", "-m", "json.tool", "--help"], {})
    assert plan.program.argv == (sys.executable, "-m", "json.tool", "--help")


@pytest.mark.parametrize(
    "argv",
    [
        ["-np", "1", "-x", "1BAD=2", "true"],
        ["-np", "1", "-x", "UNSET_IN_ENV", "true"],
        ["-np", "1", "--nicd-args", "'unbalanced", "true"],
        ["-np", "1", "--job-id", "a-b", "true"],
        ["-np", "1", "--loss", "2", "true"],
        ["-np", "1", "--loss", "lots", "true"],
        ["-np", "1", "--fault-seed", "1.5", "true"],
        ["-np", "1", "--delay-ms", "-1", "true"],
        ["-np", "1", "--bcast", "no-such-algorithm", "true"],
        ["-np", "1", "--reduce", "recursive-doubling", "true"],  # an allreduce name
        ["-np", "1", "--coll", "allreduce", "true"],
        ["-np", "1", "--coll", "sort=quick", "true"],
    ],
)
def test_usage_errors(argv: list[str]) -> None:
    with pytest.raises(UsageError):
        plan_from_argv(argv, {})


def test_main_reports_errors_with_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-np", "2", "no_such_program_xyz"]) == EXIT_NOT_FOUND
    assert "no_such_program_xyz: command not found" in capsys.readouterr().err
    assert main(["-np", "2"]) == 2
    assert main(["true"]) == 2  # -np is required
    assert main(["--help"]) == 0
    assert "EMU_RANK" in capsys.readouterr().out
