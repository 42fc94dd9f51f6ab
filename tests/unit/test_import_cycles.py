"""No module of the project imports itself around a circle, and emucluster imports at the top.

A circle of imports is a design decision postponed to call time: two modules that each need
the other. ``test_layering`` keeps the five packages in order; this test keeps the modules
inside them in order too. Every import counts, wherever it is (module level, inside a
function, ``importlib.import_module("...")``), except those under ``if TYPE_CHECKING:``, which
never run. ``from package import name`` counts as an import of ``package.name`` when that is a
module.

In ``emucluster`` an import inside a function is allowed only for an optional dependency or a
start-up cost, stated beside it in a comment that says so (``# optional dependency: ...`` or
``# start-up cost: ...``, on the import's line or the line above). In ``launcher``,
``emubench`` and ``emutrace`` (programs, where importing ``emucluster.MPI`` starts MPI and a
rank imports what its role needs) a late import says why in a comment naming ``late:`` or
``optional`` on its line or the three above.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from tests.unit.test_layering import PACKAGES, ROOT, _module_name, _resolve, imported_modules

if TYPE_CHECKING:
    import pathlib
    from collections.abc import Iterator

LATE_IMPORT_RULES: dict[str, tuple[tuple[str, ...], int]] = {
    "emucluster": (("# optional dependency:", "# start-up cost:"), 1),
    "launcher": (("late:", "optional"), 3),
    "emubench": (("late:", "optional"), 3),
    "emutrace": (("late:", "optional"), 3),
}
"""Package -> (the words a late import's comment must carry, how many lines above count)."""


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """Lines inside ``if TYPE_CHECKING:`` blocks."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for inner in node.body:
                    for sub in ast.walk(inner):
                        if hasattr(sub, "lineno"):
                            lines.add(sub.lineno)
    return lines


def _modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    return {
        _module_name(path, root): path
        for package in PACKAGES
        if (root / package).is_dir()
        for path in sorted((root / package).rglob("*.py"))
    }


def _targets(name: str, modules: dict[str, pathlib.Path]) -> str | None:
    """The project module an import of ``name`` runs: the longest module prefix of it."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """Module -> the project modules it imports at run time (any depth, not type-only)."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for importer, path in modules.items():
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        skip = _type_checking_lines(tree)
        is_package = path.name == "__init__.py"
        for line, module in imported_modules(source, importer, is_package):
            target = _targets(module, modules) if line not in skip else None
            if target is not None and target != importer:
                graph[importer].add(target)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.lineno not in skip:
                base = _resolve(node.module, node.level, importer, is_package)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in modules and sub != importer:
                        graph[importer].add(sub)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def late_imports(root: pathlib.Path, package: str = "emucluster") -> list[str]:
    """Imports inside functions of ``package`` without a stated reason, as ``file:line``."""
    reasons, above_lines = LATE_IMPORT_RULES[package]
    found: list[str] = []
    for path in sorted((root / package).rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source)
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                near = "\n".join(lines[max(0, node.lineno - 1 - above_lines) : node.lineno])
                if not any(reason in near for reason in reasons):
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return sorted(set(found))


def test_no_module_imports_itself_around_a_circle() -> None:
    assert cycles(import_graph(ROOT)) == []


def test_emucluster_imports_at_the_top() -> None:
    assert late_imports(ROOT) == []


def test_every_late_import_of_the_programs_says_why() -> None:
    for package in ("launcher", "emubench", "emutrace"):
        assert late_imports(ROOT, package) == [], package


def test_the_graph_reads_real_modules() -> None:
    """The check reads the real tree (a renamed package would make it pass vacuously)."""
    graph = import_graph(ROOT)
    assert len(graph) > 200
    assert "emucluster.mpi.comm.comm" in graph["emucluster.mpi.comm.intracomm"]


def _tree(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    return tmp_path


def test_a_planted_circle_through_a_function_import_is_caught(tmp_path: pathlib.Path) -> None:
    root = _tree(
        tmp_path,
        {
            "emucluster/a.py": "from emucluster import b\n",
            "emucluster/b.py": "def f():\n    from emucluster.c import x\n",
            "emucluster/c.py": "import emucluster.a\nx = 1\n",
        },
    )
    assert cycles(import_graph(root)) == [["emucluster.a", "emucluster.b", "emucluster.c"]]


def test_a_type_only_import_makes_no_circle(tmp_path: pathlib.Path) -> None:
    root = _tree(
        tmp_path,
        {
            "nicd/a.py": "from nicd.b import B\n",
            "nicd/b.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nicd.a import A\n"
            ),
        },
    )
    assert cycles(import_graph(root)) == []


def test_a_relative_two_module_circle_is_caught(tmp_path: pathlib.Path) -> None:
    root = _tree(
        tmp_path,
        {
            "launcher/x/__init__.py": "",
            "launcher/x/one.py": "from . import two\n",
            "launcher/x/two.py": "from .one import thing\n",
        },
    )
    assert cycles(import_graph(root)) == [["launcher.x.one", "launcher.x.two"]]


def test_a_late_import_needs_a_stated_reason(tmp_path: pathlib.Path) -> None:
    root = _tree(
        tmp_path,
        {
            "emucluster/late.py": (
                "def f():\n"
                "    import json\n"
                "def g():\n"
                "    # optional dependency: numpy is not always there\n"
                "    import numpy\n"
                "def h():\n"
                "    import lark  # start-up cost: the grammar loads in 40 ms\n"
            ),
        },
    )
    assert late_imports(root) == ["emucluster/late.py:2"]


def test_a_program_late_import_says_why_near_it(tmp_path: pathlib.Path) -> None:
    root = _tree(
        tmp_path,
        {
            "launcher/late.py": (
                "def f():\n"
                "    import json\n"
                "def g():\n"
                "    # late: importing MPI initialises it\n"
                "    #   (a rank's job only)\n"
                "    from emucluster import MPI\n"
                "def h():\n"
                "    import matplotlib  # optional: the bench extra\n"
            ),
        },
    )
    assert late_imports(root, "launcher") == ["launcher/late.py:2"]
