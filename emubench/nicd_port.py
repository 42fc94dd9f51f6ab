"""``emubench nicd``: port-to-port latency, message rate and bandwidth between two
nicds, beside the floor: a plain-Python relay over the same three hops (Unix socket, UDP, Unix
socket) with the same wait policy on the hosts.

Then the loss sweep (issue 14): the 64 KiB stream at 0, 1, 5 and 10 % injected loss with each
loss recovery (``nicd --recovery gbn`` and ``selective``). ``--quick`` is a smoke run with few
iterations; ``--sweep-only`` measures only the sweep.

Every figure comes from one run on this machine; compare the ratios, not the absolutes.
``--json FILE`` writes the environment, parameters, raw samples and summary.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import select
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emubench.common import (
    command_line,
    environment,
    load_average,
    print_table,
    pyplot,
    save_figure,
    write_json,
)
from emubench.localcluster import NicCluster
from emucluster.port.client import Port, WaitPolicy
from nicd.config import RECOVERY_MODES, FaultConfig

if TYPE_CHECKING:
    from collections.abc import Sequence

    from launcher.plan import Placement

__all__ = ["main"]

SIZES = (8, 4096, 65536)
SWEEP_LOSSES = (0.0, 0.01, 0.05, 0.10)
SWEEP_MODES = RECOVERY_MODES
QUICK = {"iters": 200, "stream": 2000, "sweep_messages": 200}
RELAY_MTU = 4096
NICD_RT_PRIORITY = 10  # SCHED_FIFO priority, as emurun gives nicd
_FRAG = struct.Struct(">II")  # relay fragment header: message length, offset


# -- nicd side ----------------------------------------------------------------------------------


def _port_peer(sock_path: str, wait: WaitPolicy, mode: str, count: int, ready: Any) -> None:
    with Port.open(sock_path, 0, receive_buffers=128, wait=wait) as port:
        ready.set()
        if mode == "echo":
            for _ in range(count):
                event = port.recv(timeout=120)
                port.send(event.src_node, event.src_port, event.payload)
        else:  # sink: count messages, then say so
            for _ in range(count):
                port.recv(timeout=120)
            port.send(0, 0, b"done")
        port.flush(timeout=120)


def _bench_ports(
    sockets: dict[int, str], wait: WaitPolicy, iters: int, stream: int
) -> dict[str, Any]:
    ctx = mp.get_context("fork")
    out: dict[str, Any] = {"latency_us": {}, "samples_us": {}}
    peer = sockets[1]
    with Port.open(sockets[0], 0, receive_buffers=128, wait=wait) as port:
        for size in SIZES:
            n = iters if size <= 4096 else max(50, iters // 10)
            body = functools.partial(_pingpong, port, size, n)
            samples = _run_peer(ctx, peer, wait, "echo", n + 20, body)
            out["samples_us"][str(size)] = samples
            out["latency_us"][str(size)] = statistics.median(samples)
        for size, key in ((8, "rate_msgs_per_s"), (65536, "bandwidth_MB_per_s")):
            count = stream if size == 8 else max(200, stream // 20)
            streamer = functools.partial(_stream, port, size, count)
            elapsed = _run_peer(ctx, peer, wait, "sink", count, streamer)
            out[key] = count / elapsed if size == 8 else count * size / elapsed / 1e6
    return out


def _bench_stream(sockets: dict[int, str], wait: WaitPolicy, count: int) -> float:
    """MB/s of ``count`` 64 KiB messages from node 0 to node 1, sent back to back."""
    ctx = mp.get_context("fork")
    with Port.open(sockets[0], 0, receive_buffers=128, wait=wait) as port:
        streamer = functools.partial(_stream, port, 65536, count)
        elapsed = _run_peer(ctx, sockets[1], wait, "sink", count, streamer)
    return float(count * 65536 / elapsed / 1e6)


def _loss_sweep(run_dir: Path, args: argparse.Namespace, env: dict[str, Any]) -> dict[str, Any]:
    """The 64 KiB stream for every recovery mode and loss rate: MB/s and the counters."""
    out: dict[str, Any] = {"MB_per_s": {}, "stats": {}}
    for mode in SWEEP_MODES:
        out["MB_per_s"][mode] = {}
        out["stats"][mode] = {}
        for loss in SWEEP_LOSSES:
            key = f"{loss * 100:g}"
            sub = run_dir / f"sweep-{mode}-{key}"
            sub.mkdir()
            faults = FaultConfig(loss=loss, seed=1)
            with NicCluster(2, sub, ["--recovery", mode], faults=faults) as cluster:
                if args.nic_priority == "rt":
                    _realtime([proc.pid for proc in cluster.procs], env)
                out["MB_per_s"][mode][key] = _bench_stream(
                    cluster.sockets, args.wait, args.sweep_messages
                )
                out["stats"][mode][key] = [cluster.stats(n)["transport"] for n in range(2)]
    return out


def _run_peer(ctx: Any, sock: str, wait: WaitPolicy, mode: str, count: int, body: Any) -> Any:
    ready = ctx.Event()
    peer = ctx.Process(target=_port_peer, args=(sock, wait, mode, count, ready))
    peer.start()
    try:
        if not ready.wait(30):
            raise RuntimeError("benchmark peer did not start")
        return body()
    finally:
        peer.join(120)
        if peer.is_alive():
            peer.kill()


def _pingpong(port: Port, size: int, n: int) -> list[float]:
    msg = b"x" * size
    for _ in range(20):
        port.send(1, 0, msg)
        port.recv(timeout=60)
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        port.send(1, 0, msg)
        port.recv(timeout=60)
        samples.append((time.perf_counter() - t0) / 2 * 1e6)
    return samples


def _stream(port: Port, size: int, count: int) -> float:
    msg = b"x" * size
    t0 = time.perf_counter()
    for _ in range(count):
        port.send(1, 0, msg, timeout=120)
    port.recv(timeout=120)
    return time.perf_counter() - t0


# -- raw relay floor ------------------------------------------------------------------------------


def _relay(unix_path: str, udp: socket.socket, peer: tuple[str, int], ready: Any) -> None:
    """A NIC stand-in: Unix SEQPACKET <-> UDP, fragments of RELAY_MTU, no reliability."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(unix_path)
    listener.listen(1)
    ready.set()
    conn, _ = listener.accept()
    parts: list[bytes] = []
    while True:
        readable, _, _ = select.select([conn, udp], [], [])
        if conn in readable:
            msg = conn.recv(1 << 20)
            if not msg:
                return
            for off in range(0, max(1, len(msg)), RELAY_MTU):
                udp.sendto(_FRAG.pack(len(msg), off) + msg[off : off + RELAY_MTU], peer)
        if udp in readable:
            datagram = udp.recv(65536)
            total, off = _FRAG.unpack_from(datagram)
            parts.append(datagram[_FRAG.size :])
            if off + len(datagram) - _FRAG.size >= total:
                conn.send(b"".join(parts))
                parts = []


