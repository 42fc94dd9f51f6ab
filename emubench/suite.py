"""``emubench all``: every benchmark that draws a figure in ``docs/figures``, one after another.

Each job is the benchmark's own command (``emubench <name> ...``, run as a child process so one
failure or one matplotlib state cannot spoil the next); the full commands are the ones the
committed figures were made with, ``--quick`` swaps in few iterations and small node counts (a
smoke run of a few minutes on two cores, written to a fresh directory so that it never replaces
a committed figure). For every job the machine's load average before and after, the wall time
and the exit status go to ``RUNS_FILE`` in the output directory, and `emubench.report` then
writes ``REPORT.md`` beside the JSON.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emubench.common import cpu_count, load_average, read_json, write_json

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["JOBS", "RUNS_FILE", "Job", "run_all"]

RUNS_FILE = "emubench_runs.json"
"""Per job of the last `run_all` into a directory: command, load, seconds, exit status."""


@dataclass(frozen=True, slots=True)
class Job:
    """One benchmark command of the suite; ``{d}`` in its arguments is the output directory."""

    name: str
    """The ``emubench`` subcommand."""
    full: tuple[str, ...]
    """Arguments of the run that made the committed figures."""
    quick: tuple[str, ...]
    """Arguments of the smoke run (``--quick``)."""
    outputs: tuple[str, ...]
    """Files the job writes into the directory; a job that leaves one out did not produce it."""
    needs: str | None = None
    """An external program without which the job is skipped (reported, not failed)."""
    key: str = ""
    """The job's name in the runs file, in ``--only`` and in the report when one subcommand
    has two jobs (default: ``name``)."""

    @property
    def ident(self) -> str:
        """``key`` or, if none, ``name``."""
        return self.key or self.name

    def args(self, out_dir: Path, quick: bool) -> list[str]:
        """The arguments for ``out_dir``."""
        return [word.replace("{d}", str(out_dir)) for word in (self.quick if quick else self.full)]

    def command(self, out_dir: Path, quick: bool = False) -> str:
        """The command line, as a reader would type it."""
        return " ".join(["emubench", self.name, *self.args(out_dir, quick)])


def _json_png(stem: str) -> tuple[str, ...]:
    return ("--json", f"{{d}}/{stem}.json", "--png", f"{{d}}/{stem}.png")


JOBS: tuple[Job, ...] = (
    Job("unexpected-queue", _json_png("unexpected_queue"),
        (*_json_png("unexpected_queue"), "--max-depth", "1024", "--samples", "3",
         "--min-time", "0.005"),
        ("unexpected_queue.json", "unexpected_queue.png")),
    Job("nicd", _json_png("nicd_bench"),
        (*_json_png("nicd_bench"), "--iters", "200", "--stream", "2000", "--sweep-messages", "200"),
        ("nicd_bench.json", "nicd_bench.png")),
    Job("grim", _json_png("grim"),
        (*_json_png("grim"), "--iters", "5", "--reps", "2", "--bw-bytes", "400000"),
        ("grim.json", "grim.png")),
    Job("mpi-compare", _json_png("mpi_bench"),
        (*_json_png("mpi_bench"), "--nodes", "2", "4", "--iters", "50", "--coll-iters", "20"),
        ("mpi_bench.json", "mpi_bench.png"), needs="mpiexec"),
    Job("overhead", _json_png("overhead"), (*_json_png("overhead"), "--quick"),
        ("overhead.json", "overhead.png")),
    Job("core", ("--out", "{d}/core_cost.json"), ("--quick", "--out", "{d}/core_cost.json"),
        ("core_cost.json",)),
    Job("mpi-datatypes", _json_png("mpi_datatypes"), (*_json_png("mpi_datatypes"), "--quick"),
        ("mpi_datatypes.json", "mpi_datatypes.png")),
    Job("reduce-skew",
        ("sweep", "--nodes", "2", "4", "8", "16", "--extra-nodes", "32",
         "--skews", "0", "250", "500", "1000", "--elements", "4", "32", "128",
         "--latency-elements", "1", "32", "128", "--iters", "12", "--warmup", "2",
         "--repeats", "3", "--out", "{d}/reduce_skew.json"),
        ("sweep", "--nodes", "2", "4", "--skews", "0", "1000", "--elements", "4",
         "--latency-elements", "1", "--iters", "3", "--warmup", "1", "--repeats", "1",
         "--out", "{d}/reduce_skew.json"),
        ("reduce_skew.json", *(f"reduce_skew_fig3_{n}.png" for n in range(6, 11)))),
    Job("mcast",
        ("sweep", "--out-dir", "{d}", "--figs", "4", "5", "5ff", "6", "7", "--iters", "60",
         "--warmup", "5", "--skew-iters", "20", "--skews", "0", "100", "200", "400"),
        ("sweep", "--out-dir", "{d}", "--figs", "4", "5", "6", "7", "--nodes", "4",
         "--iters", "5", "--warmup", "1", "--skew-iters", "3", "--skews", "0", "400",
         "--skew-sizes", "4", "4096"),
        (*(f"mcast_fig{n}.json" for n in (4, 5, 6, 7)),
         *(f"mcast_fig{n}.png" for n in (4, 5, 6, 7, 8)))),
    Job("nicvm",
        ("sweep", "--iters", "100", "--reps", "2", "--out", "{d}/nicvm.json"),
        ("sweep", "--nodes", "2", "4", "--iters", "10", "--reps", "1", "--skew-iters", "5",
         "--out", "{d}/nicvm.json"),
        ("nicvm.json", "nicvm_echo.png", "nicvm_bcast.png", "nicvm_skew.png")),
    # the skew figures at the papers' operating point (time dilation, emubench.skew_dilated)
    Job("reduce-skew",
        ("sweep", "--dilate", "--nodes", "16", "--elements", "4", "--iters", "12",
         "--paper-skews", "0", "500", "1000", "--dilate-repeats", "3",
         "--out", "{d}/reduce_skew_dilated.json"),
        ("sweep", "--dilate", "--nodes", "2", "--elements", "4", "--iters", "2",
         "--dilate-repeats", "2", "--dilate-iters", "5", "--paper-skews", "0", "10",
         "--out", "{d}/reduce_skew_dilated.json"),
        ("reduce_skew_dilated.json", "reduce_skew_dilated.png"), key="reduce-skew-dilated"),
    Job("mcast",
        ("sweep", "--dilate", "--out-dir", "{d}", "--nodes", "16", "--dilate-sizes", "4",
         "--skew-iters", "5", "--dilate-warmup", "1", "--paper-skews", "0", "400",
         "--dilate-repeats", "3", "--dilate-iters", "50"),
        ("sweep", "--dilate", "--out-dir", "{d}", "--nodes", "2", "--dilate-sizes", "4",
         "--skew-iters", "2", "--dilate-repeats", "2", "--dilate-iters", "5",
         "--paper-skews", "0", "10"),
        ("mcast_fig7_dilated.json", "mcast_fig7_dilated.png"), key="mcast-dilated"),
    Job("nicvm",
        ("sweep", "--dilate", "--nodes", "16", "--dilate-sizes", "32", "--skew-iters", "8",
         "--dilate-warmup", "1", "--paper-skews", "0", "1000", "--dilate-repeats", "3",
         "--out", "{d}/nicvm_dilated.json"),
        ("sweep", "--dilate", "--nodes", "2", "--dilate-sizes", "32", "--skew-iters", "2",
         "--dilate-repeats", "2", "--dilate-iters", "5", "--paper-skews", "0", "10",
         "--out", "{d}/nicvm_dilated.json"),
        ("nicvm_dilated.json", "nicvm_dilated.png"), key="nicvm-dilated"),
)  # fmt: skip


def _missing_program(job: Job) -> str | None:
    if job.needs is None:
        return None
    beside = shutil.which(job.needs, path=str(Path(sys.executable).parent))
    return None if beside or shutil.which(job.needs) else job.needs


def _written(path: Path, since: float) -> bool:
    """Whether ``path`` was written at or after ``since`` (not left from an earlier run)."""
    return path.exists() and path.stat().st_mtime >= since - 1.0


def run_all(out_dir: Path, *, quick: bool, only: Sequence[str] = ()) -> dict[str, Any]:
    """Run the suite's jobs (``only``: those named) into ``out_dir``; return the runs record,
    which is also written to ``out_dir / RUNS_FILE`` (merged with a previous one)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / RUNS_FILE
    record: dict[str, Any] = read_json(path) if path.exists() else {"jobs": {}}
    record["cpus"] = cpu_count()
    for job in JOBS:
        if only and job.ident not in only:
            continue
        entry: dict[str, Any] = {"command": job.command(out_dir, quick), "quick": quick}
        missing = _missing_program(job)
        if missing is not None:
            entry |= {"status": f"skipped: {missing} not found", "returncode": None}
            print(f"emubench all: {job.ident} skipped ({missing} not found)", flush=True)
        else:
            print(f"emubench all: {entry['command']}", flush=True)
            entry["load_before"] = load_average()
            started, wall_start = time.monotonic(), time.time()
            done = subprocess.run(
                [sys.executable, "-m", "emubench", job.name, *job.args(out_dir, quick)],
                check=False,
            )
            entry["seconds"] = round(time.monotonic() - started, 1)
            entry["load_after"] = load_average()
            entry["returncode"] = done.returncode
            absent = [name for name in job.outputs if not _written(out_dir / name, wall_start)]
            entry["missing_outputs"] = absent
            entry["status"] = "ok" if done.returncode == 0 and not absent else "failed"
            print(
                f"emubench all: {job.ident} {entry['status']} in {entry['seconds']} s", flush=True
            )
        record["jobs"][job.ident] = entry
        write_json(path, record, indent=1)
    return record
