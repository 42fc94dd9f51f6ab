"""mpi4py conformance job: mpi4py's own tests, run unmodified under ``emurun --mpi4py``.

``python -m emubench.conformance`` downloads the pinned mpi4py sdist (``pip download
--no-binary :all: --no-deps mpi4py==4.1.2``) or reuses ``--src DIR``, runs each of the
`FILES` separately at 2 and 3 nodes (`emubench.conformance_rank` on every rank) with a time
limit per file and an overall budget, counts each test's outcome on rank 0 from the log it
streams (so a stopped or hung job still counts what passed), prints the table and the total,
and exits 1 if the total passed falls below the landed figure (``--figure``, a JSON kept in
docs/figures). ``--update`` writes this run's rows into the figure (`merged`); ``--launcher
mpich`` runs the same files with ``mpiexec`` (mpi4py on MPICH) for the baseline. Every run
has the test directory on ``PYTHONPATH`` (`job_env`). Each rank writes its threads' stacks
`STACKS_MARGIN_S` before the time limit; a stopped run's are printed after the table
(`stack_summary`), so a hang CI saw once can be read from CI's output.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FILES", "MPI4PY_VERSION", "Outcome", "count_log", "job_env", "main", "markdown", "merged",
]  # fmt: skip

MPI4PY_VERSION = "4.1.2"
FILES = (
    "test_p2p_obj", "test_p2p_buf", "test_p2p_obj_matched", "test_p2p_buf_matched",
    "test_cco_obj", "test_cco_buf", "test_cco_vec", "test_cco_nb_buf", "test_cco_nb_vec",
    "test_request", "test_status", "test_comm", "test_group", "test_comm_topo",
    "test_datatype", "test_op", "test_msgspec", "test_msgzero", "test_pickle",
    "test_exceptions", "test_errorcode", "test_environ", "test_subclass", "test_pack",
    "test_address", "test_attributes", "test_buffer", "test_cco_ngh_obj", "test_ctypes",
    "test_errhandler", "test_file", "test_grequest", "test_handle", "test_info", "test_mpiabi",
    "test_mpimem", "test_objmodel", "test_package", "test_threads", "test_toplevel",
    "test_util_pkl5", "test_cco_buf_inter", "test_cco_obj_inter", "test_cco_vec_inter",
    "test_comm_inter", "test_spawn", "test_dynproc", "test_ulfm", "test_win", "test_util_sync",
    "test_session",
)  # fmt: skip
"""The 24 MPI-1/2 test files of issue 15, then 27 of the rest of the suite (issue 31) that pass
and take seconds each, the intercommunicator, dynamic-process, fault-tolerance and window files
among them (test_util_sync needs ``memoryview(win)``: Python 3.12, or the C extension a
compiled 3.11 install builds). The files that take minutes (test_io, test_rma, test_rma_nb,
test_util_dtlib, the persistent and neighbourhood collectives) stay out of the CI budget; the
whole suite is ``--files`` with every file (`docs/results.md` has its last run)."""
DEFAULT_FIGURE = Path("docs/figures/mpi4py_conformance.json")
STACKS_MARGIN_S = 20.0
"""How long before a run's time limit its ranks write their stacks (startup takes seconds)."""
STACK_FRAMES = 10
"""Innermost frames shown per thread of a stopped run."""
WORDS = {"pass": "passed", "xfail": "passed", "fail": "failed", "xpass": "failed",
         "error": "errors", "skip": "skipped"}  # fmt: skip