def _relay_host(path: str, wait: WaitPolicy, n: int, size: int, echo: bool) -> list[float]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(path)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    sock.setblocking(wait == "block")

    def recv() -> bytes:
        while True:
            try:
                return sock.recv(1 << 20)
            except BlockingIOError:
                if wait == "hybrid":
                    select.select([sock], [], [])

    samples = []
    msg = b"x" * size
    for i in range(n + 20):
        if echo:
            sock.send(recv())
            continue
        t0 = time.perf_counter()
        sock.send(msg)
        recv()
        if i >= 20:
            samples.append((time.perf_counter() - t0) / 2 * 1e6)
    sock.close()
    return samples


def _pinger(path: str, wait: WaitPolicy, n: int, size: int, cpus: frozenset[int] | None,
            out: Any) -> None:  # fmt: skip
    """The pinging relay host in its own process (on ``cpus`` if given, so the benchmark's
    own process keeps its affinity); its samples go to ``out``."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    out.send(_relay_host(path, wait, n, size, False))


def _bench_relay(
    run_dir: str, wait: WaitPolicy, iters: int, env: dict[str, Any],
    placement: Sequence[Placement] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The relay floor per size. With ``placement`` (`launcher.plan.place`), node i's relay
    runs where emurun puts nicd i and its host where emurun puts host i, so the floor shares
    the placement of the path it is the floor of; without it the kernel places them."""
    ctx = mp.get_context("fork")
    out: dict[str, Any] = {"latency_us": {}, "samples_us": {}}
    nics = [None if placement is None else placement[i].nicd_cpus for i in range(2)]
    hosts = [None if placement is None else placement[i].host_cpus for i in range(2)]
    for size in SIZES:
        n = iters if size <= 4096 else max(50, iters // 10)
        udps = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
        for u in udps:
            u.bind(("127.0.0.1", 0))
        paths = [os.path.join(run_dir, f"relay{i}-{size}.sock") for i in range(2)]
        procs = []
        for i in range(2):
            ready = ctx.Event()
            peer = udps[1 - i].getsockname()
            procs.append(ctx.Process(target=_relay, args=(paths[i], udps[i], peer, ready)))
            procs[-1].start()
            ready.wait(30)
            cpus = nics[i]
            if cpus is not None and procs[-1].pid is not None:
                os.sched_setaffinity(procs[-1].pid, cpus)
        if env["nicd_priority"] == "rt":  # the relays stand for the NICs: same priority
            _realtime([p.pid for p in procs if p.pid is not None], env)
        echo = ctx.Process(target=_relay_host, args=(paths[1], wait, n, size, True))
        echo.start()
        if hosts[1] is not None and echo.pid is not None:
            os.sched_setaffinity(echo.pid, hosts[1])
        receive, send = ctx.Pipe(duplex=False)
        pinger = ctx.Process(target=_pinger, args=(paths[0], wait, n, size, hosts[0], send))
        pinger.start()
        samples = receive.recv()
        pinger.join(60)
        echo.join(60)
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
        for u in udps:
            u.close()
        out["samples_us"][str(size)] = samples
        out["latency_us"][str(size)] = statistics.median(samples)
    return out


# -- driver ---------------------------------------------------------------------------------------


def _realtime(pids: list[int], env: dict[str, Any]) -> None:
    """nicd at SCHED_FIFO, as a NIC with its own processor (DESIGN §10); note a refusal."""
    for pid in pids:
        try:
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(NICD_RT_PRIORITY))
        except OSError as exc:
            env["nicd_priority"] = f"none (SCHED_FIFO refused: {exc})"
            return


