"""``nicd``: command line -> NicConfig -> :func:`nicd.shell.daemon.run`.

A shell (it reads argv and the environment), at the top of the package rather than in
``nicd/shell/`` because ``python -m nicd`` runs ``nicd/__main__.py``; the console script
``nicd`` calls :func:`main` here too.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys

from nicd.config import (
    FAULT_ENV,
    RECOVERY_MODES,
    CoalesceConfig,
    FaultConfig,
    NicConfig,
    NicvmConfig,
    TransportConfig,
)
from nicd.core.ready import READY_PREFIX, log_tag
from nicd.errors import UsageError
from nicd.shell import lifeline

__all__ = ["build_parser", "config_from_args", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The nicd command line."""
    p = argparse.ArgumentParser(
        prog="nicd",
        description=(
            "NIC firmware daemon of one emulated Myrinet node: GRIM/GM reliable transport over "
            "UDP, GM ports for host processes over a Unix SOCK_SEQPACKET socket. Prints one "
            f"line '{READY_PREFIX}{{json}}' on stdout when it listens; SIGTERM/SIGINT stop it."
        ),
    )
    p.add_argument("--node-id", type=int, required=True, help="this node's id (its host's rank)")
    p.add_argument("--run-dir", required=True, help="directory for the PCI socket nic<ID>.sock")
    p.add_argument(
        "--listen",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="UDP address of the link (port 0: any free port; default %(default)s)",
    )
    p.add_argument("--advertise", metavar="HOST", help="address peers reach this NIC at")
    p.add_argument(
        "--routes",
        metavar="FILE",
        help="JSON routing table {node: [host, port]}; without it the launcher sends one",
    )
    p.add_argument("--stats", metavar="FILE", help="write the counters as JSON here on exit")
    t = p.add_argument_group("transport")
    t.add_argument("--mtu", type=int, default=4096, help="payload bytes per packet (%(default)s)")
    t.add_argument("--window", type=int, default=64, help="go-back-N window W (%(default)s)")
    t.add_argument("--ack-every", type=int, default=16, help="ACK after this many packets")
    t.add_argument(
        "--ack-delay-ms",
        type=float,
        default=TransportConfig().ack_delay_s * 1000,
        help="how long an ACK may wait for more packets to cover (0: the end of the burst; "
        "%(default)s)",
    )
    t.add_argument("--rto-min-ms", type=float, default=4.0, help="RTO lower bound")
    t.add_argument("--rto-max-ms", type=float, default=1000.0, help="RTO upper bound")
    defaults = TransportConfig()
    t.add_argument(
        "--dead-peer-s",
        type=float,
        default=defaults.dead_peer_timeout_s,
        help="seconds a peer with data outstanding may be silent to our probes (%(default)s)",
    )
    t.add_argument(
        "--recovery",
        choices=RECOVERY_MODES,
        default=defaults.recovery,
        help="loss recovery: go-back-N or selective (SACK + tail-loss probe) (%(default)s)",
    )
    t.add_argument(
        "--no-buffer-timeout-s",
        type=float,
        default=defaults.no_buffer_timeout_s,
        help="seconds a NO_BUFFER refusal may last before its sends fail no_buffer (%(default)s)",
    )
    g = p.add_argument_group("GM ports")
    g.add_argument("--max-ports", type=int, default=16, help="ports per NIC (%(default)s)")
    g.add_argument("--send-tokens", type=int, default=64, help="send tokens per port")
    g.add_argument(
        "--max-message", type=int, default=1 << 24, help="largest message in bytes (%(default)s)"
    )
    g.add_argument(
        "--reassembly-timeout-s",
        type=float,
        default=30.0,
        help="seconds a partial message may hear nothing before it is aborted (its sender "
        "told, its receive token returned) (%(default)s)",
    )
    g.add_argument(
        "--host-out-bytes",
        type=int,
        default=64 << 20,
        help="bytes queued for a host that does not read before its connection is closed "
        "(%(default)s)",
    )
    g.add_argument(
        "--host-coalesce-us",
        type=float,
        default=CoalesceConfig().hold_s * 1e6,
        help="microseconds nicd holds off before reading a streaming host's records again, "
        "so it reads them in batches (0: never hold off; %(default)s)",
    )
    f = p.add_argument_group(
        f"fault injection (seeded; each also read from {', '.join(FAULT_ENV.values())})"
    )
    f.add_argument("--loss", type=float, help="probability an outgoing datagram is lost")
    f.add_argument("--dup", type=float, help="probability it is duplicated")
    f.add_argument("--reorder", type=float, help="probability it is held back and overtaken")
    f.add_argument("--corrupt", type=float, help="probability one bit of it is flipped")
    f.add_argument("--delay-ms", type=float, help="extra one-way delay in milliseconds")
    f.add_argument("--fault-seed", type=int, help="seed of the fault plan")
    p.add_argument(
        "--mcast-forward-first",
        action="store_true",
        help="multicast: forward each packet before delivering to the host (default: after)",
    )
    v = p.add_argument_group("NICVM (thesis ch. 4)")
    v.add_argument("--no-nicvm", action="store_true", help="disable the NICVM framework")
    v.add_argument("--nicvm-fuel", type=int, default=10_000, help="instructions per invocation")
    v.add_argument(
        "--nicvm-pipelined",
        action="store_true",
        help="start a module's sends at once (default: one at a time, Fig 4.8)",
    )
    v.add_argument(
        "--nicvm-remote-upload",
        action="store_true",
        help="accept module uploads from other nodes (refused by default)",
    )
    p.add_argument("--log-level", default="WARNING", help="logging level on stderr")
    return p


