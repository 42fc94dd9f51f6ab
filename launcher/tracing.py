"""``emurun --trace DIR``: arm every process's recorder, bring the recordings together, merge.

On one machine the children inherit ``EMU_TRACE_DIR`` and write into DIR themselves. Across
hosts each agent points its children at its run directory and ships the files back in
TraceFile frames; emurun writes them to ``DIR/<i>-<host>/`` (agent ``i``: a host may run two)
and estimates each host's clock offset at the rendezvous from a few ClockPing/ClockPong
exchanges (the one with the smallest round trip; the agent's clock read at its midpoint),
saved in ``DIR/clocks.json`` for the merge.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import TYPE_CHECKING

from emutrace.merge import CLOCKS_FILE, merge_dir
from emutrace.recorder import ENV_TRACE_DIR

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from launcher.plan import LaunchPlan

__all__ = [
    "CHUNK_BYTES",
    "CLOCK_PINGS",
    "MAX_HOST_BYTES",
    "TRACE_FILE",
    "TraceSink",
    "host_folder",
    "offset_from_samples",
    "trace_chunks",
    "traced_job",
]

CLOCK_PINGS = 8  # ClockPing exchanges per agent
CHUNK_BYTES = 1 << 20  # TraceFile data per frame (control.MAX_FRAME is 4 MiB)
MAX_HOST_BYTES = 1 << 30  # trace bytes emurun takes from one host; the rest is counted
TRACE_FILE = re.compile(r"(nic|host)\d{1,6}-\d{1,10}\.trace\.msgpack")
"""The name of one process's recording (``Recorder.flush``); nothing else is shipped."""


def traced_job(plan: LaunchPlan, run: Callable[[], int]) -> int:
    """Run the job (``run``, which runs ``plan``); with ``--trace DIR`` (``plan.trace_dir``),
    merge the recordings into DIR/trace.json and DIR/timeline.png when it ends. On one machine
    the children inherit ``EMU_TRACE_DIR``; across hosts the agents ship the recordings in
    TraceFile frames (`launcher.job.Job` writes them through a `TraceSink`)."""
    if plan.trace_dir is None:
        return run()
    directory = plan.trace_dir
    os.makedirs(directory, exist_ok=True)
    if plan.hosts is None:
        os.environ[ENV_TRACE_DIR] = directory  # nicd_env and host_env copy emurun's environment
    status = run()
    trace = merge_dir(directory, plan.trace_window)
    dropped = sum(trace["otherData"]["dropped"].values())
    note = f", {dropped} dropped (ring full)" if dropped else ""
    print(f"emurun: trace in {directory}/trace.json{note}", file=sys.stderr)
    return status


def host_folder(index: int, name: str) -> str:
    """The folder (and clocks.json key) of agent ``index`` on host ``name``: one path
    component whatever the name (``[::1]``, ``fe80::1%eth0``)."""
    return f"{index}-{re.sub(r'[^A-Za-z0-9._-]', '_', name)}"


def offset_from_samples(samples: Sequence[tuple[int, int, int]]) -> tuple[int, int]:
    """(offset, round trip) in ns from (sent, agent clock, received) samples: the sample
    with the smallest round trip, its agent reading taken as our clock at the midpoint
    (an agent time ``t`` is our ``t - offset``). ValueError without samples."""
    if not samples:
        raise ValueError("no clock samples")
    sent, agent, received = min(samples, key=lambda s: s[2] - s[0])
    return agent - (sent + received) // 2, received - sent


class TraceSink:
    """Where emurun puts the TraceFile frames of one job: ``directory/<folder>/<name>``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.taken: dict[str, int] = {}
        """Bytes written per folder (host)."""
        self.dropped = 0
        """Frames refused: a bad name or host, or beyond MAX_HOST_BYTES."""

    def write(self, folder: str, name: str, offset: int, data: bytes) -> bool:
        """Write one frame's data into ``folder`` (:func:`host_folder`); False (counted)
        when it is refused."""
        used = self.taken.get(folder, 0)
        safe = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}", folder) is not None
        if not (safe and TRACE_FILE.fullmatch(name)) or used + len(data) > MAX_HOST_BYTES:
            self.dropped += 1
            return False
        path = os.path.join(self.directory, folder)
        os.makedirs(path, exist_ok=True)
        path = os.path.join(path, name)
        with open(path, "r+b" if os.path.exists(path) else "wb") as f:
            f.seek(offset)
            f.write(data)
        self.taken[folder] = used + len(data)
        return True


def trace_chunks(directory: str) -> Iterator[tuple[str, int, bytes]]:
    """(name, offset, data) pieces of every recording in ``directory`` (the agent's side)."""
    if not os.path.isdir(directory):
        return
    for name in sorted(os.listdir(directory)):
        if not TRACE_FILE.fullmatch(name):
            continue
        with open(os.path.join(directory, name), "rb") as f:
            offset = 0
            while data := f.read(CHUNK_BYTES):
                yield name, offset, data
                offset += len(data)


def write_clocks(directory: str, hosts: dict[str, dict[str, object]]) -> None:
    """Save the per-host clock estimates for the merge (``DIR/clocks.json``)."""
    with open(os.path.join(directory, CLOCKS_FILE), "w", encoding="utf-8") as f:
        json.dump({"reference": "emurun's CLOCK_MONOTONIC", "hosts": hosts}, f, indent=1)
