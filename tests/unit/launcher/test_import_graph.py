"""The launcher, the benchmarks and the trace tools import in one direction: no two of their
modules import each other, directly or around a circle (every import counts, as in
`tests.unit.test_layering`: inside functions and under ``if TYPE_CHECKING:`` too), and an
import inside a function says beside it why it is late (an optional dependency, a start-up
cost, importing MPI initialises it).
"""

from __future__ import annotations

import ast
import pathlib

from tests.unit.test_layering import _module_name, _resolve, imported_modules

ROOT = pathlib.Path(__file__).resolve().parents[3]
PACKAGES = ("launcher", "emubench", "emutrace")
REASONS = ("late:", "optional")
"""A late import's comment names one of these (on its line or the three above)."""


def _modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    return {
        _module_name(path, root): path
        for p in PACKAGES
        for path in sorted((root / p).rglob("*.py"))
    }


def import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """Module -> the modules of PACKAGES it imports (``from pkg import mod`` names ``pkg.mod``)."""
    mods = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for importer, path in mods.items():
        is_package = path.name == "__init__.py"
        source = path.read_text(encoding="utf-8")
        targets = [t for _, t in imported_modules(source, importer, is_package)]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom):
                base = _resolve(node.module, node.level, importer, is_package)
                targets += [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            parts = target.split(".")
            found = next(
                (
                    ".".join(parts[:i])
                    for i in range(len(parts), 0, -1)
                    if ".".join(parts[:i]) in mods
                ),
                None,
            )
            if found is not None and found != importer:
                graph[importer].add(found)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def unexplained_late_imports(root: pathlib.Path) -> list[str]:
    """Every import inside a function with no REASONS comment near it, as ``file:line``."""
    bad = []
    for path in _modules(root).values():
        lines = path.read_text(encoding="utf-8").splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    near = "\n".join(lines[max(0, node.lineno - 4) : node.lineno])
                    if not any(reason in near for reason in REASONS):
                        bad.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return bad


def test_no_module_imports_itself_around_a_circle() -> None:
    assert cycles(import_graph(ROOT)) == []


def test_every_late_import_says_why() -> None:
    assert unexplained_late_imports(ROOT) == []


def test_the_checks_catch_a_planted_circle_and_a_silent_late_import(tmp_path: pathlib.Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "launcher" / "a.py").write_text("from launcher import b\n")
    (tmp_path / "launcher" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from launcher.c import C\n"
    )
    (tmp_path / "launcher" / "c.py").write_text("def f():\n    import launcher.a\n")
    (tmp_path / "emubench" / "ok.py").write_text(
        "import launcher.a\ndef g():\n    import numpy  # optional: the bench extra\n"
    )
    assert cycles(import_graph(tmp_path)) == [["launcher.a", "launcher.b", "launcher.c"]]
    assert unexplained_late_imports(tmp_path) == ["launcher/c.py:2"]
