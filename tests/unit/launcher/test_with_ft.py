"""emurun --with-ft ulfm: the plan says so and every host gets EMU_FT=ulfm, which the host
library reads as a fault-tolerant run; without the flag, neither."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from emucluster.config import HostConfig
from launcher.cli import plan_from_argv
from launcher.plan import host_env

if TYPE_CHECKING:
    from pathlib import Path


def test_with_ft_ulfm_reaches_every_host(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text("")
    plan = plan_from_argv(["-n", "2", "--with-ft", "ulfm", str(app)], {})
    assert plan.fault_tolerant
    env = host_env(plan, 1, "/r", "/s", {})
    assert env["EMU_FT"] == "ulfm"
    assert HostConfig.from_env(env).fault_tolerant


def test_without_the_flag_a_failure_stops_the_job(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text("")
    plan = plan_from_argv(["-n", "2", str(app)], {})
    assert not plan.fault_tolerant
    env = host_env(plan, 0, "/r", "/s", {})
    assert "EMU_FT" not in env
    assert not HostConfig.from_env(env).fault_tolerant


def test_with_ft_takes_only_ulfm(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text("")
    with pytest.raises(SystemExit):
        plan_from_argv(["-n", "2", "--with-ft", "mpi", str(app)], {})
