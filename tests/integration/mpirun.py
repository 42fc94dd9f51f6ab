"""Run an MPI program under emurun for the integration tests (own job id and TMPDIR); a
command in the background with its output collected (`Background`); the agents of a
multi-host job run on this machine (`LOCAL_EXEC`, `agents_of`)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).parent / "mpi_programs"
EXAMPLES = ROOT / "examples"
EMURUN = [sys.executable, "-m", "launcher.cli"]
WAIT_S = 150.0
LOCAL_EXEC = "sh -c 'shift; exec \"$@\"' sh"
"""An ssh-like ``--launcher-exec`` command that runs the agent here."""


@dataclass
class Result:
    code: int
    out: str
    err: str

    def lines(self, prefix: str) -> list[str]:
        """Output lines starting with ``prefix``."""
        return sorted(line for line in self.out.splitlines() if line.startswith(prefix))


def as_from_a_terminal() -> None:
    """Default SIGINT/SIGHUP in the child, as a shell at a terminal starts it: emurun keeps
    signals it inherited as ignored (``nohup``, ``&``), which a test runner started in the
    background would otherwise pass on, and the Ctrl-C tests (and what a program sees of a
    fresh interpreter) would test that instead."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


class Background:
    """A command running in the background, its stdout and stderr collected by threads; it
    starts as from a terminal (`as_from_a_terminal`)."""

    def __init__(self, argv: list[str], env: dict[str, str], wait_s: float = WAIT_S) -> None:
        self.wait_s = wait_s
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, env=env, cwd=ROOT,
                                     preexec_fn=as_from_a_terminal)  # fmt: skip
        self.out: list[str] = []
        self.err: list[str] = []
        self._threads = [
            threading.Thread(target=self._drain, args=(stream, sink), daemon=True)
            for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _drain(stream: IO[bytes], sink: list[str]) -> None:
        for raw in stream:
            sink.append(raw.decode(errors="replace"))

    def wait_for(self, text: str, count: int = 1) -> None:
        """Until ``count`` lines of stdout hold ``text`` (fails if the command ends first)."""
        deadline = time.monotonic() + self.wait_s
        while sum(text in line for line in self.out) < count:
            assert self.proc.poll() is None, f"ended early:\n{''.join(self.err)}"
            assert time.monotonic() < deadline, f"no {text!r}:\n{''.join(self.err)}"
            time.sleep(0.05)

    def finish(self) -> tuple[int, str, str]:
        """Wait for the end: (exit status, stdout, stderr)."""
        code = self.proc.wait(timeout=self.wait_s)
        for thread in self._threads:
            thread.join(timeout=30)
        return code, "".join(self.out), "".join(self.err)


def mpirun(
    np_: int,
    program: Path | str,
    *args: str,
    emurun_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    timeout: float = WAIT_S,
) -> Result:
    """``emurun -np N [emurun_args] python PROGRAM ARGS``; returns code, stdout, stderr."""
    tmpdir = tempfile.mkdtemp(prefix="emumpi-", dir="/tmp")  # short: socket paths
    job = uuid.uuid4().hex[:12]
    argv = [*EMURUN, "-np", str(np_), "-q", "--job-id", job, "--timeout", str(int(timeout - 20)),
            *emurun_args, sys.executable, str(program), *args]  # fmt: skip
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            timeout=timeout,
            env={**os.environ, "TMPDIR": tmpdir, **(env or {})},
            cwd=ROOT,
            check=False,
            preexec_fn=as_from_a_terminal,
        )
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def agents_of(emurun_pid: int) -> dict[str, psutil.Process]:
    """The agents under an emurun, by their ``--name`` (from their command lines)."""
    found = {}
    for proc in psutil.Process(emurun_pid).children(recursive=True):
        try:
            words = proc.cmdline()
        except psutil.Error:
            continue
        if "launcher.agent" in words and "--name" in words:
            found[words[words.index("--name") + 1]] = proc
    return found
