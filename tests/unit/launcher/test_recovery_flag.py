"""emurun --recovery reaches every nicd's command line (and only when given)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from launcher.cli import plan_from_argv
from launcher.plan import nicd_argv
from nicd.__main__ import build_parser, config_from_args

if TYPE_CHECKING:
    from pathlib import Path


def test_emurun_recovery_is_forwarded_to_nicd(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text("")
    plan = plan_from_argv(["-n", "2", "--recovery", "selective", str(app)], {})
    assert plan.recovery == "selective"
    argv = nicd_argv(plan, 1, "/r")
    nicd_args = argv[argv.index("nicd") + 1 :]
    assert config_from_args(build_parser().parse_args(nicd_args)).transport.recovery == "selective"


def test_without_the_flag_nicd_keeps_its_default(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text("")
    plan = plan_from_argv(["-n", "2", str(app)], {})
    assert plan.recovery is None
    assert "--recovery" not in nicd_argv(plan, 0, "/r")
