"""The packages' layering: each imports only what is below it.

DESIGN §2: ``nicd`` (the NIC) imports nothing of ``emucluster``, ``launcher`` or ``emubench``;
``emucluster`` (the host library) nothing of ``launcher`` or ``emubench``; ``launcher`` nothing of
``emubench``; and nothing imports ``emubench`` (the benchmarks sit above everything). Every
``.py`` file is parsed and every import counts, wherever it is: module level, inside a function,
under ``if TYPE_CHECKING:``, relative, or a literal ``importlib.import_module("...")``.

What ``emucluster`` takes from ``nicd`` goes through one module, :mod:`nicd.contract` (host
records, message types, what a host needs of GRIM and NICVM): no other module of nicd may be
imported there.
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
    source: str, importer: str, is_package: bool = False, *, by_name: str = ""
) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``, at any depth; a
    ``from <by_name> import x`` counts as importing ``<by_name>.x``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node.module, node.level, importer, is_package)
            if by_name and module == by_name:
                for alias in node.names:
                    yield node.lineno, f"{module}.{alias.name}"
            else:
                yield node.lineno, module
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


CONTRACT = "nicd.contract"
"""The one module of nicd that emucluster may import."""


def contract_violations(root: pathlib.Path) -> list[str]:
    """Every import of a module of nicd other than the contract under ``root``'s emucluster,
    as ``file:line: imports module``."""
    found: list[str] = []
    for path in sorted((root / "emucluster").rglob("*.py")):
        importer = _module_name(path, root)
        source = path.read_text(encoding="utf-8")
        is_package = path.name == "__init__.py"
        for line, module in imported_modules(source, importer, is_package, by_name="nicd"):
            if module.split(".")[0] == "nicd" and module != CONTRACT:
                rel = path.relative_to(root).as_posix()
                found.append(f"{rel}:{line}: imports {module}")
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


# -- emucluster takes nicd through the contract ---------------------------------------------


def test_emucluster_imports_only_the_contract_of_nicd() -> None:
    assert contract_violations(ROOT) == []


def test_the_contract_module_is_there() -> None:
    assert (ROOT / "nicd" / "contract.py").is_file()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from nicd.link.wire import MsgType\n", "imports nicd.link.wire"),
        ("from nicd import hostlink as hl\n", "imports nicd.hostlink"),
        ("import nicd.grim.xlate\n", "imports nicd.grim.xlate"),
        ("import nicd\n", "imports nicd"),
        ("def f():\n    from nicd.nicvm import compile_module\n", "imports nicd.nicvm"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nicd.gm import ports\n",
            "imports nicd.gm",
        ),
        ("import importlib\nimportlib.import_module('nicd.core.nic')\n", "imports nicd.core.nic"),
    ],
)
def test_the_contract_checker_catches_a_planted_import(
    tmp_path: pathlib.Path, source: str, expected: str
) -> None:
    found = contract_violations(_tree(tmp_path, {"emucluster/deep/bad.py": source}))
    assert len(found) == 1, found
    assert found[0].startswith("emucluster/deep/bad.py:")
    assert found[0].endswith(expected)


def test_the_contract_checker_reports_the_line(tmp_path: pathlib.Path) -> None:
    source = "import os\n\nfrom nicd.contract import MsgType\nfrom nicd.link import wire\n"
    found = contract_violations(_tree(tmp_path, {"emucluster/bad.py": source}))
    assert found == ["emucluster/bad.py:4: imports nicd.link"]


def test_the_contract_checker_allows_the_contract(tmp_path: pathlib.Path) -> None:
    files = {
        "emucluster/a.py": "from nicd.contract import MsgType, SendReq\n",
        "emucluster/b.py": "from nicd import contract as hl\nimport nicd.contract\n",
        "emucluster/c.py": "from . import a\nfrom emucluster.b import hl\n",
        "launcher/d.py": "from nicd.core.ready import Ready\n",  # only emucluster is held to it
    }
    assert contract_violations(_tree(tmp_path, files)) == []
