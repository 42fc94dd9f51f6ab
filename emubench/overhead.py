"""``emubench overhead``: what one MPI message costs each process, beside the relay floor.

For each size (8 B, 4 KiB, 64 KiB) it runs `emubench.overhead_rank` under plain ``emurun -np 2
--stats DIR`` (the user's defaults: ``--profile faithful``, nicd at SCHED_FIFO, bind-to core;
``--bind-to role`` or ``none`` picks another placement):

* a one-way stream (windows of 64 ``Isend``/``Irecv``, as OSU's message rate) twice, with
  two message counts; the difference of each process's CPU seconds (emurun's ``job.json``)
  over the difference of the counts is the CPU per message of the sending host, the sending
  nicd, the receiving nicd and the receiving host (start-up and teardown cancel out), and the
  larger run gives the message rate;
* a ping-pong: one-way latency, the median round trip's half beside the relay's median (like
  with like: both drop the few round trips a 2-core machine's scheduler stretches), and the
  loop's mean (OSU's) beside the relay's mean;

and, in the same run, the floor: a plain-Python relay over the same three hops with blocking
sockets (Unix socket, UDP, Unix socket: `emubench.nicd_port`'s relay), its relays and hosts
placed where emurun puts the nicds and hosts under the same ``--bind-to`` (an unbound relay
reads twice the floor of a bound one: 92 vs 48 us here), and the physical floor: the same relay
compiled from C at benchmark time (`emubench.crelay`; skipped with the reason when there is no
C compiler), placed the same way. JSON with ``--json``, a figure with ``--png``. Targets
(issue 17): 8-byte one-way at most 2x the relay floor; 8-byte message rate at least 3x 19,000
msg/s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from emubench import crelay
from emubench.common import (
    command_line,
    environment,
    job_result,
    load_average,
    print_table,
    pyplot,
    read_json,
    run_emurun,
    save_figure,
    write_json,
)
from emubench.nicd_port import _bench_relay  # the relay of the nicd benchmark
from launcher.plan import Placement, place

__all__ = ["main"]

SIZES = (8, 4096, 65536)
RANK = "emubench.overhead_rank"
ROLES = (("host", 0, "host_send"), ("nicd", 0, "nicd_send"), ("nicd", 1, "nicd_recv"),
         ("host", 1, "host_recv"))  # fmt: skip
LATENCY_TARGET = 2.0
RATE_BEFORE = 19_000.0  # msg/s, 8 bytes between two nodes when issue 17 was filed
RATE_TARGET = 3.0


def _counts(size: int, scale: float) -> tuple[int, int, int]:
    """(small stream, large stream, ping-pong round trips) for ``size``."""
    base = 20_000 if size <= 4096 else 2_000
    small, large = int(base * scale / 5), int(base * scale)
    return max(10, small), max(20, large), max(20, int(base * scale / 10))


def _job(
    size: int, mode: str, count: int, stats: Path, timeout: float, bind_to: str
) -> dict[str, Any]:
    """One emurun job; its rank 0 result with every process's CPU seconds by (role, node)."""
    out = stats / "result.json"
    argv = [sys.executable, "-m", RANK, "--mode", mode, "--size", str(size),
            "--count", str(count), "--out", str(out)]  # fmt: skip
    started = time.monotonic()
    emurun_args = ["--stats", str(stats), "--bind-to", bind_to]
    proc = run_emurun(2, argv, capture=True, check=False, emurun_args=emurun_args,
                      timeout_s=None, wall_timeout=timeout)  # fmt: skip
    result = job_result(proc, out, started)
    usage = read_json(stats / "job.json")["usage"]["processes"]
    result["cpu_s"] = {f"{u['role']}{u['node']}": u["user_s"] + u["system_s"] for u in usage}
    return result


def _per_message(small: dict[str, Any], large: dict[str, Any]) -> dict[str, float]:
    """CPU microseconds per message of each role, from two streams of different lengths."""
    messages = large["count"] - small["count"]
    return {
        name: (large["cpu_s"][f"{role}{node}"] - small["cpu_s"][f"{role}{node}"]) / messages * 1e6
        for role, node, name in ROLES
    }


