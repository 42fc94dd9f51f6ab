"""The shape of the MPI surface: low modules stay low, and the facade only re-exports.

``docs/dev/architecture.md`` lists ``emucluster/mpi/``'s rooms lowest first. The lowest ones
(constants, errors, keyvals, integer handles, info, error handlers, the predefined-handle
table) import nothing of the library above them, so any room may use them.
``emucluster/MPI.py`` is declarative: a docstring, imports, one ``__all__``, and as its last
statement the call that initialises MPI.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]
MPI_DIR = ROOT / "emucluster" / "mpi"
LOW_MODULES = ("constants", "errors", "keyvals", "handles", "info", "errhandler", "predefined")
LOW_MAY_IMPORT = frozenset(
    {
        *(f"emucluster.mpi.{name}" for name in LOW_MODULES),
        "emucluster.errors",  # the package's error base
        "emucluster.p2p.envelope",  # MAX_TAG, a constant of the wire envelope
    }
)


def _imports(path: pathlib.Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("emucluster")}


def test_the_low_modules_import_nothing_above_them() -> None:
    for name in LOW_MODULES:
        above = _imports(MPI_DIR / f"{name}.py") - LOW_MAY_IMPORT
        assert not above, f"emucluster/mpi/{name}.py imports {sorted(above)}"


def test_the_facade_only_reexports_then_initialises() -> None:
    tree = ast.parse((ROOT / "emucluster" / "MPI.py").read_text(encoding="utf-8"))
    *body, last = tree.body
    assert isinstance(body[0], ast.Expr)  # the docstring
    all_assignments = 0
    for node in body[1:]:
        if isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            assert targets == ["__all__"], ast.unparse(node)
            all_assignments += 1
        else:
            assert isinstance(node, ast.Import | ast.ImportFrom), ast.unparse(node)
    assert all_assignments == 1
    assert isinstance(last, ast.Assign)
    assert ast.unparse(last.targets[0]) == "(COMM_WORLD, COMM_SELF)"


def test_every_public_name_of_the_facade_is_in_its_all() -> None:
    tree = ast.parse((ROOT / "emucluster" / "MPI.py").read_text(encoding="utf-8"))
    bound: set[str] = {"COMM_WORLD", "COMM_SELF"}
    declared: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            bound.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
            declared = {ast.literal_eval(e) for e in node.value.elts}
    public = {name for name in bound if not name.startswith("_") and name != "annotations"}
    assert public == declared
