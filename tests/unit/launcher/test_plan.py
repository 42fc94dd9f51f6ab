"""LaunchPlan rules: program resolution, fault flags, nicd command lines, environments,
placements. No processes, no filesystem: lookups are fakes."""

from __future__ import annotations

import pytest

from launcher.errors import (
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    ProgramNotFound,
    UsageError,
)
from launcher.plan import (
    LaunchPlan,
    Program,
    fault_seed_for,
    host_env,
    nicd_argv,
    nicd_env,
    placements,
    resolve_program,
    shm_prefix,
    validate_job_id,
)
from nicd.__main__ import build_parser, config_from_args
from nicd.config import FaultConfig

PY = "/venv/bin/python"
FILES = {"app.py", "./a.out", "bin/tool", "notexec"}
EXECUTABLE = {"./a.out"}
PATH = {"hostname": "/usr/bin/hostname", "python": "/usr/bin/python"}


def resolve(argv: list[str], module: str | None = None) -> Program:
    return resolve_program(
        argv,
        module,
        python=PY,
        which=PATH.get,
        is_file=FILES.__contains__,
        is_executable=EXECUTABLE.__contains__,
    )


def make_plan(**overrides: object) -> LaunchPlan:
    fields: dict[str, object] = {
        "np": 4,
        "program": Program((PY, "app.py"), "app.py"),
        "job_id": "abc123",
        "python": PY,
    }
    fields.update(overrides)
    return LaunchPlan(**fields)  # type: ignore[arg-type]


# -- programs -----------------------------------------------------------------------------


def test_python_script_runs_under_emuruns_interpreter() -> None:
    assert resolve(["app.py", "-x", "1"]) == Program((PY, "app.py", "-x", "1"), "app.py")


def test_module_takes_every_following_word() -> None:
    prog = resolve(["-q", "tests"], module="pytest")
    assert prog.argv == (PY, "-m", "pytest", "-q", "tests")
    assert prog.display == "-m pytest"


def test_command_on_path_is_resolved() -> None:
    assert resolve(["hostname", "-s"]).argv == ("/usr/bin/hostname", "-s")
    assert resolve(["python", "app.py"]).argv == ("/usr/bin/python", "app.py")


def test_executable_path_is_run_as_is() -> None:
    assert resolve(["./a.out", "3"]).argv == ("./a.out", "3")


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["missing.py"], EXIT_NOT_FOUND),
        (["./missing"], EXIT_NOT_FOUND),
        (["nosuchcommand"], EXIT_NOT_FOUND),
        (["bin/tool"], EXIT_NOT_EXECUTABLE),
    ],
)
def test_unrunnable_programs(argv: list[str], code: int) -> None:
    with pytest.raises(ProgramNotFound) as info:
        resolve(argv)
    assert info.value.exit_code == code
    assert argv[0] in str(info.value)


def test_no_program_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        resolve([])


# -- fault flags --------------------------------------------------------------------------


def test_fault_seeds_differ_per_node_and_job() -> None:
    seeds = {fault_seed_for(s, n) for s in range(3) for n in range(16)}
    assert len(seeds) == 48


# -- nicd ---------------------------------------------------------------------------------


def test_nicd_argv_carries_node_run_dir_stats_and_faults() -> None:
    plan = make_plan(
        faults=FaultConfig(loss=0.2, dup=0.05, seed=3),
        stats_dir="/out",
        nicd_args=("--mtu", "1024"),
    )
    argv = nicd_argv(plan, 2, "/run/x")
    assert argv[:4] == [PY, "-P", "-m", "nicd"]  # the installed nicd, never the cwd's
    opts = dict(zip(argv[4:-2:2], argv[5:-2:2], strict=True))
    assert opts["--node-id"] == "2"
    assert opts["--run-dir"] == "/run/x"
    assert opts["--listen"] == "127.0.0.1:0"
    assert opts["--stats"] == "/out/nic2.json"
    assert float(opts["--loss"]) == 0.2
    assert float(opts["--dup"]) == 0.05
    assert int(opts["--fault-seed"]) == fault_seed_for(3, 2)
    assert argv[-2:] == ["--mtu", "1024"]