@dataclass
class Outcome:
    """What rank 0 of one run reported; ``hung`` is the test running when it was stopped."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    finished: bool = False
    hung: str | None = None
    bad: list[str] = field(default_factory=list)
    seconds: float = 0.0
    """Wall time of the run (launch to exit), for the CI budget; set by `run_one`."""
    stacks: str = ""
    """A stopped run's ranks' stacks near the time limit (`stack_summary`); not in figures."""

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped


def count_log(text: str) -> Outcome:
    """Count a rank log of `emubench.conformance_rank`; a started test with no outcome is an
    error (the one the time limit stopped)."""
    out = Outcome()
    running: str | None = None
    for line in text.splitlines():
        word, _, test_id = line.partition(" ")
        if word == "start":
            running = test_id
        elif word in WORDS:
            setattr(out, WORDS[word], getattr(out, WORDS[word]) + 1)
            if WORDS[word] in ("failed", "errors"):
                out.bad.append(f"{word} {test_id}")
            running = None
        elif word == "done":
            out.finished = True
    if running is not None and not out.finished:
        out.errors += 1
        out.hung = running
        out.bad.append(f"hung {running}")
    return out


def fetch_sdist(dest: Path) -> Path:
    """Download and unpack the pinned sdist into ``dest``; returns its ``test`` directory."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:",
         "--no-deps", f"mpi4py=={MPI4PY_VERSION}", "-d", str(dest)],
        check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    archive = next(dest.glob(f"mpi4py-{MPI4PY_VERSION}.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    return dest / f"mpi4py-{MPI4PY_VERSION}" / "test"


def job_env(test_dir: Path) -> dict[str, str]:
    """The job's environment: the test directory first on ``PYTHONPATH``, so every process,
    spawned ones too, imports the test modules. mpi4py's CI runs ``test/main.py``, whose
    directory is ``sys.path[0]`` and which ``mpi4py.futures`` workers import as the main
    script; here the main module is `emubench.conformance_rank`, so test_util_pool's process
    pools (world size 1 only) unpickle their functions only with the directory on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(test_dir), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return env


def run_one(test_dir: Path, name: str, nodes: int, limit: float, out_dir: Path,
            launcher: str) -> Outcome:  # fmt: skip
    """Run one file at ``nodes``; stop it after ``limit`` seconds; count rank 0's log."""
    log_dir = out_dir / f"{name}.n{nodes}"
    log_dir.mkdir(parents=True, exist_ok=True)
    for suffix in ("log", "stacks", "mpistats", "nicstats"):  # outcomes, stacks, statistics
        for old in log_dir.glob(f"rank*.{suffix}"):
            old.unlink()
    rank_cmd = ["-m", "emubench.conformance_rank", str(test_dir / f"{name}.py"), str(log_dir),
                f"{max(limit - STACKS_MARGIN_S, 1.0):.0f}"]  # fmt: skip
    if launcher == "mpich":
        cmd = ["mpiexec", "-n", str(nodes), sys.executable, *rank_cmd]
    else:
        cmd = [sys.executable, "-m", "launcher.cli", "-np", str(nodes), "--mpi4py", "-q",
               "--timeout", f"{max(limit, 1.0):.0f}", "--", sys.executable, *rank_cmd]  # fmt: skip
    started = time.monotonic()
    with open(log_dir / "output.txt", "wb") as output:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=output,
                                stderr=subprocess.STDOUT, env=job_env(test_dir),
                                start_new_session=True)  # fmt: skip
        try:
            proc.wait(timeout=limit + 20)
        except subprocess.TimeoutExpired:  # emurun's own --timeout did not end it: stop it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    rank0 = log_dir / "rank0.log"
    outcome = count_log(rank0.read_text(encoding="utf-8") if rank0.exists() else "")
    outcome.seconds = round(time.monotonic() - started, 1)
    if not outcome.finished:
        ranks = sorted(log_dir.glob("rank*.stacks"))
        # every rank's stacks, then every rank's statistics: a tail of the output (all CI
        # shows) holds the queues and streams of all ranks
        outcome.stacks = "".join(
            f"{path.stem}:\n{stack_summary(path.read_text(encoding='utf-8', errors='replace'))}"
            for path in ranks
        ) + "".join(
            f"{path.stem} statistics:\n"
            + _stats_line(path.with_suffix(".mpistats"))
            + _nic_line(path.with_suffix(".nicstats"))
            for path in ranks
        )
    return outcome


def _read_stats(path: Path) -> dict[str, Any] | None:
    """The statistics a rank wrote at its stack dump (JSON), or None if it wrote none."""
    try:
        stats = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stats if isinstance(stats, dict) else None


def _stats_line(path: Path) -> str:
    """A rank's MPI statistics at its stack dump, two lines: how long the matching queues were,
    what was dropped, which peers were dead; then the envelopes the queues held ('' if the rank
    wrote none)."""
    stats = _read_stats(path)
    if stats is None:
        return ""
    matching = stats.get("matching", {})
    return (f"  mpi: posted {matching.get('posted')} unexpected {matching.get('unexpected')} "
            f"arrivals {matching.get('arrivals')} dropped {stats.get('dropped')} "
            f"dead_peers {stats.get('dead_peers')} protocol {stats.get('protocol')}\n"
            f"  queued (context, source, tag): {stats.get('queued')}\n")  # fmt: skip


def _nic_line(path: Path) -> str:
    """A rank's nicd's counters at its stack dump: the transport's non-zero counters (drops,
    NACKs, retired streams...) and its busy streams; then the GM layer's refusals ('' if the
    rank wrote none)."""
    stats = _read_stats(path)
    if stats is None:
        return ""
    transport = stats.get("transport", {})
    if not isinstance(transport, dict):
        return f"  nic: {stats}\n"
    counters = {k: v for k, v in transport.items() if k not in ("peers", "busy") and v}
    return (
        f"  nic: {counters}\n  nic busy streams: {transport.get('busy')}\n"
        f"  nic gm: {stats.get('gm')}\n"
    )


def stack_summary(text: str) -> str:
    """A `faulthandler` dump cut to each thread's `STACK_FRAMES` innermost frames (first in
    the dump), the frames' file paths shortened to their last two parts."""
    lines: list[str] = []
    frames = 0
    for line in text.splitlines():
        if not line.startswith(" "):
            lines.append(line)
            frames = 0
        elif frames < STACK_FRAMES:
            frames += 1
            quoted = line.split('"')
            if len(quoted) == 3:
                line = f'{quoted[0]}"{"/".join(Path(quoted[1]).parts[-2:])}"{quoted[2]}'
            lines.append(line)
    return "".join(f"  {line}\n" for line in lines if line.strip())


def run_all(test_dir: Path, files: list[str], nodes: list[int], limit: float, budget: float,
            jobs: int, out_dir: Path, launcher: str) -> dict[str, dict[str, Outcome]]:  # fmt: skip
    """Every (file, nodes) run, ``jobs`` at a time, each within ``limit`` and all within
    ``budget`` seconds (a run that cannot start in time counts nothing). Every run gets the
    whole ``limit`` while the budget lasts: most files take seconds and a few minutes, so a
    fair share of the budget would stop the long ones early (with 41 files at 2 and 3 nodes
    it gave each run 110 s, and test_cco_vec at 3 nodes takes 130-150 s on a loaded machine)."""
    deadline = time.monotonic() + budget
    results: dict[str, dict[str, Outcome]] = {name: {} for name in files}

    def task(name: str, n: int) -> None:
        left = deadline - time.monotonic()
        outcome = Outcome(hung="not run: budget spent") if left < 5 else run_one(
            test_dir, name, n, min(limit, left), out_dir, launcher)  # fmt: skip
        results[name][str(n)] = outcome
        mark = "" if outcome.finished else f"  (stopped: {outcome.hung})"
        print(f"  {name} n={n}: {outcome.passed} passed, {outcome.failed} failed, "
              f"{outcome.errors} errors, {outcome.skipped} skipped, {outcome.seconds:.0f} s{mark}",
              flush=True)  # fmt: skip

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(task, name, n) for name in files for n in nodes]:
            future.result()
    return results


