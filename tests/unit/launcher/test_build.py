"""launcher.build: which build runs (mypyc-compiled modules or pure Python), as `emurun
--version` and the figures' JSON report it."""

from __future__ import annotations

import ast
import importlib.util
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import TYPE_CHECKING

from emubench.common import environment
from launcher import build
from launcher.cli import main

if TYPE_CHECKING:
    import pytest

ROOT = Path(__file__).resolve().parents[3]
SUFFIX = EXTENSION_SUFFIXES[0]


def test_scan_names_the_extension_files_and_skips_the_shared_library(tmp_path: Path) -> None:
    (tmp_path / "link").mkdir()
    for name in (f"link/wire{SUFFIX}", f"config{SUFFIX}", f"_compiled__mypyc{SUFFIX}"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "link" / "wire.py").write_text("")
    (tmp_path / "README.txt").write_text("")
    (tmp_path / "other.cpython-39-x86_64-linux-gnu.so").write_bytes(b"")  # another Python's
    assert build.scan("nicd", tmp_path) == {"nicd.link.wire", "nicd.config"}


def test_the_modules_it_names_are_the_ones_python_imports() -> None:
    for name in build.compiled_modules():
        spec = importlib.util.find_spec(name)
        assert spec is not None
        assert spec.origin is not None
        assert spec.origin.endswith(SUFFIX)


def test_describe_and_build_info_agree() -> None:
    assert build.describe([], []) == build.PURE
    assert build.describe(["nicd.a", "nicd.b"], []) == (
        "compiled with mypyc (2 modules): nicd.a, nicd.b"
    )
    native = next(iter(build.NATIVE))
    assert build.describe([], [native]) == (
        f"pure Python; C extension: {native} ({build.NATIVE[native]})"
    )
    info = build.build_info()
    assert info["compiled"] == build.compiled_modules()
    assert info["native"] == build.native_modules()
    assert info["build"] == ("mypyc" if info["compiled"] else build.PURE)


def test_the_hand_written_extensions_are_setup_pys_and_no_mypyc_build() -> None:
    """launcher.build names apart exactly the C extensions setup.py builds by hand; one that is
    built here is imported from its extension file, and counts as no mypyc module."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    natives = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "NATIVE"
    ]
    assert len(natives) == 1
    assert set(ast.literal_eval(natives[0])) == set(build.NATIVE)
    for name in build.native_modules():
        spec = importlib.util.find_spec(name)
        assert spec is not None
        assert spec.origin is not None
        assert spec.origin.endswith(SUFFIX)
        assert name not in build.compiled_modules()


def test_emurun_version_prints_the_build_without_needing_np(capsys) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("emurun (emucluster) ")
    assert f"build: {build.describe()}" in out


def test_every_figure_environment_names_the_build() -> None:
    env = environment()
    assert env["build"] == build.build_info()  # the ranks' interpreter finds what this one does
    assert env["nicd_build"]["build"] in ("mypyc", build.PURE)  # type: ignore[index]


def test_the_ranks_build_is_the_working_directorys_and_the_nicds_the_installed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A benchmark's ``python -m`` ranks import a source checkout's packages when run in it;
    its nicds (``python -P -m nicd``) do not: the JSON says each build."""
    fake = tmp_path / "launcher"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "build.py").write_text("def build_info():\n    return {'build': 'the cwd'}\n")
    monkeypatch.chdir(tmp_path)
    env = environment()
    assert env["build"] == {"build": "the cwd"}
    assert env["nicd_build"]["build"] in ("mypyc", build.PURE)  # type: ignore[index]
