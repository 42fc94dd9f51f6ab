"""The offload rooms and the collective registry they plug into: coll never imports the MPI
layer or an offload, each offload's core is sans-IO, the offloads register themselves on the
registry's first lookup, and registry metadata (not an identity test) keeps application bypass
out of nonblocking calls."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

from emucluster import coll, offload
from emucluster.coll.context import simulate
from emucluster.offload.app_bypass.core import reduce_app_bypass
from emucluster.offload.nic_mcast.bcast import bcast_nic_mcast
from emucluster.offload.nicvm.bcast import bcast_nicvm
from emucluster.offload.services import StaticServices, services_of
from tests.unit.test_purity import impurities

COLL_DIR = pathlib.Path(coll.__file__).parent
OFFLOAD_DIR = pathlib.Path(offload.__file__).parent
# The pure part of each room (shells talk to the port and signals; shells.py builds them).
OFFLOAD_CORES = (
    "__init__.py",
    "services.py",
    "app_bypass/core.py",
    "nic_mcast/bcast.py",
    "nic_mcast/trees.py",
    "nicvm/bcast.py",
)


def imported_modules(source: str) -> set[str]:
    """Every module an import statement in ``source`` names (TYPE_CHECKING blocks included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", sorted(p.name for p in COLL_DIR.glob("*.py")))
def test_coll_imports_neither_mpi_nor_the_offloads(path: str) -> None:
    names = imported_modules((COLL_DIR / path).read_text(encoding="utf-8"))
    above = sorted(
        n for n in names if n.startswith(("emucluster.mpi", "emucluster.offload", "emucluster.MPI"))
    )
    assert above == [], f"coll/{path} imports {above}: coll sits below mpi and the offloads"


def test_the_layering_check_sees_a_type_checking_import() -> None:
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from emucluster.mpi import x\n"
    )
    assert "emucluster.mpi" in imported_modules(source)


@pytest.mark.parametrize("path", OFFLOAD_CORES)
def test_offload_cores_are_pure(path: str) -> None:
    source = (OFFLOAD_DIR / path).read_text(encoding="utf-8")
    assert impurities(source, path) == [], f"offload/{path} breaks STYLE §2"
    assert source.startswith('"""'), f"offload/{path} has no module docstring"
    shells = sorted(n for n in imported_modules(source) if n.endswith((".shell", ".shells")))
    assert shells == [], f"offload/{path} imports a shell: {shells}"


def test_every_room_has_its_core_beside_its_shell() -> None:
    rooms = sorted(p.name for p in OFFLOAD_DIR.iterdir() if (p / "__init__.py").is_file())
    assert rooms == ["app_bypass", "nic_mcast", "nicvm"]
    for room in rooms:
        files = {p.name for p in (OFFLOAD_DIR / room).glob("*.py")}
        assert "shell.py" in files
        assert files & {"core.py", "bcast.py"}, room


def test_offloads_register_themselves_on_the_first_lookup() -> None:
    # A fresh interpreter: importing coll loads no offload; the first lookup does, once.
    program = (
        "import sys\n"
        "from emucluster import coll\n"
        "assert 'emucluster.offload' not in sys.modules, 'coll imported the offloads'\n"
        "print(coll.choices('bcast'), coll.choices('reduce'))\n"
        "assert 'emucluster.offload' in sys.modules\n"
        "assert 'emucluster.offload.nicvm.shell' not in sys.modules\n"
        "try:\n"
        "    coll.get('bcast', environ={'EMU_BCAST': 'nic-mcst'})\n"
        "except coll.UnknownAlgorithmError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         check=True, timeout=60).stdout.splitlines()  # fmt: skip
    assert out[0] == (
        "('binomial', 'auto', 'nic-mcast', 'nicvm') ('binomial', 'app-bypass', 'auto', 'linear')"
    )
    assert out[1] == (
        "unknown bcast algorithm 'nic-mcst' (from EMU_BCAST); "
        "choices: binomial, auto, nic-mcast, nicvm"
    )


def test_offload_entries() -> None:
    assert coll.get("bcast", "nic-mcast") is bcast_nic_mcast
    assert coll.get("bcast", environ={"EMU_BCAST": "nicvm"}) is bcast_nicvm
    assert coll.get("reduce", "app-bypass") is reduce_app_bypass


def test_only_application_bypass_is_blocking_only() -> None:
    flagged = {
        (operation, name)
        for operation in coll.OPERATIONS
        for name in coll.choices(operation)
        if coll.entry(operation, name).blocking_only
    }
    assert flagged == {("reduce", "app-bypass")}
    assert coll.entry("reduce", environ={"EMU_REDUCE": "app-bypass"}).blocking_only


def test_services_are_typed_and_absent_on_simulated_ranks() -> None:
    seen: list[object] = []

    def probe(ctx: object) -> object:
        seen.append(services_of(ctx))  # type: ignore[arg-type]
        return None
        yield []  # a generator

    simulate(probe, 2)
    assert seen == [None, None]

    class Hosted:
        services = StaticServices()

    services = services_of(Hosted())  # type: ignore[arg-type]
    assert services is not None
    assert (services.mcast, services.bypass, services.nicvm) == (None, None, None)