def table(results: dict[str, dict[str, Outcome]], nodes: list[int],
          baseline: dict[str, dict[str, int]] | None) -> str:  # fmt: skip
    """The file x nodes table (passed/failed/errors/skipped), MPICH's passed beside."""
    head = f"{'file':<22}" + "".join(f"  {f'n={n} p/f/e/s':>18}" for n in nodes)
    head += "  MPICH passed" if baseline else ""
    lines = [head, "-" * len(head)]
    sums = {str(n): Outcome() for n in nodes}
    for name, by_nodes in results.items():
        row = f"{name:<22}"
        for n in nodes:
            o = by_nodes.get(str(n), Outcome())
            s = sums[str(n)]
            s.passed, s.failed = s.passed + o.passed, s.failed + o.failed
            s.errors, s.skipped = s.errors + o.errors, s.skipped + o.skipped
            cell = f"{o.passed}/{o.failed}/{o.errors}/{o.skipped}" + ("" if o.finished else "*")
            row += f"  {cell:>18}"
        if baseline:
            row += "  " + "/".join(str(baseline.get(name, {}).get(str(n), "?")) for n in nodes)
        lines.append(row)
    lines.append("-" * len(head))
    row = f"{'total':<22}" + "".join(
        f"  {f'{s.passed}/{s.failed}/{s.errors}/{s.skipped}':>18}" for s in sums.values()
    )
    if baseline:
        row += "  " + "/".join(
            str(sum(baseline.get(name, {}).get(str(n), 0) for name in results)) for n in nodes
        )
    lines.append(row)
    lines.append("(* = stopped by the time limit; the test running then counts as an error)")
    return "\n".join(lines)