def test_nicd_parses_the_argv_emurun_gives_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMU_LOSS", "0.9")  # explicit flags win over nicd's environment
    faults = FaultConfig(loss=0.2, dup=0.05, reorder=0.1, corrupt=0.01, delay_ms=1.5, seed=3)
    plan = make_plan(faults=faults, stats_dir="/out")
    argv = nicd_argv(plan, 2, "/run/x")
    config = config_from_args(build_parser().parse_args(argv[4:]))
    assert config.node_id == 2
    assert config.run_dir == "/run/x"
    assert config.stats_file == "/out/nic2.json"
    assert (config.listen_host, config.listen_port) == ("127.0.0.1", 0)
    assert config.faults == FaultConfig(
        loss=0.2, dup=0.05, reorder=0.1, corrupt=0.01, delay_ms=1.5, seed=fault_seed_for(3, 2)
    )


def test_nicd_gets_explicit_zero_faults_and_the_job_mark() -> None:
    plan = make_plan()
    argv = nicd_argv(plan, 0, "/r")
    assert float(argv[argv.index("--loss") + 1]) == 0.0
    assert "--stats" not in argv
    env = nicd_env(plan, {"PATH": "/bin", "EMU_LOSS": "0.9"})
    assert env == {"PATH": "/bin", "EMU_JOB_ID": "abc123"}


# -- hosts --------------------------------------------------------------------------------


def test_host_env_place_overrides_parent_and_exports() -> None:
    plan = make_plan(env={"OMP_NUM_THREADS": "1", "EMU_RANK": "99"})
    parent = {"HOME": "/root", "EMU_RANK": "7", "PYTHONUNBUFFERED": "0"}
    env = host_env(plan, 3, "/run/x", "/run/x/nic3.sock", parent)
    assert env["HOME"] == "/root"
    assert env["OMP_NUM_THREADS"] == "1"
    assert env["PYTHONUNBUFFERED"] == "0"  # the user's choice stands
    assert env["EMU_RANK"] == "3"
    assert env["EMU_SIZE"] == "4"
    assert env["EMU_NIC_SOCKET"] == "/run/x/nic3.sock"
    assert env["EMU_RUN_DIR"] == "/run/x"
    assert env["EMU_JOB_ID"] == "abc123"
    assert host_env(plan, 0, "/r", "/s", {})["PYTHONUNBUFFERED"] == "1"
    assert "EMU_STATS_DIR" not in env
    with_stats = make_plan(stats_dir="/tmp/stats")
    assert host_env(with_stats, 0, "/r", "/s", {})["EMU_STATS_DIR"] == "/tmp/stats"


def test_core_binding_puts_a_node_on_one_core_round_robin() -> None:
    got = placements(make_plan(np=5, bind_to="core"), [3, 1])
    assert [p.host_cpus for p in got] == [frozenset({c}) for c in (1, 3, 1, 3, 1)]
    assert all(p.host_cpus == p.nicd_cpus for p in got)


def test_role_binding_puts_nicds_on_the_first_half_and_hosts_on_the_rest() -> None:
    got = placements(make_plan(np=5, bind_to="role"), [3, 1])
    assert [p.nicd_cpus for p in got] == [frozenset({1})] * 5
    assert [p.host_cpus for p in got] == [frozenset({3})] * 5
    four = placements(make_plan(np=4, bind_to="role"), [0, 1, 2, 3])
    assert [p.nicd_cpus for p in four] == [frozenset({c}) for c in (0, 1, 0, 1)]
    assert [p.host_cpus for p in four] == [frozenset({c}) for c in (2, 3, 2, 3)]


def test_role_binding_on_one_cpu_is_core_binding() -> None:
    got = placements(make_plan(np=3, bind_to="role"), [2])
    assert all(p.host_cpus == p.nicd_cpus == frozenset({2}) for p in got)


def test_no_binding() -> None:
    got = placements(make_plan(bind_to="none"), [0, 1])
    assert all(p.host_cpus is None and p.nicd_cpus is None for p in got)


# -- plan ---------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", [{"np": 0}, {"timeout": 0.0}, {"job_id": "a_b"}])
def test_plan_checks(overrides: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        make_plan(**overrides)


def test_job_ids_cannot_nest_shm_prefixes() -> None:
    assert shm_prefix("a1") == "emu_a1_"
    for bad in ("", "a_b", "a/b", "x" * 33, "é"):
        with pytest.raises(UsageError):
            validate_job_id(bad)