def _run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {
        "command": command_line("nicd", args.argv),
        "environment": environment(
            load_average(), wait_policy=args.wait, nicd_priority=args.nic_priority, nodes=2
        ),
        "parameters": {
            "iters": args.iters,
            "stream": args.stream,
            "mtu": 4096,
            "sweep_messages": args.sweep_messages,
            "sweep_losses": list(SWEEP_LOSSES),
        },
    }
    with tempfile.TemporaryDirectory(prefix="nicd-bench-") as run_dir:
        results["loss_sweep"] = _loss_sweep(Path(run_dir), args, results["environment"])
        if args.sweep_only:
            results["environment"]["load_average"]["after"] = load_average()
            results["summary"] = _sweep_summary(results)
            return results
        results["relay"] = _bench_relay(run_dir, args.wait, args.iters, results["environment"])
        for label, faults in (("nicd", None), ("nicd_loss5", FaultConfig(loss=0.05, seed=1))):
            sub = Path(run_dir) / label
            sub.mkdir()
            with NicCluster(2, sub, faults=faults) as cluster:
                if args.nic_priority == "rt":
                    _realtime([proc.pid for proc in cluster.procs], results["environment"])
                results[label] = _bench_ports(cluster.sockets, args.wait, args.iters, args.stream)
                results[label]["stats"] = [cluster.stats(n) for n in range(2)]
    results["environment"]["load_average"]["after"] = load_average()
    lat, floor = results["nicd"]["latency_us"], results["relay"]["latency_us"]
    results["summary"] = {
        "latency_8B_us": lat["8"],
        "relay_8B_us": floor["8"],
        "latency_ratio_8B": lat["8"] / floor["8"],
        "rate_msgs_per_s": results["nicd"]["rate_msgs_per_s"],
        "bandwidth_MB_per_s": results["nicd"]["bandwidth_MB_per_s"],
        "bandwidth_MB_per_s_loss5": results["nicd_loss5"]["bandwidth_MB_per_s"],
        **_sweep_summary(results),
    }
    return results


