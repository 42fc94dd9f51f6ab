"""Run one fuzz target under atheris (libFuzzer) for a given time and grow its corpus.

    pip install -e '.[fuzz]'
    python -m tests.fuzz.run --target wire --seconds 120     # fuzz, then minimise the corpus
    python -m tests.fuzz.run --target nicvm --seed           # (re)write the seed inputs
    python -m tests.fuzz.run --list

Fuzzing starts from the committed corpus (`tests/fuzz/corpus/<target>/`), copied to a scratch
directory; when the time is up, libFuzzer's merge keeps the inputs that add coverage, and the
corpus directory is replaced with them (files named by their SHA-1). A crash (an untyped error
out of a decoder, a failed round trip, an input that takes longer than ``--input-timeout``) is
saved under `tests/fuzz/crashes/<target>/` (not committed) and the run exits 1; fix it, then add
the input to the corpus so the replay test (`tests/fuzz/test_corpus.py`) keeps it fixed.

Each step runs in a child process (libFuzzer exits when it is done); the children import the
project under atheris's instrumentation, so coverage guides the fuzzer through nicd, launcher
and lark code, not only the target functions.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["CORPUS", "CRASHES", "MAX_LEN", "main"]

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
CRASHES = HERE / "crashes"
MAX_LEN = {"wire": 4096, "hostlink": 4096, "control": 4096, "forkserver": 4096, "nicvm": 8192}
"""Longest input libFuzzer makes per target (nicvm: sources up to half the 16 KiB limit)."""
INSTRUMENT = ["nicd", "launcher", "lark", "msgpack", "tests.fuzz"]
_STATS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)", re.M)


def _engine(name: str, argv: list[str]) -> None:
    """In the child: instrument, import the targets, hand over to libFuzzer (which exits).
    ``argv[0]`` is the wrapper script libFuzzer re-runs for a merge."""
    import atheris

    with atheris.instrument_imports(include=INSTRUMENT):
        from tests.fuzz.targets import TARGETS
    atheris.Setup(argv, TARGETS[name])
    atheris.Fuzz()


def _wrapper(name: str, tmp: Path) -> Path:
    """An executable that runs the engine child (libFuzzer runs its argv[0] again to merge)."""
    script = tmp / f"fuzz-{name}"
    root = shlex.quote(str(HERE.parents[1]))
    script.write_text(
        f"#!/bin/sh\ncd {root} && exec {shlex.quote(sys.executable)} "
        f'-m tests.fuzz.run --engine {name} "$0" "$@"\n'
    )
    script.chmod(0o755)
    return script


def _child(wrapper: Path, args: list[str], log: Path) -> int:
    with log.open("wb") as out:
        return subprocess.run(
            [str(wrapper), *args], stdout=out, stderr=subprocess.STDOUT, check=False
        ).returncode


def _store(files: list[Path], into: Path) -> int:
    """Replace ``into``'s files with ``files``, each named by the SHA-1 of its content."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    for f in files:
        data = f.read_bytes()
        (into / hashlib.sha1(data).hexdigest()).write_bytes(data)
    return len(list(into.iterdir()))


def seed(name: str) -> int:
    """Add the target's seed inputs to its corpus; return the corpus size."""
    from tests.fuzz.seeds import SEEDS

    into = CORPUS / name
    into.mkdir(parents=True, exist_ok=True)
    for data in SEEDS[name]():
        (into / hashlib.sha1(data).hexdigest()).write_bytes(data)
    return len(list(into.iterdir()))


def fuzz(name: str, seconds: int, input_timeout: int) -> int:
    """Fuzz ``name`` for ``seconds``, merge the corpus; print the figures; 1 on a crash."""
    corpus = CORPUS / name
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{name}-") as tmp:
        work, merged, crashes = Path(tmp, "work"), Path(tmp, "merged"), Path(tmp, "crashes")
        for d in (work, merged, crashes):
            d.mkdir()
        before = _store(sorted(corpus.glob("*")), work)
        common = [f"-max_len={MAX_LEN[name]}", f"-timeout={input_timeout}", "-rss_limit_mb=1024"]
        log = Path(tmp, "fuzz.log")
        started = time.monotonic()
        wrapper = _wrapper(name, Path(tmp))
        code = _child(
            wrapper,
            [
                str(work),
                f"-max_total_time={seconds}",
                f"-artifact_prefix={crashes}/",
                "-print_final_stats=1",
                *common,
            ],
            log,
        )
        elapsed = time.monotonic() - started
        text = log.read_text(errors="replace")
        found = sorted(crashes.iterdir())
        if found:
            saved = CRASHES / name
            saved.mkdir(parents=True, exist_ok=True)
            for f in found:
                shutil.copy(f, saved / f.name)
            print(text[-4000:])
            print(f"{name}: {len(found)} crash(es) saved in {saved}")
        elif code != 0:
            print(text[-4000:])
            print(f"{name}: libFuzzer exited {code}")
            return 1
        merge_log = Path(tmp, "merge.log")
        if _child(wrapper, ["-merge=1", str(merged), str(work), *common], merge_log) != 0:
            print(merge_log.read_text(errors="replace")[-4000:])
            return 1
        after = _store(sorted(merged.iterdir()), corpus)
    stats = _STATS.findall(text)
    execs = re.search(r"stat::number_of_executed_units: (\d+)", text)
    last = stats[-1] if stats else ("?", "?", "?", "?")
    size = sum(f.stat().st_size for f in corpus.iterdir())
    print(
        f"{name}: {execs.group(1) if execs else last[0]} executions in {elapsed:.0f} s, "
        f"cov {last[1]} ft {last[2]}; corpus {before} -> {after} files ({size} bytes)"
    )
    return 1 if found else 0


def _parser() -> argparse.ArgumentParser:
    from tests.fuzz.targets import TARGETS

    parser = argparse.ArgumentParser(
        prog="python -m tests.fuzz.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--target",
        choices=sorted(TARGETS),
        action="append",
        help="a target (repeatable; default: every target, one after another)",
    )
    parser.add_argument("--seconds", type=int, default=60, help="time per target (60)")
    hang = "seconds one input may take before it counts as a hang (10)"
    parser.add_argument("--input-timeout", type=int, default=10, help=hang)
    parser.add_argument("--seed", action="store_true", help="add the seed inputs and stop")
    parser.add_argument("--list", action="store_true", help="name the targets and stop")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--engine"]:  # the child: --engine NAME WRAPPER LIBFUZZER-ARGS...
        _engine(argv[1], argv[2:])
        return 0
    args = _parser().parse_args(argv)
    from tests.fuzz.targets import TARGETS

    names = args.target or sorted(TARGETS)
    if args.list:
        print("\n".join(sorted(TARGETS)))
        return 0
    if args.seed:
        for name in names:
            print(f"{name}: {seed(name)} files")
        return 0
    return max(fuzz(name, args.seconds, args.input_timeout) for name in names)


if __name__ == "__main__":
    sys.exit(main())
