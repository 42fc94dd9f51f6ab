"""Sans-IO cores import no I/O, clock, thread or signal module and use no global ``random``.

STYLE §2: only the shells own loops, sockets and clocks; randomness arrives as a seeded
``random.Random``. Purity is checked by folder: every ``.py`` under a core folder must be pure,
so a module added to or moved into one is checked from its first commit; a short list names
the single core modules that still sit beside shells. A listed folder or module that does not
exist fails (a core that moves must be listed at its new place, not dropped from the check),
and every module of nicd must live in a room that says what it is (a core folder, the shell
folder, or one of the few named modules at its top).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

BANNED_MODULES = frozenset(
    {
        "socket",
        "asyncio",
        "uvloop",
        "trio",
        "time",
        "signal",
        "os",
        "threading",
        "selectors",
        "subprocess",
    }
)
ALLOWED_FROM_RANDOM = frozenset({"Random"})  # a seeded generator may be built; nothing else

CORE_FOLDERS = (
    "nicd/core",
    "nicd/gm",
    "nicd/link",
    "nicd/mcast",
    "nicd/grim",
    "nicd/nicvm",
    "nicd/hostlink",
    "emucluster/coll",
    "emucluster/p2p",
)
"""Every ``.py`` under these folders is a core."""

CORE_MODULES = (
    "nicd/config.py",  # not cores but declarations every core imports, at the top of nicd
    "nicd/errors.py",
    "emucluster/mpi/topo/topology.py",
    "emucluster/mpi/ft/agreement.py",
    "emucluster/port/state.py",
    "emucluster/grim/amcore.py",
    "emucluster/grim/rmalloc.py",
    "emucluster/offload/services.py",
    "emucluster/offload/app_bypass/core.py",
    "emucluster/offload/nic_mcast/bcast.py",
    "emucluster/offload/nic_mcast/trees.py",
    "emucluster/offload/nicvm/bcast.py",
    "emucluster/pmi/wire.py",
    "emucluster/pmi/session.py",
    "emucluster/mpi/dynamic/wire.py",
    "launcher/dynamic/core.py",
    "launcher/plan.py",
    "launcher/rendezvous.py",
    "launcher/startup.py",
)
"""Core modules that still sit beside shells, outside a core folder."""

NICD_SHELL_FOLDERS = ("nicd/shell",)
"""nicd's I/O: the daemon and its OS helpers."""
NICD_TOP = frozenset(
    {
        "nicd/__init__.py",
        "nicd/__main__.py",  # the command line: ``python -m nicd`` runs nicd/__main__.py
        "nicd/config.py",
        "nicd/errors.py",
        "nicd/contract.py",  # names only: what a host may take from nicd
    }
)
"""The modules allowed at the top of nicd, outside every room."""


def _under(path: str, folders: tuple[str, ...]) -> bool:
    return any(path.startswith(folder + "/") for folder in folders)


def core_files(root: pathlib.Path = ROOT) -> list[str]:
    """The core modules under ``root``, relative to it: the listed ones and every ``.py``
    under a core folder."""
    found = list(CORE_MODULES)
    for folder in CORE_FOLDERS:
        found += sorted(p.relative_to(root).as_posix() for p in (root / folder).rglob("*.py"))
    return found


def missing_cores(root: pathlib.Path = ROOT) -> list[str]:
    """Every listed core folder that is no folder of ``.py`` files under ``root``, and every
    listed core module that is no file."""
    missing = [m for m in CORE_MODULES if not (root / m).is_file()]
    missing += [f for f in CORE_FOLDERS if not any((root / f).rglob("*.py"))]
    return missing


def nicd_modules_out_of_place(root: pathlib.Path = ROOT) -> list[str]:
    """Every module of nicd under ``root`` that is in no core folder, no shell folder and not
    among the few named at its top."""
    out = []
    for path in sorted((root / "nicd").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if not (rel in NICD_TOP or _under(rel, CORE_FOLDERS) or _under(rel, NICD_SHELL_FOLDERS)):
            out.append(rel)
    return out


def test_every_listed_core_exists() -> None:
    assert missing_cores() == []


def test_every_nicd_module_lives_in_a_room() -> None:
    assert nicd_modules_out_of_place() == []


def test_no_core_folder_is_a_shell_folder() -> None:
    assert not set(CORE_FOLDERS) & set(NICD_SHELL_FOLDERS)
    assert not [m for m in CORE_MODULES if _under(m, NICD_SHELL_FOLDERS)]


def impurities(source: str, filename: str = "<source>") -> list[str]:
    """Every banned import and every use of the global ``random`` functions in ``source``."""
    tree = ast.parse(source, filename)
    problems: list[str] = []
    random_aliases: set[str] = set()  # names bound to the random module itself

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in BANNED_MODULES:
                    problems.append(f"{node.lineno}: import {alias.name}")
                elif alias.name == "random":
                    random_aliases.add(alias.asname or "random")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            if top in BANNED_MODULES:
                problems.append(f"{node.lineno}: from {node.module} import ...")
            elif node.module == "random":
                for alias in node.names:
                    if alias.name not in ALLOWED_FROM_RANDOM:
                        problems.append(f"{node.lineno}: from random import {alias.name}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
        ):
            problems.append(f"{node.lineno}: __import__(...)")

    if random_aliases:
        # `random.Random` is the one allowed use of the module; any other use of the name
        # (`random.random()`, `random.seed`, `rng = random`) reaches the global generator.
        allowed: set[int] = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in random_aliases
                and node.attr in ALLOWED_FROM_RANDOM
            ):
                allowed.add(id(node.value))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Name)
                and node.id in random_aliases
                and isinstance(node.ctx, ast.Load)
                and id(node) not in allowed
            ):
                problems.append(f"{node.lineno}: global random use ({ast.unparse(node)}...)")
    return sorted(problems, key=lambda p: int(p.split(":")[0]))