def _relay_floor(
    sizes: tuple[int, ...], iters: int, placement: list[Placement]
) -> dict[str, tuple[float, float]]:
    """Per size: the relay's one-way (median, mean) over its round trips, its processes
    placed as emurun places the nicds and hosts of the measured path (`place`)."""
    with tempfile.TemporaryDirectory(prefix="emubench-relay-", dir="/tmp") as run_dir:
        relay = _bench_relay(run_dir, "block", iters, {"nicd_priority": "rt"}, placement)
    samples = relay["samples_us"]
    return {str(s): (relay["latency_us"][str(s)], statistics.fmean(samples[str(s)])) for s in sizes}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    load_before = load_average()
    rows: dict[str, Any] = {}
    for size in args.sizes:
        small_n, large_n, rounds = _counts(size, args.scale)
        with tempfile.TemporaryDirectory(prefix="emubench-overhead-", dir="/tmp") as tmp:
            jobs = {}
            for name, mode, count in (("small", "stream", small_n), ("large", "stream", large_n),
                                      ("pingpong", "pingpong", rounds)):  # fmt: skip
                stats = Path(tmp) / name
                stats.mkdir()
                print(f"{size} B: {mode} x {count} ...", file=sys.stderr, flush=True)
                jobs[name] = _job(size, mode, count, stats, args.timeout, args.bind_to)
        rows[str(size)] = {
            "cpu_us_per_message": _per_message(jobs["small"], jobs["large"]),
            "messages_per_s": jobs["large"]["messages_per_s"],
            "one_way_us": jobs["pingpong"]["one_way_us"],
            "one_way_median_us": jobs["pingpong"]["one_way_median_us"],
            "jobs": jobs,
        }
    placement = place(args.bind_to, 2, sorted(os.sched_getaffinity(0)))
    floor = _relay_floor(tuple(args.sizes), args.relay_iters, placement)
    with tempfile.TemporaryDirectory(prefix="emubench-crelay-", dir="/tmp") as run_dir:
        c_floor = crelay.measure(args.sizes, args.relay_iters, placement, run_dir)
    for size, row in rows.items():
        median, mean = floor[size]
        row["relay_one_way_us"] = median
        row["relay_one_way_mean_us"] = mean
        row["one_way_over_relay"] = row["one_way_median_us"] / median  # like with like
        row["one_way_mean_over_relay_mean"] = row["one_way_us"] / mean
        if "skipped" not in c_floor:
            row["c_relay_one_way_us"] = c_median = c_floor["latency_us"][size]
            row["c_relay_one_way_mean_us"] = c_floor["mean_us"][size]
            row["one_way_over_c_relay"] = row["one_way_median_us"] / c_median
    return {
        "benchmark": "emubench.overhead",
        "parameters": {k: v for k, v in vars(args).items() if k != "argv"},
        "command": command_line("overhead", args.argv),
        "environment": environment(load_before, wait_policy=os.environ.get("EMU_WAIT", "block")),
        "sizes": rows,
        "c_relay": {k: v for k, v in c_floor.items() if k in ("compiler", "skipped")},
        "relay_placement": [
            {
                "node": p.node,
                "relay_cpus": None if p.nicd_cpus is None else sorted(p.nicd_cpus),
                "host_cpus": None if p.host_cpus is None else sorted(p.host_cpus),
            }
            for p in placement
        ],
        "summary": summarise(rows),
    }


def summarise(rows: dict[str, Any]) -> dict[str, Any]:
    eight = rows.get("8")
    if eight is None:
        return {}
    rate_factor = eight["messages_per_s"] / RATE_BEFORE
    return {
        "one_way_8B_over_relay": {"ratio": eight["one_way_over_relay"],
                                  "mean_ratio": eight["one_way_mean_over_relay_mean"],
                                  "target": LATENCY_TARGET,
                                  "reached": eight["one_way_over_relay"] <= LATENCY_TARGET},
        "rate_8B_over_issue": {"ratio": rate_factor, "target": RATE_TARGET,
                               "reached": rate_factor >= RATE_TARGET},
    }  # fmt: skip