def total_passed(results: dict[str, dict[str, Outcome]]) -> int:
    """Tests passed over every file and node count."""
    return sum(o.passed for by_nodes in results.values() for o in by_nodes.values())


def merged(section: dict[str, Any], results: dict[str, dict[str, Outcome]],
           nodes: list[int]) -> dict[str, Any]:  # fmt: skip
    """A figure section with this run's files put in (replacing theirs, keeping the others',
    so ``--files`` updates a few rows); its ``total_passed`` -- the CI floor -- counts only
    the `FILES` the CI job runs, so a row of a file outside them never raises the floor."""
    files = dict(section.get("files", {}))
    files.update({name: {n: _row(o) for n, o in by.items()} for name, by in results.items()})
    total = sum(o["passed"] for name, by in files.items() if name in FILES for o in by.values())
    return {"total_passed": total, "nodes": nodes, "files": files}


def markdown(figure: dict[str, Any], nodes: list[int]) -> str:
    """The figure as a Markdown table: every file either side has a row for, emucluster's and
    MPICH's passed/failed/errors/skipped at each node count (``*``: stopped by the time limit,
    ``-``: no row), then the passed totals over those files and emucluster's share of MPICH's
    at each node count."""
    sides = [figure.get(key, {}).get("files", {}) for key in ("emucluster", "mpich")]
    names = sorted(set(sides[0]) | set(sides[1]))
    head = "| file | " + " | ".join(f"{who} n={n}" for who in ("emucluster", "MPICH")
                                    for n in nodes) + " |"  # fmt: skip
    lines = [head, "|---" * (1 + 2 * len(nodes)) + "|"]
    totals = [[0] * len(nodes) for _ in sides]
    for name in names:
        cells = []
        for side, total in zip(sides, totals, strict=True):
            for i, n in enumerate(nodes):
                row = side.get(name, {}).get(str(n))
                if row is None:
                    cells.append("-")
                    continue
                total[i] += row.get("passed", 0)
                mark = "" if row.get("finished", True) else "*"
                counts = (row.get(k, 0) for k in ("passed", "failed", "errors", "skipped"))
                cells.append("/".join(map(str, counts)) + mark)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **passed** | " + " | ".join(f"**{t}**" for side in totals for t in side) + " |")
    share = ", ".join(
        f"{100 * ours / theirs:.1f} % at {n} nodes"
        for n, ours, theirs in zip(nodes, totals[0], totals[1], strict=True)
        if theirs
    )
    lines.append(f"\n{len(names)} files; emucluster passes {share} of MPICH's count.")
    return "\n".join(lines) + "\n"