# -- the rule on the tree ---------------------------------------------------------------------


def test_some_core_modules_exist() -> None:
    cores = core_files()
    for module in ("nicd/link/wire.py", "nicd/core/nic.py", "nicd/gm/service.py"):
        assert module in cores
    assert not [m for m in cores if _under(m, NICD_SHELL_FOLDERS)]


@pytest.mark.parametrize("path", core_files())
def test_core_module_is_pure(path: str) -> None:
    source = (ROOT / path).read_text(encoding="utf-8")
    assert impurities(source, path) == [], f"{path} breaks STYLE §2"


# -- the checker itself -----------------------------------------------------------------------

CLEAN = """
from __future__ import annotations
import random
import struct
from random import Random
from typing import TYPE_CHECKING
from nicd.errors import BadPacket

class Core:
    def __init__(self, seed: int, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random(seed)
        self.other = Random(seed + 1)
        self.x = self.rng.random()  # the plan's own generator: fine

def time_left(deadline: float, *, now: float) -> float:
    return deadline - now
"""


def test_checker_accepts_a_clean_core() -> None:
    assert impurities(CLEAN) == []


@pytest.mark.parametrize(
    "snippet",
    [
        "import socket",
        "import asyncio",
        "import uvloop",
        "import trio",
        "import time",
        "import signal",
        "import os",
        "import os.path",
        "import threading",
        "import selectors",
        "import subprocess",
        "import time as clock",
        "import struct, socket",
        "from time import monotonic",
        "from os import path",
        "from os.path import join",
        "from asyncio import get_event_loop as loop",
        "from trio.lowlevel import current_clock",
        "from random import random",
        "from random import Random, randint",
        "from random import shuffle as mix",
        "import random\nx = random.random()",
        "import random\nrandom.seed(1)",
        "import random\nrandom.shuffle([])",
        "import random\ndef f(): return random.choice([1])",
        "import random as r\nx = r.randrange(3)",
        "import random\nrng = random",
        "def f():\n    import time\n    return time.monotonic()",
        "if True:\n    from signal import SIGUSR1",
        "m = __import__('os')",
    ],
)
def test_checker_flags_impure_snippet(snippet: str) -> None:
    assert impurities(snippet), snippet


def test_checker_reports_the_line() -> None:
    src = "import struct\n\nimport random\nx = 1\ny = random.random()\nimport time\n"
    assert impurities(src) == ["5: global random use (random...)", "6: import time"]


def test_checker_ignores_relative_imports_and_lookalike_names() -> None:
    src = (
        "from . import time\n"
        "from .socket import x\n"
        "import timeit_not\n"
        "import osmosis\n"
        "import randomness\n"
        "import random\n"
        "method = random.Random.random\n"  # names the class's method; reaches no global state
        "now = 0.0\n"
        "time = now\n"
    )
    assert impurities(src) == []


# -- the folder rules on a planted tree -------------------------------------------------------


def _plant(root: pathlib.Path, files: list[str]) -> pathlib.Path:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text('"""x."""\n')
    return root


def test_a_listed_core_that_does_not_exist_is_missing(tmp_path: pathlib.Path) -> None:
    everything = [*CORE_MODULES, *(f"{folder}/a.py" for folder in CORE_FOLDERS)]
    assert missing_cores(_plant(tmp_path, everything)) == []
    (tmp_path / "nicd/gm/a.py").unlink()  # an empty core folder counts as missing
    (tmp_path / "launcher/plan.py").unlink()
    assert missing_cores(tmp_path) == ["launcher/plan.py", "nicd/gm"]


def test_a_new_module_under_a_core_folder_is_checked(tmp_path: pathlib.Path) -> None:
    _plant(tmp_path, ["nicd/gm/new/deep.py", "nicd/shell/io.py"])
    cores = core_files(tmp_path)
    assert "nicd/gm/new/deep.py" in cores
    assert "nicd/shell/io.py" not in cores


def test_a_nicd_module_outside_every_room_is_out_of_place(tmp_path: pathlib.Path) -> None:
    _plant(tmp_path, [*NICD_TOP, "nicd/core/nic.py", "nicd/shell/daemon.py", "nicd/stray.py",
                      "nicd/newroom/x.py"])  # fmt: skip
    assert nicd_modules_out_of_place(tmp_path) == ["nicd/newroom/x.py", "nicd/stray.py"]