def print_tables(record: dict[str, Any]) -> None:
    rows = []
    for size, row in record["sizes"].items():
        cpu = row["cpu_us_per_message"]
        c_floor = row.get("c_relay_one_way_us")
        latency = (
            f"{row['one_way_median_us']:.1f} / {row['one_way_us']:.1f}",
            f"{row['relay_one_way_us']:.1f} / {row['relay_one_way_mean_us']:.1f}",
            f"{row['one_way_over_relay']:.2f} / {row['one_way_mean_over_relay_mean']:.2f}",
            "-" if c_floor is None else f"{c_floor:.1f}",
            "-" if c_floor is None else f"{row['one_way_over_c_relay']:.1f}",
        )
        rows.append((size, *(f"{cpu[name]:.1f}" for _, _, name in ROLES),
                     f"{row['messages_per_s']:,.0f}", *latency))  # fmt: skip
    print_table("CPU us per MPI message, 2 nodes, and latency beside the relay floor",
                ("bytes", "host send", "nicd send", "nicd recv", "host recv", "msg/s",
                 "one-way us (median / mean)", "relay us", "ratio", "C relay us", "C ratio"),
                rows)  # fmt: skip
    if "skipped" in record.get("c_relay", {}):
        print(f"C relay floor skipped: {record['c_relay']['skipped']}")
    for name, s in record["summary"].items():
        verdict = "reached" if s["reached"] else "NOT reached"
        print(f"{name}: {s['ratio']:.2f} (target {s['target']}) {verdict}")


def plot(record: dict[str, Any], path: str) -> None:
    """Stacked CPU per message by process, per size; one-way latency and floor on the side."""
    plt = pyplot()
    sizes = list(record["sizes"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4))
    bottom = [0.0] * len(sizes)
    for i, (_, _, name) in enumerate(ROLES):
        values = [record["sizes"][s]["cpu_us_per_message"][name] for s in sizes]
        left.bar(range(len(sizes)), values, bottom=bottom, color=f"C{i}",
                 label=name.replace("_", " "))  # fmt: skip
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    left.set_xticks(range(len(sizes)), [f"{s} B" for s in sizes])
    left.set_ylabel("CPU us per message")
    left.set_title("where a message's CPU goes (one-way stream)")
    left.legend(fontsize=8)
    xs = range(len(sizes))
    right.plot(xs, [record["sizes"][s]["one_way_median_us"] for s in sizes], "o-",
               label="MPI one-way (median round trip)")  # fmt: skip
    right.plot(xs, [record["sizes"][s]["one_way_us"] for s in sizes], "o:", color="C0",
               alpha=0.5, label="MPI one-way (mean, OSU loop)")  # fmt: skip
    right.plot(xs, [record["sizes"][s]["relay_one_way_us"] for s in sizes], "s--",
               label="relay floor (3 hops, blocking; median)")  # fmt: skip
    if all("c_relay_one_way_us" in record["sizes"][s] for s in sizes):
        right.plot(xs, [record["sizes"][s]["c_relay_one_way_us"] for s in sizes], "^--",
                   label="C relay floor (same hops, compiled; median)")  # fmt: skip
    right.plot(xs, [LATENCY_TARGET * record["sizes"][s]["relay_one_way_us"] for s in sizes], ":",
               color="grey", label=f"target: {LATENCY_TARGET:g}x the floor")  # fmt: skip
    right.set_xticks(list(xs), [f"{s} B" for s in sizes])
    right.set_yscale("log")
    right.set_ylabel("one-way latency (us)")
    right.set_title("ping-pong, 2 nodes")
    right.legend(fontsize=8)
    env = record["environment"]
    bind_to = record["parameters"].get("bind_to", "core")
    placement = "emurun defaults" if bind_to == "core" else f"emurun --bind-to {bind_to}"
    fig.suptitle(f"{placement} on {env['cpus']} CPUs, commit {env['git_commit']}")
    save_figure(fig, path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="emubench overhead", description=__doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    p.add_argument("--scale", type=float, default=1.0, help="multiply every message count")
    p.add_argument("--relay-iters", type=int, default=2000, help="relay round trips per size")
    p.add_argument("--quick", action="store_true", help="few messages: a smoke run")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per job")
    p.add_argument("--bind-to", choices=("core", "role", "none"), default="core",
                   help="emurun's placement of the jobs (%(default)s: emurun's own)")  # fmt: skip
    p.add_argument("--json", metavar="FILE", help="write the whole record here")
    p.add_argument("--png", metavar="FILE", help="draw the figure here (needs matplotlib)")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.quick:
        args.scale, args.relay_iters = 0.05, 100
    record = measure(args)
    print_tables(record)
    if args.json:
        write_json(args.json, record, indent=1)
    if args.png:
        plot(record, args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
