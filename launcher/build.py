"""Which build of emucluster runs: the modules compiled with mypyc, or pure Python.

``pip install .`` compiles the hot-path cores with mypyc where a C compiler works (setup.py);
a compiled module is an extension file beside its ``.py``, and Python's import system prefers
it. This module looks for those files in the packages as this interpreter finds them, so it
answers for the code that runs, not for what an install record says. ``emurun --version`` and
every benchmark figure's environment (`emubench.common.environment`) report it.
"""

from __future__ import annotations

import importlib.util
import platform
from importlib import metadata
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

__all__ = ["PURE", "build_info", "compiled_modules", "describe", "scan", "version_text"]

PURE = "pure Python"
"""The build's name when no module is compiled."""

_PACKAGES = ("nicd", "emucluster")


def _module_name(package: str, base: Path, path: Path) -> str | None:
    """The module an extension file under ``base`` is, or None if ``path`` is not one."""
    for suffix in EXTENSION_SUFFIXES:
        if path.name.endswith(suffix):
            rel = path.relative_to(base).with_name(path.name[: -len(suffix)])
            return ".".join((package, *rel.parts))
    return None


def scan(package: str, base: Path) -> set[str]:
    """The compiled modules of ``package``, whose directory is ``base``: its extension files,
    the shared library of a mypyc group (``*__mypyc``) aside."""
    found: set[str] = set()
    for path in base.rglob("*.*"):
        name = _module_name(package, base, path)
        if name is not None and not name.endswith("__mypyc"):
            found.add(name)
    return found


def compiled_modules() -> list[str]:
    """The modules of nicd and emucluster that are compiled (extension files), sorted."""
    found: set[str] = set()
    for package in _PACKAGES:
        spec = importlib.util.find_spec(package)
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            found |= scan(package, Path(root))
    return sorted(found)


def build_info() -> dict[str, object]:
    """The build for a figure's JSON: ``{"build": "mypyc" | "pure Python", "compiled": [...]}``."""
    modules = compiled_modules()
    return {"build": "mypyc" if modules else PURE, "compiled": modules}


def describe(modules: list[str] | None = None) -> str:
    """One line: ``compiled with mypyc (N modules): a, b, ...`` or ``pure Python``."""
    modules = compiled_modules() if modules is None else modules
    if not modules:
        return PURE
    return f"compiled with mypyc ({len(modules)} modules): {', '.join(modules)}"


def version_text() -> str:
    """What ``emurun --version`` prints: the version, the Python, and the build."""
    try:
        version = metadata.version("emucluster")
    except metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    return f"emurun (emucluster) {version}, Python {platform.python_version()}\nbuild: {describe()}"
