"""``emurun --trace DIR``: arm every process's recorder through the environment, merge at exit."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from emutrace.recorder import ENV_TRACE_DIR

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["traced_job"]


def traced_job(words: Sequence[str], run: Callable[[], int]) -> int:
    """Run the job; with ``--trace DIR``, children inherit ``EMU_TRACE_DIR`` and the
    recordings are merged into DIR/trace.json and DIR/timeline.png when it ends."""
    from launcher.cli import build_parser, split_argv

    parser = build_parser()
    ours, _ = split_argv(words, parser.valued)
    args = parser.parse_args(ours)
    if not args.trace_dir:
        return run()
    from emutrace.merge import merge_dir, parse_window

    try:
        window = parse_window(args.trace_window)
    except ValueError as exc:
        print(f"emurun: --trace-window: {exc}", file=sys.stderr)
        return 2
    directory = os.path.abspath(args.trace_dir)
    os.makedirs(directory, exist_ok=True)
    os.environ[ENV_TRACE_DIR] = directory  # nicd_env and host_env copy emurun's environment
    status = run()
    trace = merge_dir(directory, window)
    dropped = sum(trace["otherData"]["dropped"].values())
    note = f", {dropped} dropped (ring full)" if dropped else ""
    print(f"emurun: trace in {directory}/trace.json{note}", file=sys.stderr)
    return status