def _sweep_summary(results: dict[str, Any]) -> dict[str, Any]:
    sweep = results["loss_sweep"]["MB_per_s"]
    return {f"bandwidth_MB_per_s_loss5_{mode}": sweep[mode]["5"] for mode in SWEEP_MODES}


def _print_sweep(results: dict[str, Any]) -> None:
    sweep = results["loss_sweep"]["MB_per_s"]
    keys = [f"{loss * 100:g}" for loss in SWEEP_LOSSES]
    print_table(
        "64 KiB stream (MB/s) by injected loss and recovery",
        ("recovery", *(f"{k} % loss" for k in keys)),
        [(mode, *(f"{sweep[mode][k]:.1f}" for k in keys)) for mode in SWEEP_MODES],
    )
    print(f"selective at 5 % loss: {sweep['selective']['5']:.0f} MB/s (target > 100)")


def _print(results: dict[str, Any]) -> None:
    _print_sweep(results)
    if "relay" not in results:
        return
    env = results["environment"]
    rows: list[tuple[object, ...]] = []
    for size in SIZES:
        row = [results[k]["latency_us"][str(size)] for k in ("relay", "nicd", "nicd_loss5")]
        rows.append((f"one-way latency {size} B (us)", *(f"{v:.1f}" for v in row)))
    for key, label in (("rate_msgs_per_s", "8 B message rate (/s)"),
                       ("bandwidth_MB_per_s", "64 KiB MB/s")):  # fmt: skip
        row = [results[k][key] for k in ("nicd", "nicd_loss5")]
        rows.append((label, "-", *(f"{v:.1f}" for v in row)))
    print_table(
        f"nicd bench: 2 nodes on loopback, wait={env['wait_policy']}, {env['nicd_priority']}",
        ("", "relay floor", "nicd", "nicd 5% loss"),
        rows,
    )
    s = results["summary"]
    print(f"8 B latency / relay floor: {s['latency_ratio_8B']:.2f}x (target <= 2x)")
    print(
        f"64 KiB bandwidth: {s['bandwidth_MB_per_s']:.0f} MB/s (target >= 250), "
        f"with 5% loss {s['bandwidth_MB_per_s_loss5']:.0f} MB/s (target > 100)"
    )


