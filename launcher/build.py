"""Which build of emucluster runs: the modules compiled with mypyc, or pure Python.

``pip install .`` compiles the hot-path cores with mypyc where a C compiler works (setup.py);
a compiled module is an extension file beside its ``.py``, and Python's import system prefers
it. This module looks for those files in the packages as this interpreter finds them, so it
answers for the code that runs, not for what an install record says. ``emurun --version`` and
every benchmark figure's environment (`emubench.common.environment`) report it. The
hand-written C extensions (`NATIVE`: the PEP 688 buffer-export backport Python 3.11 builds,
`emucluster.pep688`) are extension files too, but no mypyc build: they are named apart.
"""

from __future__ import annotations

import importlib.util
import platform
from importlib import metadata
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

__all__ = [
    "NATIVE",
    "PURE",
    "build_info",
    "compiled_modules",
    "describe",
    "native_modules",
    "scan",
    "version_text",
]

PURE = "pure Python"
"""The build's name when no module is compiled."""

NATIVE = {"emucluster.pep688._exporter": "PEP 688 buffer export for Python 3.11"}
"""The hand-written C extensions setup.py builds (its ``NATIVE``), and what each is for."""

_PACKAGES = ("nicd", "emucluster")


def _module_name(package: str, base: Path, path: Path) -> str | None:
    """The module an extension file under ``base`` is, or None if ``path`` is not one this
    interpreter imports (another Python's, ``x.cpython-311-....so`` seen from 3.12, keeps a dot
    in its stem after the generic ``.so``)."""
    for suffix in EXTENSION_SUFFIXES:
        if path.name.endswith(suffix):
            stem = path.name[: -len(suffix)]
            if "." in stem:
                return None
            rel = path.relative_to(base).with_name(stem)
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


def _extension_modules() -> set[str]:
    """Every extension file of nicd and emucluster, as a module name."""
    found: set[str] = set()
    for package in _PACKAGES:
        spec = importlib.util.find_spec(package)
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            found |= scan(package, Path(root))
    return found


def compiled_modules() -> list[str]:
    """The modules of nicd and emucluster compiled with mypyc (extension files), sorted."""
    return sorted(_extension_modules() - NATIVE.keys())


def native_modules() -> list[str]:
    """The hand-written C extensions (`NATIVE`) that are built here, sorted."""
    return sorted(_extension_modules() & NATIVE.keys())


def build_info() -> dict[str, object]:
    """The build for a figure's JSON: ``{"build": "mypyc" | "pure Python", "compiled": [...],
    "native": [...]}``."""
    modules = compiled_modules()
    return {"build": "mypyc" if modules else PURE, "compiled": modules, "native": native_modules()}


def describe(modules: list[str] | None = None, native: list[str] | None = None) -> str:
    """One line: ``compiled with mypyc (N modules): a, b, ...`` or ``pure Python``, then
    ``; C extension: x (what it is for)`` for each hand-written one built."""
    modules = compiled_modules() if modules is None else modules
    native = native_modules() if native is None else native
    text = (
        f"compiled with mypyc ({len(modules)} modules): {', '.join(modules)}" if modules else PURE
    )
    for name in native:
        text += f"; C extension: {name} ({NATIVE.get(name, 'hand-written')})"
    return text


def version_text() -> str:
    """What ``emurun --version`` prints: the version, the Python, and the build."""
    try:
        version = metadata.version("emucluster")
    except metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    return f"emurun (emucluster) {version}, Python {platform.python_version()}\nbuild: {describe()}"