def _row(outcome: Outcome) -> dict[str, Any]:
    """An outcome as the figure keeps it (without its stacks)."""
    row = asdict(outcome)
    del row["stacks"]
    return row


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m emubench.conformance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument(
        "--src", type=Path, help="unpacked mpi4py sdist (or its test/); default: download"
    )
    p.add_argument("--nodes", type=int, nargs="+", default=[2, 3])
    p.add_argument("--files", nargs="+", default=list(FILES), help="test files (default: FILES)")
    p.add_argument("--time-limit", type=float, default=240.0, help="seconds per file and size")
    p.add_argument("--budget", type=float, default=3000.0, help="seconds for the whole job (a cap)")
    p.add_argument("--jobs", type=int, default=3, help="runs at once")
    p.add_argument("--launcher", choices=("emurun", "mpich"), default="emurun")
    p.add_argument("--out-dir", type=Path, help="rank logs (default: a temporary directory)")
    p.add_argument("--figure", type=Path, default=DEFAULT_FIGURE, help="landed figure (JSON)")
    p.add_argument("--update", action="store_true", help="write this run's rows into the figure")
    p.add_argument("--markdown", action="store_true",
                   help="print the figure's rows in Markdown; run nothing")  # fmt: skip
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the job; 1 if the total passed is below the figure's, else 0."""
    args = build_parser().parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.figure.read_text()), args.nodes), end="")
        return 0
    with tempfile.TemporaryDirectory(prefix="mpi4py-conformance-") as tmp:
        work = Path(tmp)
        test_dir = args.src if args.src else fetch_sdist(work / "sdist")
        if (test_dir / "test").is_dir():
            test_dir = test_dir / "test"
        out_dir = args.out_dir or work / "logs"
        print(f"== mpi4py {MPI4PY_VERSION} tests from {test_dir} under {args.launcher}, "
              f"nodes {args.nodes}, {args.time_limit:.0f} s per file", flush=True)  # fmt: skip
        started = time.monotonic()
        results = run_all(test_dir.resolve(), args.files, args.nodes, args.time_limit,
                          args.budget, args.jobs, out_dir, args.launcher)  # fmt: skip
        elapsed = time.monotonic() - started
    figure = json.loads(args.figure.read_text()) if args.figure.exists() else {}
    key = "emucluster" if args.launcher == "emurun" else "mpich"
    baseline = {name: {n: o["passed"] for n, o in by.items()}
                for name, by in figure.get("mpich", {}).get("files", {}).items()}  # fmt: skip
    print(table(results, args.nodes, baseline or None))
    for name, by_nodes in results.items():
        for n, outcome in by_nodes.items():
            if outcome.stacks:
                print(f"stacks of {name} n={n} near its time limit (stopped in {outcome.hung}):")
                print(outcome.stacks, end="")
    passed = total_passed(results)
    landed = int(figure.get(key, {}).get("total_passed", 0))
    print(f"total passed: {passed} (landed figure: {landed}; {elapsed:.0f} s)")
    if args.update:
        figure.setdefault("mpi4py", MPI4PY_VERSION)
        figure[key] = merged(figure.get(key, {}), results, args.nodes)
        args.figure.parent.mkdir(parents=True, exist_ok=True)
        args.figure.write_text(json.dumps(figure, indent=1, sort_keys=True) + "\n")
        print(f"wrote {args.figure}")
        return 0
    if passed < landed:
        print(f"FAIL: {passed} tests passed, below the landed {landed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