def _plot(results: dict[str, Any], path: str) -> None:
    plt = pyplot()  # the bench extra; only for --png

    if "relay" not in results:  # --sweep-only
        fig, sweep_ax = plt.subplots(1, 1, figsize=(5.5, 4.2))
        _plot_sweep(sweep_ax, results)
        save_figure(fig, path, dpi=110)
        return
    fig, (lat, thr, sweep_ax) = plt.subplots(1, 3, figsize=(16, 4.2))
    _plot_sweep(sweep_ax, results)
    width = 0.27
    series = (("relay", "raw relay floor"), ("nicd", "nicd"), ("nicd_loss5", "nicd, 5 % loss"))
    for i, (key, label) in enumerate(series):
        values = [results[key]["latency_us"][str(s)] for s in SIZES]
        xs = [x + (i - 1) * width for x in range(len(SIZES))]
        bars = lat.bar(xs, values, width, label=label)
        lat.bar_label(bars, fmt="%.0f", fontsize=7)
    lat.set_xticks(range(len(SIZES)), [f"{s} B" for s in SIZES])
    lat.set_ylabel("one-way latency, median (us)")
    ratio = results["summary"]["latency_ratio_8B"]
    lat.set_title(f"port-to-port latency (8 B: {ratio:.1f}x the floor; target <= 2x)")
    lat.legend(fontsize=8)
    bw = [results[k]["bandwidth_MB_per_s"] for k in ("nicd", "nicd_loss5")]
    bars = thr.bar(["no loss", "5 % loss"], bw, color=["tab:orange", "tab:green"])
    thr.bar_label(bars, fmt="%.0f MB/s")
    thr.axhline(250, ls="--", c="k", lw=1)
    thr.text(1.45, 252, "250 MB/s target\n(Myrinet-2000)", fontsize=7, va="bottom", ha="right")
    thr.axhline(100, ls=":", c="k", lw=1)
    thr.text(1.45, 102, "100 MB/s target, 5 % loss", fontsize=7, va="bottom", ha="right")
    thr.set_ylabel("64 KiB stream (MB/s)")
    thr.set_title("bandwidth, 2 nodes, default MTU 4096")
    env = results["environment"]
    fig.suptitle(
        f"nicd on loopback, {env['cpus']} CPUs, wait={env['wait_policy']}, "
        f"nicd priority: {env['nicd_priority']}",
        fontsize=9,
    )
    save_figure(fig, path, dpi=110)


def _plot_sweep(ax: Any, results: dict[str, Any]) -> None:
    sweep = results["loss_sweep"]["MB_per_s"]
    xs = [loss * 100 for loss in SWEEP_LOSSES]
    for mode, label in (("gbn", "go-back-N"), ("selective", "selective (SACK, RACK-TLP)")):
        ys = [sweep[mode][f"{x:g}"] for x in xs]
        ax.plot(xs, ys, marker="o", label=label)
    ax.axhline(100, ls=":", c="k", lw=1)
    ax.text(xs[-1], 102, "100 MB/s target, 5 % loss", fontsize=7, va="bottom", ha="right")
    ax.set_xticks(xs, [f"{x:g} %" for x in xs])
    ax.set_xlabel("injected loss (each direction)")
    ax.set_ylabel("64 KiB stream (MB/s)")
    ax.set_title("loss recovery: bandwidth vs loss")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table."""
    p = argparse.ArgumentParser(prog="emubench nicd", description=__doc__)
    p.add_argument("--iters", type=int, default=2000, help="ping-pongs per size (64 KiB: /10)")
    p.add_argument("--stream", type=int, default=20000, help="8 B messages streamed (64 KiB: /20)")
    p.add_argument("--wait", choices=["block", "spin", "hybrid"], default="block")
    p.add_argument(
        "--nic-priority",
        choices=["rt", "none"],
        default="rt",
        help="run the nicds at SCHED_FIFO (default, where permitted) or normal priority",
    )
    p.add_argument(
        "--sweep-messages",
        type=int,
        default=1000,
        help="64 KiB messages per point of the loss sweep (%(default)s)",
    )
    p.add_argument("--sweep-only", action="store_true", help="measure only the loss sweep")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items()),
    )
    p.add_argument("--json", metavar="FILE", help="write all results here")
    p.add_argument("--png", metavar="FILE", help="draw the figure here (needs matplotlib)")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    results = _run(args)
    _print(results)
    if args.json:
        write_json(args.json, results, indent=1)
    if args.png:
        _plot(results, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
