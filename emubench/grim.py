"""``emubench grim``: the GRIM figures of seed 002 on emucluster.

* Fig 4.6: average injection overhead of null active messages vs burst size, the sender
  limited to 4, 8, 16, 32 or an unbounded number of outstanding messages. As in GRIM's
  benchmark, the limit is an endpoint credit scheme simulated on top of the NI flow control:
  the receiver echoes every message and each echo returns one credit. "Unbounded" is limited
  only by the NIC's send tokens (``--send-tokens``, the NI's buffers).
* Fig 4.10: time to scan 1-32 logical channels for a new message. nicd does not scan: the
  kernel's readiness list (epoll, under uvloop) hands it the ready host connection. So three
  are timed on this machine: a firmware-style loop over N channel queues (GRIM's method), a
  ``poll(2)`` over N host sockets (the same scan done by the kernel), and ``epoll`` over N
  sockets (what nicd does).
* Active-message round trip (null and 1 KiB), remote-memory latency 8 B-64 KiB for RM-V with
  translation-cache hits and with misses (every access misses: more dynamic blocks than
  entries), RM-P and RM-RV (hits and misses), and RM bandwidth (pipelined 64 KiB writes and
  reads). Every RM operation completes when the executing NIC's status arrives, so each
  latency is a round trip.

Two nodes under emurun (``rank`` mode) plus the in-process scan; ``--json``/``--png`` write
the report and the figure. Compare ratios within one run; the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import sys
import time
from collections import deque
from typing import Any

from emubench.common import (
    command_line,
    environment,
    load_average,
    median,
    pyplot,
    read_json,
    run_emurun_json,
    save_figure,
    write_json,
)
from emucluster import am, rm

__all__ = ["main"]

LIMITS: list[int | None] = [4, 8, 16, 32, None]
BURSTS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]
RM_SIZES = [8, 64, 512, 4096, 16384, 65536]
CHANNELS = [1, 2, 4, 8, 16, 24, 32]
PAPER_SCAN_US = {  # seed 002 §4.3.4 (Fig 4.10): channels -> us
    "LANai 4": {1: 1.0, 8: 5.5, 16: 9.0, 32: 18.0},
    "LANai 9": {1: 0.5, 8: 1.5, 16: 3.0, 32: 6.0},
}
PAPER_UNBOUNDED_FLAT_UNTIL = 5000  # §4.2.4: unbounded injection stays flat to ~5,000 messages
DYNAMIC_BLOCKS = 24  # > the NIC's 16 dynamic entries: cycling them misses every time


# -- the two-node part (run under emurun) ----------------------------------------------------


def run_rank(args: argparse.Namespace) -> None:
    """Both ranks of the two-node measurements; rank 0 writes the JSON."""
    ep = am.endpoint()
    rank = ep.rank
    peer = 1 - rank
    state: dict[str, Any] = {"echoes": 0, "pongs": 0, "handles": []}

    def on_null(src: int, a: tuple[int, int, int, int], p: bytes) -> None:
        am.send(src, "echo")

    def on_echo(src: int, a: tuple[int, int, int, int], p: bytes) -> None:
        state["echoes"] += 1

    def on_ping(src: int, a: tuple[int, int, int, int], p: bytes) -> None:
        am.send(src, "pong", a, p)

    def on_pong(src: int, a: tuple[int, int, int, int], p: bytes) -> None:
        state["pongs"] += 1

    def on_handles(src: int, a: tuple[int, int, int, int], p: bytes) -> None:
        state["handles"] += [rm.Handle.unpack(p[i : i + 18]) for i in range(0, len(p), 18)]

    for name, fn in (("null", on_null), ("echo", on_echo), ("ping", on_ping),
                     ("pong", on_pong), ("handles", on_handles)):  # fmt: skip
        am.register(name, fn)
    am.barrier()
    big = max(RM_SIZES)
    static = rm.alloc(big)
    dynamic = [rm.alloc(big, static=False) for _ in range(DYNAMIC_BLOCKS)]
    local = rm.alloc(big)
    local_dyn = [rm.alloc(big, static=False) for _ in range(DYNAMIC_BLOCKS)]
    am.send(peer, "handles", payload=b"".join(b.handle.pack() for b in [static, *dynamic]))
    ep.wait_for(lambda: len(state["handles"]) == 1 + DYNAMIC_BLOCKS, 60, "handles", memory=False)
    if rank == 1:
        am.barrier()
        ep.barrier(timeout=None)  # rank 0 measures; meanwhile this side runs the handlers
        return
    remote_static, *remote_dynamic = state["handles"]
    report: dict[str, Any] = {"parameters": vars(args) | {"nodes": 2}}
    am.barrier()

    # Fig 4.6: injection overhead vs burst size under credit limits.
    policy = ep.port.wait_policy
    ep.port.wait_policy = "spin"  # waiting for NIC send tokens counts as injection overhead
    inject: dict[str, dict[str, list[float]]] = {}
    inject_cpu: dict[str, dict[str, list[float]]] = {}
    for limit in LIMITS:
        key = "unbounded" if limit is None else str(limit)
        inject[key] = {}
        inject_cpu[key] = {}
        for burst in BURSTS:
            samples = []
            cpu = []
            for _ in range(args.reps):
                base = state["echoes"]
                sent = 0
                c0 = time.process_time()
                t0 = time.perf_counter()
                while sent < burst:
                    if limit is not None and sent - (state["echoes"] - base) >= limit:
                        am.poll()
                        continue
                    am.send(1, "null")
                    sent += 1
                t1 = time.perf_counter()
                cpu.append((time.process_time() - c0) / burst * 1e6)
                samples.append((t1 - t0) / burst * 1e6)
                target = base + burst
                ep.wait_for(lambda: state["echoes"] >= target, 120, "echoes", memory=False)  # noqa: B023
            inject[key][str(burst)] = samples
            inject_cpu[key][str(burst)] = cpu
        row = ", ".join(f"{b}:{median(inject_cpu[key][str(b)]):.0f}" for b in BURSTS)
        print(f"fig 4.6 limit {key} (host CPU per message): {row} us", flush=True)
    report["injection_us"] = inject
    report["injection_cpu_us"] = inject_cpu
    ep.port.wait_policy = policy

    # Active-message round trip.
    am_rtt: dict[str, list[float]] = {}
    for size in (0, 1024):
        payload = b"p" * size
        samples = []
        for i in range(args.iters + 20):
            n = state["pongs"]
            t0 = time.perf_counter()
            am.send(1, "ping", (i, 0, 0, 0), payload)
            ep.wait_for(lambda: state["pongs"] > n, 30, "pong", memory=False)  # noqa: B023
            if i >= 20:
                samples.append((time.perf_counter() - t0) * 1e6)
        am_rtt[str(size)] = samples
    report["am_rtt_us"] = am_rtt
    print(f"AM round trip: { ({k: round(median(v)) for k, v in am_rtt.items()}) } us", flush=True)

    # Remote-memory latency.
    lat: dict[str, dict[str, list[float]]] = {}
    variants = ("rm-v hit", "rm-v miss", "rm-p", "rm-rv hit", "rm-rv miss")
    for variant in variants:
        lat[variant] = {}
        for size in RM_SIZES:
            data = os.urandom(size)
            samples = []
            for i in range(args.iters + 5):
                target = remote_dynamic[i % DYNAMIC_BLOCKS] if "miss" in variant else remote_static
                into = local_dyn[i % DYNAMIC_BLOCKS] if "miss" in variant else local
                t0 = time.perf_counter()
                if variant.startswith("rm-rv"):
                    rm.read(1, target, 0, size, into)
                else:
                    rm.write(1, target, 0, data, physical=variant == "rm-p")
                if i >= 5:
                    samples.append((time.perf_counter() - t0) * 1e6)
            lat[variant][str(size)] = samples
        print(f"{variant}: " + ", ".join(f"{s}:{median(lat[variant][str(s)]):.0f}"
                                         for s in RM_SIZES) + " us", flush=True)  # fmt: skip
    report["rm_latency_us"] = lat

    # Remote-memory bandwidth: pipelined operations, a window of outstanding requests.
    bw: dict[str, dict[str, float]] = {}
    for variant in ("rm-v", "rm-p", "rm-rv"):
        bw[variant] = {}
        for size in (4096, 16384, 65536):
            data = os.urandom(size)
            count = max(16, args.bw_bytes // size)
            window: deque[rm.RmRequest] = deque()
            t0 = time.perf_counter()
            for _ in range(count):
                if len(window) >= args.window:
                    window.popleft().wait()
                if variant == "rm-rv":
                    window.append(rm.iread(1, remote_static, 0, size, local))
                else:
                    window.append(rm.iwrite(1, remote_static, 0, data, physical=variant == "rm-p"))
            while window:
                window.popleft().wait()
            bw[variant][str(size)] = count * size / (time.perf_counter() - t0) / 1e6
        print(f"{variant} bandwidth: {({k: round(v, 1) for k, v in bw[variant].items()})} MB/s",
              flush=True)  # fmt: skip
    report["rm_bandwidth_mb_s"] = bw
    report["host_stats"] = ep.stats()
    report["nic_stats"] = ep.nic_stats()
    write_json(args.out, report)
    ep.barrier(timeout=None)


# -- Fig 4.10: scanning logical channels (in-process) ------------------------------------------


def scan_channels(reps: int) -> dict[str, dict[str, list[float]]]:
    """Microseconds to find the one new message among N channels, three ways."""
    out: dict[str, dict[str, list[float]]] = {"firmware loop": {}, "poll(2)": {}, "epoll": {}}
    for n in CHANNELS:
        queues: list[deque[int]] = [deque() for _ in range(n)]
        queues[-1].append(1)  # the message sits in the last channel (the worst case)
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(1000):
                for q in queues:
                    if q:
                        break
            samples.append((time.perf_counter() - t0) / 1000 * 1e6)
        out["firmware loop"][str(n)] = samples
        pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(n)]
        pairs[-1][1].send(b"x")  # one host has posted a message
        poller = select.poll()
        epoller = select.epoll()
        for a, _ in pairs:
            poller.register(a.fileno(), select.POLLIN)
            epoller.register(a.fileno(), select.EPOLLIN)
        for name, wait in (("poll(2)", poller.poll), ("epoll", epoller.poll)):
            samples = []
            for _ in range(reps):
                t0 = time.perf_counter()
                for _ in range(1000):
                    ready = wait(0)
                samples.append((time.perf_counter() - t0) / 1000 * 1e6)
                assert len(ready) == 1
            out[name][str(n)] = samples
        epoller.close()
        for a, b in pairs:
            a.close()
            b.close()
    return out


# -- driver -------------------------------------------------------------------------------------


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    """The emurun job, the scan, the summary."""
    load_before = load_average()
    rank_args = ["rank", "--iters", str(args.iters), "--reps", str(args.reps),
                 "--window", str(args.window), "--bw-bytes", str(args.bw_bytes)]  # fmt: skip
    report, _ = run_emurun_json(
        2,
        "emubench.grim",
        rank_args,
        {"EMU_WAIT": args.wait},
        emurun_args=["--nicd-args", f"--send-tokens {args.send_tokens}"],
    )
    report["scan_us"] = scan_channels(args.reps * 4)
    report["environment"] = environment(
        load_before, wait_policy=args.wait, wait_policy_fig_4_6_sender="spin", nodes=2,
        send_tokens=args.send_tokens,
    )  # fmt: skip
    report["command"] = command_line("grim", args.argv)
    report["paper"] = {"scan_us": PAPER_SCAN_US,
                       "unbounded_flat_until_messages": PAPER_UNBOUNDED_FLAT_UNTIL}  # fmt: skip
    report["summary"] = _summary(report)
    return report


def _summary(r: dict[str, Any]) -> dict[str, Any]:
    med = {k: {int(b): median(v) for b, v in d.items()} for k, d in r["injection_us"].items()}
    cpu = {k: {int(b): median(v) for b, v in d.items()} for k, d in r["injection_cpu_us"].items()}
    knees = {}
    for key, row in cpu.items():
        low = median([v for b, v in row.items() if b <= 2])
        knees[key] = next((b for b in sorted(row) if row[b] > 2 * low), None)
    scan = {k: {int(n): median(v) for n, v in d.items()} for k, d in r["scan_us"].items()}
    lat = {k: {int(s): median(v) for s, v in d.items()} for k, d in r["rm_latency_us"].items()}
    return {
        "injection_median_us": med,
        "injection_cpu_median_us": cpu,
        "injection_knee_burst": knees,
        "scan_median_us": scan,
        "scan_factor_32_vs_1": {k: v[32] / v[1] for k, v in scan.items()},
        "paper_scan_factor_32_vs_1": {k: v[32] / v[1] for k, v in PAPER_SCAN_US.items()},
        "am_rtt_median_us": {k: median(v) for k, v in r["am_rtt_us"].items()},
        "rm_latency_median_us": lat,
        "rm_v_miss_over_hit_8B": lat["rm-v miss"][8] / lat["rm-v hit"][8],
        "rm_v_hit_over_rm_p_8B": lat["rm-v hit"][8] / lat["rm-p"][8],
        "rm_bandwidth_mb_s": r["rm_bandwidth_mb_s"],
    }


def plot(r: dict[str, Any], path: str) -> None:
    """Five panels drawn like the paper's figures, with the paper's shape or numbers on them."""
    plt = pyplot()

    s = r["summary"]
    fig, ax = plt.subplots(2, 3, figsize=(16, 9))
    a = ax[0][0]
    for key, row in s["injection_cpu_median_us"].items():
        xs = sorted(int(b) for b in row)
        line = a.plot(xs, [row[b] if b in row else row[str(b)] for b in xs], "o-", ms=3,
                      label=f"{key} outstanding")  # fmt: skip
        if key != "unbounded":  # the paper's knee: overhead rises once the burst passes it
            a.axvline(int(key), color=line[0].get_color(), ls=":", lw=1)  # fmt: skip
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.set_xlabel("burst size (null messages)")
    a.set_ylabel("injection overhead: host CPU per message (us)")
    a.set_title("like Fig 4.6 (paper: rises past the credit limit;\n"
                f"unbounded flat to ~{PAPER_UNBOUNDED_FLAT_UNTIL})", fontsize=9)  # fmt: skip
    a.legend(fontsize=7)
    a = ax[0][1]
    for key, row in s["scan_median_us"].items():
        xs = sorted(int(n) for n in row)
        a.plot(xs, [row[n] if n in row else row[str(n)] for n in xs], "o-", label=f"ours: {key}")
    for key, row in PAPER_SCAN_US.items():
        a.plot(list(row), list(row.values()), "k--" if key == "LANai 4" else "k:",
               label=f"paper: {key}")  # fmt: skip
    a.set_xlabel("logical channels")
    a.set_ylabel("time to find a new message (us)")
    a.set_title("like Fig 4.10 (paper: linear in channels)", fontsize=9)
    a.legend(fontsize=7)
    a = ax[0][2]
    rtt = s["am_rtt_median_us"]
    a.bar([f"{k} B" for k in rtt], list(rtt.values()))
    a.set_ylabel("round trip (us)")
    a.set_title("active-message round trip (handler replies)", fontsize=9)
    a = ax[1][0]
    for key, row in s["rm_latency_median_us"].items():
        xs = sorted(int(n) for n in row)
        a.plot(xs, [row[n] if n in row else row[str(n)] for n in xs], "o-", label=key)
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.set_xlabel("bytes")
    a.set_ylabel("operation latency, round trip (us)")
    a.set_title("RM-V / RM-P / RM-RV (paper: RM-P faster than RM-V;\n"
                "misses cost a host upcall)", fontsize=9)  # fmt: skip
    a.legend(fontsize=7)
    a = ax[1][1]
    for key, row in s["rm_bandwidth_mb_s"].items():
        xs = sorted(int(n) for n in row)
        a.plot(xs, [row[str(n)] for n in xs], "o-", label=key)
    a.set_xscale("log", base=2)
    a.set_xlabel("bytes per operation")
    a.set_ylabel("MB/s")
    a.set_title("RM bandwidth (pipelined)", fontsize=9)
    a.legend(fontsize=7)
    ax[1][2].axis("off")
    f = s["scan_factor_32_vs_1"]
    text = ["32 vs 1 channel scan factor:"]
    text += [f"  ours {k}: {v:.1f}x" for k, v in f.items()]
    text += [f"  paper {k}: {v:.0f}x" for k, v in s["paper_scan_factor_32_vs_1"].items()]
    text += ["", "burst where overhead doubles:"]
    text += [f"  {k}: {v}" for k, v in s["injection_knee_burst"].items()]
    text += ["", f"RM-V miss / hit (8 B): {s['rm_v_miss_over_hit_8B']:.2f}x",
             f"RM-V hit / RM-P (8 B): {s['rm_v_hit_over_rm_p_8B']:.2f}x"]  # fmt: skip
    ax[1][2].text(0, 1, "\n".join(text), va="top", family="monospace", fontsize=9)
    save_figure(fig, path, dpi=90)


def main(argv: list[str] | None = None) -> None:
    """Entry point: the whole benchmark, or ``rank`` (one rank, under emurun)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="emubench grim")
    parser.add_argument("--iters", type=int, default=60, help="latency samples per point")
    parser.add_argument("--reps", type=int, default=7, help="bursts per Fig 4.6 point")
    parser.add_argument("--window", type=int, default=16, help="bandwidth: requests in flight")
    parser.add_argument("--bw-bytes", type=int, default=4_000_000, help="bandwidth: bytes moved")
    parser.add_argument("--send-tokens", type=int, default=1024, help="the NIC's send queue")
    parser.add_argument("--wait", default="hybrid", choices=("spin", "block", "hybrid"))
    parser.add_argument("--out", default="grim.json", help="rank mode: where rank 0 writes")
    parser.add_argument("--json", default=None)
    parser.add_argument("--png", default=None)
    if argv and argv[0] == "rank":
        run_rank(parser.parse_args(argv[1:]))
        return
    if argv and argv[0] == "replot":  # replot JSON PNG: redraw a saved report
        plot(read_json(argv[1]), argv[2])
        return
    args = parser.parse_args(argv)
    args.argv = argv
    report = run_all(args)
    if args.json:
        write_json(args.json, report, indent=1)
    if args.png:
        plot(report, args.png)
    print(json.dumps(report["summary"], indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
