"""What every benchmark needs besides its measurement: environment, JSON, medians, emurun,
tables and plots.

A benchmark module is three things: the per-rank program run under emurun (``python -m
emubench.<name> ...``), the driver that starts those jobs, and the plotter. The driver's plumbing
lives here, so that each module keeps only its method. Nothing here measures: the timers, loops
and statistics that define a figure stay in the benchmark's own module.

rich is imported where a table is drawn, matplotlib (the ``bench`` extra) inside the plot helpers
only, so a rank program importing this module pays for neither.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emucluster import hosttime
from launcher.cpugauge import ENV_GAUGE_OUT, summarise

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from matplotlib.figure import Figure
    from rich.table import Table

__all__ = [
    "LOAD_WARN_PER_CPU",
    "busy_cpu",
    "command_line",
    "compare_run",
    "cpu_count",
    "emurun_command",
    "environment",
    "find_mpiexec",
    "git_commit",
    "jobs_gauge",
    "load_average",
    "median",
    "print_table",
    "pyplot",
    "read_json",
    "run_emurun",
    "run_emurun_json",
    "save_figure",
    "table",
    "write_json",
]

LOAD_WARN_PER_CPU = 1.0
"""A 1-minute load average above this many runnable tasks per CPU at the start of a run means
the machine was not idle: the run's absolute numbers are suspect (ratios less so)."""
EMURUN_TIMEOUT_S = 900
"""emurun's own ``--timeout`` for one benchmark job unless the benchmark asks for another."""
BUILD_QUERY_S = 60.0
"""`build_seen_by`: how long an interpreter may take to import launcher.build and scan."""


# -- numbers ------------------------------------------------------------------------------------


def median(xs: Iterable[float]) -> float:
    """The median of ``xs`` as a float; NaN for no samples (a missing point, not an error)."""
    values = list(xs)
    return float(statistics.median(values)) if values else float("nan")


def host_cpu() -> float:
    """This host's CPU seconds as `emucluster.hosttime.Region` counts them (the public
    measure users get): process CPU time plus the library's waits for the NIC charged as
    polling. Under ``EMU_WAIT=spin`` the second term stays 0."""
    return time.process_time() + hosttime.waited()


def busy_cpu(seconds: float) -> None:
    """Spend ``seconds`` of this process's CPU time: a busy loop that time slicing by other
    processes cannot stretch (the skew and catch-up loops of thesis 3.5 and 4.4)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


# -- environment ----------------------------------------------------------------------------


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages now (runnable tasks, all CPUs together)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not on every platform
        return []


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def git_commit() -> str | None:
    """The commit of the source tree the benchmark runs from, if it is a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def environment(
    load_before: Sequence[float] | None = None,
    *,
    wait_policy: str | None = None,
    nicd_priority: str | None = None,
    **extra: object,
) -> dict[str, object]:
    """What decides a run's timings: interpreter, machine, CPUs, the machine's load before
    (``load_before``, taken with `load_average` when the run started) and now, the wait policy
    (default: ``EMU_WAIT`` or emucluster's default, hybrid), nicd's priority, the git commit and
    the build (`launcher.build.build_info`: the modules compiled with mypyc, or pure Python)
    the ranks import and the nicds' (`build_seen_by`), and, once this process ran emurun jobs,
    their fidelity gauge (``run_delay``, `jobs_gauge`).
    ``extra`` adds the benchmark's own keys (they win over these)."""
    gauge = jobs_gauge()
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": cpu_count(),
        "load_average": {
            "before": list(load_before) if load_before is not None else None,
            "after": load_average(),
        },
        "wait_policy": wait_policy or os.environ.get("EMU_WAIT", "hybrid"),
        "nicd_priority": nicd_priority or "emurun default (SCHED_FIFO where permitted)",
        "git_commit": git_commit(),
        "build": build_seen_by(),
        "nicd_build": build_seen_by("-P"),
        **({"run_delay": gauge} if gauge is not None else {}),
        **extra,
    }


