"""Which requests a fork of the zygote can serve exactly like a fresh interpreter: a Python
command line (`python_launch`) of the same interpreter (`same_interpreter`) with the same
start-up environment (`env_blockers`); the launcher spawns the rest directly.

Python start-up state a fork shares: the hash seed (``PYTHONHASHSEED`` / the random secret) is
the zygote's, the same for every process of the job; ``random``'s global generator is
re-seeded in every child by CPython's own fork hook.

Invariants: pure, except `same_interpreter`, which compares files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "PyLaunch",
    "env_blockers",
    "first_path_entry",
    "python_launch",
    "same_interpreter",
    "sensitive_env",
]

_ALWAYS_FREE = frozenset({"PYTHONPATH", "PYTHONUNBUFFERED"})  # a fork applies these itself
_SENSITIVE_PREFIXES = ("PYTHON", "LC_")
_SENSITIVE_NAMES = frozenset({"LANG"})


@dataclass(frozen=True, slots=True)
class PyLaunch:
    """A Python command line, parsed as the interpreter would."""

    mode: str
    """``file``, ``module`` or ``command``."""
    target: str
    """The script path, module name or command text."""
    args: list[str]
    """``sys.argv[1:]``."""
    unbuffered: bool
    """``-u`` was given."""
    safe_path: bool = False
    """``-P`` was given: nothing is put before ``PYTHONPATH`` on ``sys.path`` (neither the
    working directory nor the script's)."""


def python_launch(argv: Sequence[str], executable: str) -> PyLaunch | None:
    """``argv`` as the interpreter ``executable`` would read it, if a fork of it can run it
    alike: ``PYTHON [-u] [-P] (SCRIPT | -m MODULE | -c COMMAND) [ARGS]`` (``-u`` and ``-P`` in
    any order); None otherwise (other programs, other interpreters, other interpreter options,
    a script on stdin)."""
    if not argv or argv[0] != executable:
        return None
    i, unbuffered, safe_path = 1, False, False
    while i < len(argv) and argv[i] in ("-u", "-P"):
        if argv[i] == "-u":
            unbuffered = True
        else:
            safe_path = True
        i += 1
    if i >= len(argv):
        return None
    word = argv[i]
    if word in ("-m", "-c"):
        if i + 1 >= len(argv) or not argv[i + 1]:
            return None
        mode = "module" if word == "-m" else "command"
        return PyLaunch(mode, argv[i + 1], list(argv[i + 2 :]), unbuffered, safe_path)
    if word.startswith("-") or not word:
        return None
    return PyLaunch("file", word, list(argv[i + 1 :]), unbuffered, safe_path)


def first_path_entry(launch: PyLaunch, cwd: str, env: Mapping[str, str]) -> str | None:
    """What a fresh interpreter puts before ``PYTHONPATH`` on ``sys.path`` for ``launch`` run
    in ``cwd`` with environment ``env``: the working directory for ``-m`` and ``-c``, the
    script's real directory for a script, nothing under ``-P`` or ``PYTHONSAFEPATH``."""
    if launch.safe_path or env.get("PYTHONSAFEPATH"):
        return None
    if launch.mode == "file":
        return os.path.dirname(os.path.realpath(os.path.join(cwd, launch.target)))
    return cwd


def same_interpreter(path: str, executable: str) -> bool:
    """Whether ``path`` starts the interpreter ``executable`` is, with the same prefix: the
    same file in the same directory (``venv/bin/python`` and ``venv/bin/python3``; not the
    base interpreter a venv links to, whose site-packages differ)."""
    if path == executable:
        return True
    if not os.path.isabs(path) or os.path.dirname(path) != os.path.dirname(executable):
        return False
    try:
        return os.path.samefile(path, executable)
    except OSError:
        return False


def sensitive_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that shape an interpreter's start-up (a fork inherits them)."""
    return {
        k: v
        for k, v in env.items()
        if (k.startswith(_SENSITIVE_PREFIXES) or k in _SENSITIVE_NAMES) and k not in _ALWAYS_FREE
    }


def env_blockers(child_env: Mapping[str, str], zygote_env: Mapping[str, str]) -> list[str]:
    """The start-up-sensitive variables whose value differs between a request and the zygote
    (any one means: spawn directly)."""
    mine = sensitive_env(child_env)
    return sorted(k for k in mine.keys() | zygote_env.keys() if mine.get(k) != zygote_env.get(k))
