"""Sans-IO cores import no I/O, clock, thread or signal module and use no global ``random``.

STYLE §2: only the shells own loops, sockets and clocks; randomness arrives as a seeded
``random.Random``. This parses each core module that exists (others appear as they are
written) and lists every offending import or use, with its line.
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

# Every .py under these folders is a core: a module moved between them stays checked.
CORE_PACKAGES = (
    "nicd/link",
    "nicd/mcast",
    "nicd/grim",
    "nicd/nicvm",
    "nicd/hostlink",
    "emucluster/coll",
)
# Core modules that sit beside shells at the top of their package.
CORE_MODULES = (
    "nicd/actions.py",
    "nicd/doorbell.py",
    "nicd/gm.py",
    "nicd/nic.py",
    "nicd/service.py",
    "nicd/stats.py",
    "emucluster/p2p/matching.py",
    "emucluster/p2p/envelope.py",
    "emucluster/p2p/protocol.py",
    "emucluster/mpi/topo/topology.py",
    "emucluster/port/state.py",
    "emucluster/grim/amcore.py",
    "emucluster/grim/rmalloc.py",
    "emucluster/offload/services.py",
    "emucluster/offload/app_bypass/core.py",
    "emucluster/offload/nic_mcast/bcast.py",
    "emucluster/offload/nic_mcast/trees.py",
    "emucluster/offload/nicvm/bcast.py",
    "nicd/ready.py",
    "launcher/plan.py",
    "launcher/rendezvous.py",
)


def core_files() -> list[str]:
    """The core modules, relative to the repository root (all must exist: a core that moves
    must be listed at its new place, not silently dropped from the check)."""
    found = list(CORE_MODULES)
    for package in CORE_PACKAGES:
        found += sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / package).rglob("*.py"))
    return found


def test_every_listed_core_exists() -> None:
    missing = [path for path in (*CORE_MODULES, *CORE_PACKAGES) if not (ROOT / path).exists()]
    assert not missing, missing


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
    assert "nicd/link/wire.py" in core_files()
    assert "nicd/link/faults.py" in core_files()


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