def build_seen_by(*flags: str) -> dict[str, object]:
    """`launcher.build.build_info` as an interpreter started here with ``flags`` finds the
    packages: without flags as a benchmark's rank (``python -m``: the working directory first,
    so a source checkout's packages), with ``-P`` as a nicd (``python -P -m nicd``: the
    installed ones). ``{"build": "unknown", "why": ...}`` if that interpreter cannot say."""
    code = "import json; from launcher.build import build_info; print(json.dumps(build_info()))"
    try:
        done = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True,
                              text=True, timeout=BUILD_QUERY_S, check=True)  # fmt: skip
        info = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return {"build": "unknown", "why": f"{type(exc).__name__}: {exc}"[:200]}
    return info if isinstance(info, dict) else {"build": "unknown", "why": repr(info)[:200]}


_GAUGE_FILES: list[str] = []
"""The file this process's emurun jobs append their gauge to, once made."""


def _gauge_file() -> str:
    """The file `run_emurun` names in ``EMU_GAUGE_OUT`` (made once, removed at exit)."""
    if not _GAUGE_FILES:
        fd, path = tempfile.mkstemp(prefix="emubench-gauge-", suffix=".jsonl", dir="/tmp")
        os.close(fd)
        atexit.register(_remove_quietly, path)
        _GAUGE_FILES.append(path)
    return _GAUGE_FILES[0]


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def jobs_gauge() -> dict[str, object] | None:
    """How much the emurun jobs this process ran so far waited for a CPU
    (`launcher.cpugauge.summarise`: jobs, oversubscribed jobs, the ranks' mean and largest
    run-delay share); None before the first job."""
    if not _GAUGE_FILES:
        return None
    try:
        text = Path(_GAUGE_FILES[0]).read_text(encoding="utf-8")
    except OSError:
        return None
    return summarise(text) if text else None


def command_line(subcommand: str, argv: Sequence[str]) -> str:
    """How to run this again: ``emubench <subcommand> <argv>``."""
    return " ".join(["emubench", subcommand, *argv])


# -- JSON -----------------------------------------------------------------------------------


def write_json(path: str | Path, obj: object, *, indent: int | None = None) -> None:
    """Write ``obj`` as JSON (UTF-8; ``indent`` None keeps large sample files small)."""
    text = json.dumps(obj, indent=indent)
    Path(path).write_text(text + ("\n" if indent is not None else ""), encoding="utf-8")


def read_json(path: str | Path) -> Any:
    """The JSON document at ``path``."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


# -- emurun ---------------------------------------------------------------------------------


def emurun_command(
    np: int,
    program: str | Sequence[str],
    args: Sequence[str] = (),
    *,
    emurun_args: Sequence[str] = (),
    quiet: bool = True,
    timeout_s: float | None = EMURUN_TIMEOUT_S,
) -> list[str]:
    """The argv of one emurun job: ``np`` ranks of ``program`` (a module name, run as
    ``python -m program``, or a whole argv) with ``args``; ``emurun_args`` go to emurun
    (``--nicd-args=...``, ``--nic-priority``); ``quiet`` passes ``-q``."""
    cmd = [sys.executable, "-m", "launcher.cli", "-np", str(np)]
    if quiet:
        cmd.append("-q")
    if timeout_s is not None:
        cmd += ["--timeout", f"{timeout_s:g}"]
    cmd += list(emurun_args)
    rank = [sys.executable, "-m", program] if isinstance(program, str) else list(program)
    return [*cmd, *rank, *args]


def run_emurun(
    np: int,
    program: str | Sequence[str],
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    *,
    emurun_args: Sequence[str] = (),
    quiet: bool = True,
    timeout_s: float | None = EMURUN_TIMEOUT_S,
    capture: bool = False,
    check: bool = True,
    wall_timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one emurun job (see `emurun_command`) and wait for it. ``env`` adds to this process's
    environment (``{"EMU_WAIT": "spin"}``); ``capture`` keeps stdout and stderr as text;
    ``check`` raises `subprocess.CalledProcessError` on a non-zero exit; ``wall_timeout`` bounds
    the wait from here (emurun's own ``timeout_s`` ends the job from inside)."""
    cmd = emurun_command(
        np, program, args, emurun_args=emurun_args, quiet=quiet, timeout_s=timeout_s
    )
    return subprocess.run(
        cmd,
        check=check,
        env={ENV_GAUGE_OUT: _gauge_file(), **os.environ, **(env or {})},
        capture_output=capture,
        text=True,
        timeout=wall_timeout,
    )


