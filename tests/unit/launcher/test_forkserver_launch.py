"""What a fork of the zygote may run: Python command lines, interpreters, start-up variables
(launcher/forkserver/launch.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from launcher.forkserver.launch import (
    PyLaunch,
    env_blockers,
    first_path_entry,
    python_launch,
    same_interpreter,
)

if TYPE_CHECKING:
    from pathlib import Path

PY = "/opt/py/bin/python"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([PY, "app.py", "a", "-m"], PyLaunch("file", "app.py", ["a", "-m"], False)),
        (
            [PY, "-m", "nicd", "--node-id", "3"],
            PyLaunch("module", "nicd", ["--node-id", "3"], False),
        ),
        ([PY, "-c", "print(1)", "x"], PyLaunch("command", "print(1)", ["x"], False)),
        ([PY, "-u", "app.py"], PyLaunch("file", "app.py", [], True)),
        ([PY, "-u", "-u", "-m", "pkg"], PyLaunch("module", "pkg", [], True)),
        ([PY, "-P", "-m", "nicd"], PyLaunch("module", "nicd", [], False, True)),
        ([PY, "-P", "-u", "app.py", "-P"], PyLaunch("file", "app.py", ["-P"], True, True)),
        ([PY, "-P"], None),
        (["/usr/bin/python3", "app.py"], None),  # another interpreter
        (["./a.out", "app.py"], None),
        ([PY, "-O", "app.py"], None),  # an option a fork cannot apply
        ([PY, "-X", "importtime", "app.py"], None),
        ([PY, "-"], None),  # a script on stdin
        ([PY], None),
        ([PY, "-m"], None),
        ([PY, "-m", ""], None),
        ([PY, "-u"], None),
        ([], None),
    ],
)
def test_python_launch(argv: list[str], expected: PyLaunch | None) -> None:
    assert python_launch(argv, PY) == expected


def test_first_path_entry_is_what_a_fresh_interpreter_puts_first(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    cwd = str(tmp_path)
    assert first_path_entry(PyLaunch("module", "pkg", [], False), cwd, {}) == cwd
    assert first_path_entry(PyLaunch("command", "pass", [], False), cwd, {}) == cwd
    script = PyLaunch("file", "link/app.py", [], False)
    assert first_path_entry(script, cwd, {}) == str(real)  # relative to cwd, links resolved
    absolute = PyLaunch("file", str(real / "app.py"), [], False)
    assert first_path_entry(absolute, "/elsewhere", {}) == str(real)
    assert first_path_entry(PyLaunch("module", "pkg", [], False, True), cwd, {}) is None
    assert first_path_entry(script, cwd, {"PYTHONSAFEPATH": "1"}) is None


def test_env_blockers_name_the_start_up_variables_that_differ() -> None:
    zygote = {"LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
    same = {**zygote, "PYTHONPATH": "/shim", "PYTHONUNBUFFERED": "1", "EMU_RANK": "2"}
    assert env_blockers(same, zygote) == []
    assert env_blockers({**same, "PYTHONHASHSEED": "1"}, zygote) == ["PYTHONHASHSEED"]
    assert env_blockers({**same, "LC_ALL": "C", "PYTHONOPTIMIZE": "1"}, zygote) == [
        "LC_ALL",
        "PYTHONOPTIMIZE",
    ]
    assert env_blockers({"LANG": "C.UTF-8"}, zygote) == ["PYTHONHASHSEED"]


def test_same_interpreter_means_same_file_in_the_same_directory(tmp_path: Path) -> None:
    real = tmp_path / "base" / "python3.11"
    real.parent.mkdir()
    real.write_text("")
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(real)
    (venv / "python3").symlink_to(real)
    assert same_interpreter(str(venv / "python"), str(venv / "python3"))
    assert same_interpreter("python3", "python3")
    assert not same_interpreter(str(real), str(venv / "python3"))  # the venv's base: no
    assert not same_interpreter("python", str(venv / "python3"))  # relative: no
    assert not same_interpreter(str(venv / "missing"), str(venv / "python3"))
