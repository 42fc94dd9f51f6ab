"""The packages' layering: each imports only what is below it.

DESIGN §2: ``nicd`` (the NIC) imports nothing of ``emucluster``, ``launcher`` or ``emubench``;
``emucluster`` (the host library) nothing of ``launcher`` or ``emubench``; ``launcher`` nothing of
``emubench``; and nothing imports ``emubench`` (the benchmarks sit above everything). Every
``.py`` file is parsed and every import counts, wherever it is: module level, inside a function,
under ``if TYPE_CHECKING:``, relative, or a literal ``importlib.import_module("...")``.
"""

from __future__ import annotations

import ast
import pathlib
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("nicd", "emucluster", "launcher", "emubench", "emutrace")
FORBIDDEN: dict[str, frozenset[str]] = {
    "nicd": frozenset({"emucluster", "launcher", "emubench"}),
    "emucluster": frozenset({"launcher", "emubench"}),
    "launcher": frozenset({"emubench"}),
    "emubench": frozenset(),
    "emutrace": frozenset({"nicd", "emucluster", "launcher", "emubench"}),
}
DYNAMIC_IMPORTERS = frozenset({"import_module", "__import__"})


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str | None, level: int, importer: str, is_package: bool) -> str:
    """The absolute name of ``from <level dots><module> import ...`` inside ``importer``."""
    if level == 0:
        return module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]  # a module's own package
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, module] if module else base)


def imported_modules(
    source: str, importer: str, is_package: bool = False
) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``, at any depth."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, _resolve(node.module, node.level, importer, is_package)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if (
                name in DYNAMIC_IMPORTERS
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                yield node.lineno, first.value


def violations(root: pathlib.Path) -> list[str]:
    """Every forbidden import under ``root``'s packages, as ``file:line: imports module``."""
    found: list[str] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            importer = _module_name(path, root)
            is_package = path.name == "__init__.py"
            source = path.read_text(encoding="utf-8")
            for line, module in imported_modules(source, importer, is_package):
                top = module.split(".")[0]
                if top in FORBIDDEN[package]:
                    rel = path.relative_to(root).as_posix()
                    found.append(f"{rel}:{line}: {package} imports {module}")
    return found


def test_every_package_imports_only_what_is_below_it() -> None:
    assert violations(ROOT) == []


def test_the_packages_are_there() -> None:
    """The check reads real files (a renamed package would make it pass vacuously)."""
    for package in PACKAGES:
        assert len(list((ROOT / package).rglob("*.py"))) >= 3, package


def _tree(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    return tmp_path


@pytest.mark.parametrize(
    ("name", "source", "expected"),
    [
        ("nicd/bad.py", "from emucluster.port import Port\n", "nicd imports emucluster.port"),
        ("nicd/bad.py", "def f():\n    import launcher.tuning\n", "nicd imports launcher.tuning"),
        (
            "emucluster/bad.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import launcher\n",
            "emucluster imports launcher",
        ),
        ("emucluster/deep/bad.py", "import emubench.common as c\n", "imports emubench.common"),
        ("launcher/bad.py", "from emubench import common\n", "launcher imports emubench"),
        (
            "nicd/bad.py",
            "import importlib\nimportlib.import_module('emubench.grim')\n",
            "nicd imports emubench.grim",
        ),
    ],
)
def test_the_checker_catches_a_forbidden_import(
    tmp_path: pathlib.Path, name: str, source: str, expected: str
) -> None:
    found = violations(_tree(tmp_path, {name: source}))
    assert len(found) == 1, found
    assert found[0].startswith(name + ":")
    assert found[0].endswith(expected)


def test_the_checker_allows_what_is_below(tmp_path: pathlib.Path) -> None:
    files = {
        "emubench/ok.py": "import nicd\nfrom emucluster.port import Port\nimport launcher.cli\n",
        "emucluster/ok.py": "from nicd import hostlink\nfrom . import port\n",
        "launcher/ok.py": "import nicd.config\nimport emucluster\n",
        "nicd/ok.py": "from .wire import encode\nimport msgpack\n",
    }
    assert violations(_tree(tmp_path, files)) == []


def test_relative_imports_resolve_against_the_importer() -> None:
    assert _resolve("wire", 1, "nicd.link.reliable", is_package=False) == "nicd.link.wire"
    assert _resolve("wire", 2, "nicd.link.reliable", is_package=False) == "nicd.wire"
    assert _resolve(None, 1, "nicd.link", is_package=True) == "nicd.link"
    assert _resolve("port", 0, "x", is_package=False) == "port"
