"""launcher.build: which build runs (mypyc-compiled modules or pure Python), as `emurun
--version` and the figures' JSON report it."""

from __future__ import annotations

import importlib.util
from importlib.machinery import EXTENSION_SUFFIXES
from typing import TYPE_CHECKING

from emubench.common import environment
from launcher import build
from launcher.cli import main

if TYPE_CHECKING:
    from pathlib import Path

SUFFIX = EXTENSION_SUFFIXES[0]


def test_scan_names_the_extension_files_and_skips_the_shared_library(tmp_path: Path) -> None:
    (tmp_path / "link").mkdir()
    for name in (f"link/wire{SUFFIX}", f"config{SUFFIX}", f"_compiled__mypyc{SUFFIX}"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "link" / "wire.py").write_text("")
    (tmp_path / "README.txt").write_text("")
    assert build.scan("nicd", tmp_path) == {"nicd.link.wire", "nicd.config"}


def test_the_modules_it_names_are_the_ones_python_imports() -> None:
    for name in build.compiled_modules():
        spec = importlib.util.find_spec(name)
        assert spec is not None
        assert spec.origin is not None
        assert spec.origin.endswith(SUFFIX)


def test_describe_and_build_info_agree() -> None:
    assert build.describe([]) == build.PURE
    assert build.describe(["nicd.a", "nicd.b"]) == "compiled with mypyc (2 modules): nicd.a, nicd.b"
    info = build.build_info()
    assert info["compiled"] == build.compiled_modules()
    assert info["build"] == ("mypyc" if info["compiled"] else build.PURE)


def test_emurun_version_prints_the_build_without_needing_np(capsys) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("emurun (emucluster) ")
    assert f"build: {build.describe()}" in out


def test_every_figure_environment_names_the_build() -> None:
    assert environment()["build"] == build.build_info()