def job_result(
    proc: subprocess.CompletedProcess[str], out: str | Path, started: float
) -> dict[str, Any]:
    """The JSON a finished job's rank 0 wrote to ``out``, with its wall time since the
    monotonic ``started`` and its command line; SystemExit with the end of its output if it
    failed or wrote nothing."""
    argv = " ".join(str(word) for word in proc.args)
    if proc.returncode != 0 or not Path(out).exists():
        tail = ((proc.stdout or "") + (proc.stderr or ""))[-3000:]
        raise SystemExit(f"{argv} failed ({proc.returncode}):\n{tail}")
    results: dict[str, Any] = read_json(out)
    results["wall_s"] = round(time.monotonic() - started, 2)
    results["command"] = argv
    return results


def run_emurun_json(
    np: int,
    module: str,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """Run one emurun job whose rank 0 writes JSON to ``--out FILE`` (a temporary file given
    after ``args``) and return that JSON with the finished process."""
    with tempfile.NamedTemporaryFile(suffix=".json", dir="/tmp") as tmp:
        done = run_emurun(np, module, [*args, "--out", tmp.name], env, **kwargs)
        result: dict[str, Any] = read_json(tmp.name)
    return result, done


# -- tables and plots -----------------------------------------------------------------------


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> Table:
    """A rich table: the first column left-aligned, the others right-aligned (numbers); cells
    are printed with ``str``, so format floats before passing them."""
    from rich.table import Table  # late: ~40 ms a rank program importing this module skips

    out = Table(title=title)
    for i, column in enumerate(columns):
        out.add_column(column, justify="left" if i == 0 else "right")
    for row in rows:
        out.add_row(*(str(cell) for cell in row))
    return out


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Print `table` on stdout."""
    from rich.console import Console  # late: ~40 ms a rank program skips

    Console().print(table(title, columns, rows))


def pyplot() -> Any:  # matplotlib.pyplot, imported on demand
    """matplotlib's pyplot on the file-only Agg backend (needs the ``bench`` extra)."""
    import matplotlib  # optional: the bench extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Figure, path: str | Path, dpi: int = 100) -> None:
    """Lay out ``fig``, write it to ``path`` (PNG) and free it."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


def find_mpiexec(python: str = sys.executable) -> str:
    """The ``mpiexec`` beside ``python`` (the venv with mpi4py and the mpich wheel), else on
    PATH; SystemExit saying what to install if there is none."""
    beside = Path(python).with_name("mpiexec")
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if not found:
        raise SystemExit("mpiexec not found: pip install mpi4py mpich")
    return found


def compare_run(
    impl: str,
    nodes: int,
    rank_args: Sequence[str],
    out: Path,
    *,
    timeout: float,
    emurun_args: Sequence[str] = (),
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One side of a comparison with MPICH: ``python rank_args`` on ``nodes`` ranks under
    emurun (``impl`` "emucluster", with ``env`` added to the environment) or under ``mpiexec
    -n nodes`` with ``--impl mpi4py`` (mpi4py on MPICH; ``python``'s venv provides them, this
    package is put on its path). Returns rank 0's JSON with the wall time (`job_result`;
    SystemExit if the job failed)."""
    print(f"{impl} on {nodes} nodes ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    if impl == "emucluster":
        proc = run_emurun(
            nodes, [python, *rank_args], env=env, capture=True, check=False,
            emurun_args=emurun_args, timeout_s=None, wall_timeout=timeout,
        )  # fmt: skip
    else:
        argv = [find_mpiexec(python), "-n", str(nodes), python, *rank_args, "--impl", "mpi4py"]
        here = str(Path(__file__).resolve().parents[1])
        path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              check=False, env={**os.environ, "PYTHONPATH": path})  # fmt: skip
    return job_result(proc, out, started)