def config_from_args(args: argparse.Namespace) -> NicConfig:
    """Check the flags and build the config; raise UsageError with a readable message."""
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"--listen {args.listen!r} is not HOST:PORT")
    if not 0 <= args.node_id <= 0xFFFF:
        raise UsageError("--node-id must be in 0..65535")
    if args.mtu < 1 or args.mtu > 60000:
        raise UsageError("--mtu must be in 1..60000 (one UDP datagram per packet)")
    if args.window < 1:
        raise UsageError("--window must be at least 1")
    if not args.reassembly_timeout_s > 0 or not args.host_out_bytes > 0:
        raise UsageError("--reassembly-timeout-s and --host-out-bytes must be positive")
    transport = TransportConfig(
        mtu=args.mtu,
        window=args.window,
        ack_every=max(1, args.ack_every),
        ack_delay_s=max(0.0, args.ack_delay_ms) / 1000,
        rto_min_s=args.rto_min_ms / 1000,
        rto_max_s=args.rto_max_ms / 1000,
        dead_peer_timeout_s=args.dead_peer_s,
        no_buffer_timeout_s=args.no_buffer_timeout_s,
        max_message=args.max_message,
        recovery=args.recovery,
        epoch_seed=secrets.randbelow(0x10000),  # a restarted nicd starts other epochs
    )
    faults = FaultConfig.from_values({name: getattr(args, name) for name in FAULT_ENV}, os.environ)
    return NicConfig(
        node_id=args.node_id,
        run_dir=args.run_dir,
        listen_host=host or "127.0.0.1",
        listen_port=int(port),
        advertise_host=args.advertise,
        routes_file=args.routes,
        max_ports=args.max_ports,
        send_tokens=args.send_tokens,
        max_message=args.max_message,
        host_out_bytes=args.host_out_bytes,
        host_coalesce=CoalesceConfig(hold_s=max(0.0, args.host_coalesce_us) / 1e6),
        reassembly_timeout_s=args.reassembly_timeout_s,
        stats_file=args.stats,
        mcast_forward_first=args.mcast_forward_first,
        transport=transport,
        faults=faults,
        nicvm=NicvmConfig(
            enabled=not args.no_nicvm,
            fuel=max(0, args.nicvm_fuel),
            pipelined=args.nicvm_pipelined,
            allow_remote_upload=args.nicvm_remote_upload,
        ),
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nicd`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    lifeline.watch()  # a launcher that dies (even by SIGKILL) takes this nicd with it
    logging.basicConfig(
        level=args.log_level.upper(), format=f"{log_tag(args.node_id)} %(levelname)s %(message)s"
    )
    try:
        config = config_from_args(args)
        # Start-up cost: the daemon brings uvloop and every core; --help and the tests that
        # only build the parser do without (the fork server's preload still imports it).
        from nicd.shell.daemon import run

        return run(config)
    except UsageError as exc:
        parser.error(str(exc))
    except OSError as exc:
        print(f"{log_tag(args.node_id)}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
