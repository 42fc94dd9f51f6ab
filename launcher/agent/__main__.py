"""``emuproxy --connect HOST:PORT --token-file PATH [--slots N] [--name NAME] [--bind-addr ADDR]``.

The token is read from the file (``-``: the first line of stdin, as emurun's ssh, exec and slurm
launchers pass it), never from the command line. ``--slurm``: this agent is a task of emurun's
srun step (`launcher.multihost.slurm`); its name is the node's Slurm name (``SLURMD_NODENAME``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

import trio

from launcher import cleanup
from launcher.agent.session import AgentOptions, run_agent
from launcher.errors import EXIT_INTERNAL, EXIT_USAGE, LaunchError, UsageError
from launcher.multihost.slurm import SLURM_NAME_ENV

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["main", "options_from_argv", "read_token"]

_TOKEN_MAX = 4096


def build_parser() -> argparse.ArgumentParser:
    """emuproxy's options."""
    p = argparse.ArgumentParser(
        prog="emuproxy",
        description="Per-host agent of a multi-host emurun job: dials emurun, runs this "
        "host's nicds and host processes, forwards their output, cleans up.",
        allow_abbrev=False,
    )
    p.add_argument("--connect", required=True, metavar="HOST:PORT", help="where emurun listens")
    p.add_argument("--token-file", required=True, metavar="PATH",
                   help="file holding the job's token ('-': first line of stdin)")  # fmt: skip
    p.add_argument(
        "--slots",
        type=int,
        default=1,
        metavar="N",
        help="nodes this host offers to emurun --launcher none (%(default)s)",
    )
    p.add_argument("--name", default="", metavar="NAME", help="how emurun names this host")
    p.add_argument("--bind-addr", metavar="ADDR",
                   help="IPv4 address the nicds bind and announce (default: the address of the "
                   "interface that reaches emurun)")  # fmt: skip
    p.add_argument("--agent-id", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--slurm", action="store_true",
                   help=f"started by emurun's srun step: named by ${SLURM_NAME_ENV}")  # fmt: skip
    p.add_argument("--connect-timeout", type=float, default=300.0, metavar="S",
                   help="keep retrying to reach emurun this long (%(default)s)")  # fmt: skip
    p.add_argument("-q", "--quiet", action="store_true", help="report nothing but failures")
    return p


def read_token(path: str) -> bytes:
    """The token in ``path`` (``-``: stdin's first line), stripped; UsageError if empty."""
    try:
        if path == "-":
            text = sys.stdin.buffer.readline(_TOKEN_MAX)
        else:
            with open(path, "rb") as f:
                text = f.read(_TOKEN_MAX)
    except OSError as exc:
        raise UsageError(f"--token-file {path}: {exc}") from None
    token = text.strip()
    if not token:
        raise UsageError(f"--token-file {path}: no token in it")
    return token


def options_from_argv(argv: Sequence[str], env: Mapping[str, str] | None = None) -> AgentOptions:
    """Parse the command line (reads the token); UsageError for bad values."""
    args = build_parser().parse_args(list(argv))
    name = args.name
    if args.slurm:
        name = (os.environ if env is None else env).get(SLURM_NAME_ENV, "")
        if not name:
            raise UsageError(f"--slurm: ${SLURM_NAME_ENV} is not set (not a task of srun?)")
    host, sep, port = args.connect.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 0xFFFF:
        raise UsageError(f"--connect {args.connect!r} is not HOST:PORT")
    if not 1 <= args.slots <= 0xFFFF:
        raise UsageError(f"--slots {args.slots} is not in 1..65535")
    return AgentOptions(
        host=host.strip("[]"),
        port=int(port),
        token=read_token(args.token_file),
        slots=args.slots,
        name=name,
        bind_addr=args.bind_addr,
        agent_id=args.agent_id,
        connect_timeout=args.connect_timeout,
        quiet=args.quiet,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``emuproxy`` console script."""
    try:
        opts = options_from_argv(sys.argv[1:] if argv is None else argv)
    except LaunchError as exc:
        print(f"emuproxy: {exc}", file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    cleanup.adopt_orphans()
    try:
        return trio.run(run_agent, opts)
    except LaunchError as exc:
        print(f"emuproxy: {exc}", file=sys.stderr)
        return exc.exit_code if exc.exit_code != EXIT_USAGE else EXIT_INTERNAL
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
