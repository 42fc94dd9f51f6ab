"""FaultConfig and FAULT_ENV: the fault flags nicd reads and emurun passes on (one contract)."""

from __future__ import annotations

import math

import pytest

from nicd.__main__ import build_parser, config_from_args
from nicd.config import FAULT_ENV, FaultConfig, fault_flag
from nicd.errors import UsageError


def test_flags_override_environment() -> None:
    env = {"EMU_LOSS": "0.5", "EMU_DUP": "0.25", "EMU_FAULT_SEED": "9"}
    f = FaultConfig.from_values({"loss": "0.1"}, env)
    assert (f.loss, f.dup, f.seed) == (0.1, 0.25, 9)
    assert f.active


def test_no_faults_by_default() -> None:
    f = FaultConfig.from_values({}, {"EMU_LOSS": ""})
    assert f == FaultConfig()
    assert not f.active


@pytest.mark.parametrize(
    ("given", "env", "origin"),
    [
        ({"loss": "lots"}, {}, "--loss"),
        ({}, {"EMU_DELAY_MS": "x"}, "EMU_DELAY_MS"),
        ({"fault_seed": "1.5"}, {}, "--fault-seed"),
        ({}, {"EMU_FAULT_SEED": "1.5"}, "EMU_FAULT_SEED"),
    ],
)
def test_bad_fault_values_name_their_origin(
    given: dict[str, str], env: dict[str, str], origin: str
) -> None:
    with pytest.raises(UsageError, match=origin):
        FaultConfig.from_values(given, env)


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"loss": 1.5}, "--loss"),
        ({"dup": -0.1}, "--dup"),
        ({"reorder": math.nan}, "--reorder"),
        ({"delay_ms": -1.0}, "--delay-ms"),
        ({"delay_ms": math.nan}, "--delay-ms"),
        ({"seed": -1}, "--fault-seed"),
    ],
)
def test_fault_ranges(kwargs: dict[str, float], flag: str) -> None:
    with pytest.raises(UsageError, match=flag):
        FaultConfig(**kwargs)  # type: ignore[arg-type]


def test_every_variable_is_named_once() -> None:
    assert list(FAULT_ENV) == ["loss", "dup", "reorder", "corrupt", "delay_ms", "fault_seed"]
    assert len(set(FAULT_ENV.values())) == len(FAULT_ENV)
    assert fault_flag("delay_ms") == "--delay-ms"


def test_flags_round_trip_through_nicds_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in FAULT_ENV.values():
        monkeypatch.setenv(var, "0.75" if var != "EMU_FAULT_SEED" else "5")
    f = FaultConfig(loss=0.1, dup=0.2, reorder=0.3, corrupt=1.0, delay_ms=2.5, seed=7)
    argv = ["--node-id", "1", "--run-dir", "/r", *f.flags()]
    assert f.flags()[:2] == ["--loss", "0.1"]
    assert config_from_args(build_parser().parse_args(argv)).faults == f


def test_nicd_reads_the_environment_when_no_flag_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EMU_LOSS", "0.25")
    monkeypatch.setenv("EMU_FAULT_SEED", "11")
    monkeypatch.setenv("EMU_DUP", "")
    args = build_parser().parse_args(["--node-id", "0", "--run-dir", "/r", "--reorder", "0.5"])
    assert config_from_args(args).faults == FaultConfig(loss=0.25, reorder=0.5, seed=11)
    monkeypatch.setenv("EMU_CORRUPT", "often")
    with pytest.raises(UsageError, match="EMU_CORRUPT"):
        config_from_args(args)
