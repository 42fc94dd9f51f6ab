"""The lifeline: a child stops when its launcher's write end is gone, and only then."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

import pytest

from nicd.shell import lifeline

if TYPE_CHECKING:
    from collections.abc import Iterator

WAIT_S = 60.0
CHILD = """
import sys, time
from nicd.shell import lifeline
print(lifeline.watch(), flush=True)
time.sleep(float(sys.argv[1]))
"""


class Line(lifeline.Lifeline):
    """A lifeline whose write end a test may close (what the launcher's death does) once."""

    def kill_launcher(self) -> None:
        os.close(self.write_fd)
        object.__setattr__(self, "write_fd", -1)


@pytest.fixture
def line() -> Iterator[Line]:
    read_fd, write_fd = os.pipe()
    made = Line(read_fd, write_fd)
    yield made
    os.close(made.read_fd)
    if made.write_fd >= 0:
        os.close(made.write_fd)


@pytest.fixture(autouse=True)
def fresh_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifeline, "_watching", False)


def test_parse_takes_three_numbers_only() -> None:
    assert lifeline.parse("7:2049:1234") == (7, 2049, 1234)
    for bad in ("", "7", "7:1", "7:1:x", "-7:1:2", "7:1:2:3", "1e400:1:2"):
        assert lifeline.parse(bad) is None


def test_the_watch_fires_when_the_write_end_closes_and_not_before(
    line: Line,
) -> None:
    died = threading.Event()
    assert lifeline.watch(died.set, line.environ())
    assert not died.wait(0.3)
    line.kill_launcher()
    assert died.wait(WAIT_S)


def test_a_launcher_dead_before_the_watch_started_is_seen_at_once(
    line: Line,
) -> None:
    line.kill_launcher()
    died = threading.Event()
    assert lifeline.watch(died.set, line.environ())
    assert died.wait(WAIT_S)


def test_an_fd_that_is_not_the_named_pipe_is_never_watched(line: Line) -> None:
    dev, ino = (int(x) for x in line.environ()[lifeline.ENV_LIFELINE].split(":")[1:])
    other_r, other_w = os.pipe()
    try:
        wrong = [
            {},
            {lifeline.ENV_LIFELINE: "garbage"},
            {lifeline.ENV_LIFELINE: f"{other_r}:{dev}:{ino}"},  # another pipe
            {lifeline.ENV_LIFELINE: f"{line.read_fd}:{dev}:{ino + 1}"},
            {lifeline.ENV_LIFELINE: f"9999:{dev}:{ino}"},  # not open
            {lifeline.ENV_LIFELINE: f"{2**70}:{dev}:{ino}"},
        ]
        for environ in wrong:
            assert not lifeline.watch(lambda: None, environ), environ
    finally:
        os.close(other_r)
        os.close(other_w)


def test_a_real_child_stops_itself_when_the_launcher_end_closes(
    line: Line,
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "600"],
        env={**os.environ, **line.environ()},
        pass_fds=(line.read_fd,),
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"True\n"
        assert child.poll() is None
        line.kill_launcher()
        assert child.wait(timeout=WAIT_S) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()


def test_a_child_without_the_fd_runs_on(line: Line) -> None:
    """A grandchild started with close_fds inherits the variable but not the pipe."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "0"],
        env={**os.environ, **line.environ()},
        capture_output=True,
        timeout=WAIT_S,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, b"False\n")
