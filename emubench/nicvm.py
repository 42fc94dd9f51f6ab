"""NICVM benchmarks of thesis §4.4 (Figs 4.9-4.18), one emurun job per configuration.

``emurun -np N python -m emubench.nicvm MODE --out F`` runs one job (its rank side is
`emubench.nicvm_rank`), MODE being:

* ``pingpong`` (Fig 4.9): MPI ping-pong one-way latency over sizes; the sweep runs it on a
  nicd with NICVM enabled and one started ``--no-nicvm``, alternating, and compares.
* ``echo`` (Figs 4.10-4.12): GM-port round trips node 0 -> node 1 -> node 0, interleaved per
  size: ``host`` (node 1's host echoes), ``noop`` (a no-op module at node 1 lets the packet
  through, the host echoes) and ``nic`` (node 1's module echoes it, its host never sees it).
* ``bcast`` (Figs 4.13-4.15): broadcast latency, binomial vs nicvm interleaved per iteration:
  root starts the clock, every other rank notifies the root after its bcast, the root stops at
  the last notification and subtracts a measured one-way notification latency.
* ``skew`` (Figs 4.16-4.18): CPU under process skew, thesis §4.4.4's method measured with
  the public `emucluster.hosttime` (see `emubench.nicvm_rank`), both algorithms interleaved
  per iteration.

``emubench nicvm sweep --out docs/figures/nicvm.json`` runs them all (and the
VM micro-benchmark, ``emubench.nicvm_vm``, and `core_overhead`: Fig 4.9's question asked of two
``NicCore`` s in one process, where other jobs' load cannot blur a 1 % difference) and draws one
PNG per figure group with the paper's numbers on it; ``... core --out F`` redoes only that part,
``... pipelined --out F`` only the comparison of Fig 4.8's sends one at a time vs pipelined.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import asdict, replace
from typing import Any

from emubench import skew_dilated
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
from emubench.nicvm_rank import MODES, run_rank
from emubench.nicvm_vm import measure
from nicd import hostlink as hl
from nicd.config import NicConfig, NicvmConfig
from nicd.core.actions import ToHost, Transmit
from nicd.core.nic import NicCore

__all__ = ["PAPER", "core_overhead", "main"]

PAPER = {
    "fig4.9_overhead_us": 0.8,
    "fig4.10_noop_module_overhead_us": 7.6,
    "fig4.12_nic_echo_factor_max": 1.5,
    "fig4.11_nic_echo_wins_above_bytes": 128,
    "fig4.13_14_bcast_factor_16_nodes_4096B": 1.3,
    "fig4.15_bcast_factor_max": 1.4,
    "fig4.16_17_cpu_factor_16_nodes_1000us": 2.2,
}
SIZES_ECHO = (8, 64, 128, 256, 1024, 4096, 16384, 60000)


def core_overhead(sizes: tuple[int, ...] = (8, 256, 4096, 16384), rounds: int = 1000,
                  repeats: int = 15) -> dict[str, Any]:  # fmt: skip
    """Fig 4.9 without the noise of processes: two ``NicCore`` s in one process exchange a
        ping-pong of ordinary messages (datagrams, deliveries, ACKs, SENT events), NICVM enabled vs
        disabled, in alternating blocks; CPU ns per round trip, minimum (the least disturbed block,
    as ``timeit`` advises) and median over ``repeats``."""

    def pair(enabled: bool) -> tuple[NicCore, NicCore]:
        base = NicConfig(0, "/tmp", nicvm=NicvmConfig(enabled=enabled))
        cores = (NicCore(base), NicCore(replace(base, node_id=1)))
        for core in cores:
            core.set_routes({0: ("127.0.0.1", 1), 1: ("127.0.0.1", 2)})
            core.on_host(1, hl.OpenReq(2), now=0.0)
            core.on_host(1, hl.ProvideReq(1 << 30), now=0.0)
        return cores

    def hop(src: NicCore, dst: NicCore, out: list[Any], now: float) -> list[Any]:
        got: list[Any] = []
        for action in out:
            if isinstance(action, Transmit):
                got += dst.on_datagram(action.datagram, ("127.0.0.1", src.node_id + 1), now=now)
        return got

    def block(enabled: bool, size: int) -> float:
        a, b = pair(enabled)
        payload = bytes(size)
        now = 0.0
        t0 = time.process_time()  # CPU time: preemption by other processes does not count
        for i in range(rounds):
            now += 1e-4
            at_b = hop(a, b, a.on_host(1, hl.SendReq(i + 1, 1, 2, payload), now=now), now)
            assert any(isinstance(x, ToHost) for x in at_b)
            at_a = hop(b, a, b.on_host(1, hl.SendReq(i + 1, 0, 2, payload), now=now), now)
            assert any(isinstance(x, ToHost) for x in at_a)
            hop(a, b, a.flush(now=now) + a.on_timer(now=now + 0.01), now)
            hop(b, a, b.flush(now=now) + b.on_timer(now=now + 0.01), now)
        return (time.process_time() - t0) / rounds * 1e9

    out: dict[str, Any] = {}
    for size in sizes:
        runs: dict[str, list[float]] = {"nicvm": [], "disabled": []}
        for _ in range(repeats):
            for name, enabled in (("nicvm", True), ("disabled", False)):
                runs[name].append(block(enabled, size))
        out[str(size)] = {name: {"min_ns": min(v), "median_ns": statistics.median(v),
                                 "repeats_ns": v} for name, v in runs.items()}  # fmt: skip
    return out


def _job(nodes: int, mode: str, extra: list[str], wait: str, nicd_args: str = "") -> dict[str, Any]:
    emurun_args = [f"--nicd-args={nicd_args}"] if nicd_args else []
    result, _ = run_emurun_json(nodes, "emubench.nicvm", [mode, *extra], {"EMU_WAIT": wait},
                                emurun_args=emurun_args)  # fmt: skip
    return result


def pipelined(args: argparse.Namespace) -> dict[str, Any]:
    """Fig 4.8's one send at a time vs ``--nicvm-pipelined``: bcast jobs on the largest node
    count, alternating; each job's binomial broadcast is the yardstick the NICVM one is divided
    into, so load that differs between jobs cancels."""
    nodes = args.nodes[-1]
    runs: dict[str, list[dict[str, Any]]] = {"one_at_a_time": [], "pipelined": []}
    for _ in range(args.reps):
        for name, flags in (("one_at_a_time", ""), ("pipelined", "--nicvm-pipelined")):
            extra = ["--iters", str(args.iters), "--sizes", "32", "4096"]
            res = _job(nodes, "bcast", extra, args.latency_wait, flags)["ranks"][0]
            runs[name].append({a: {s: median(x) for s, x in res[a].items()}
                               for a in ("binomial", "nicvm")})  # fmt: skip
    factor = {
        name: {s: median([r["binomial"][s] / r["nicvm"][s] for r in rows]) for s in ("32", "4096")}
        for name, rows in runs.items()
    }
    return {"nodes": nodes, "runs": runs, "binomial_over_nicvm": factor}


def sweep(args: argparse.Namespace) -> None:
    """Run every figure's jobs; write the JSON and the PNGs."""
    load_before = load_average()
    report: dict[str, Any] = {
        "paper": PAPER,
        "command": command_line("nicvm", args.argv),
        "wait_policy": {"latency": args.latency_wait, "skew": args.wait},
        "nic_priority": "rt (emurun default: SCHED_FIFO where permitted, else hosts at nice 19)",
        "bind": "core (emurun default)",
    }
    it = ["--iters", str(args.iters)]
    raw: dict[str, Any] = {"pingpong": [], "bcast": {}, "skew": []}
    report["raw_samples_us"] = raw
    pp: dict[str, dict[str, list[float]]] = {"nicvm": {}, "disabled": {}}
    for rep in range(args.reps):
        for variant, flags in (("nicvm", ""), ("disabled", "--no-nicvm")):
            res = _job(2, "pingpong", it, args.latency_wait, flags)["ranks"][0]
            raw["pingpong"].append({"variant": variant, "rep": rep, "one_way_us": _round(res)})
            for size, samples in res.items():
                pp[variant].setdefault(size, []).append(median(samples))
        print(f"pingpong rep {rep} done", flush=True)
    report["fig4.9"] = {v: {s: median(m) for s, m in d.items()} for v, d in pp.items()}
    report["fig4.9_core"] = core_overhead()
    report["fig4.9_raw_medians"] = pp
    echo = _job(2, "echo", [*it, "--sizes", *map(str, SIZES_ECHO)], args.latency_wait)["ranks"][0]
    report["fig4.10_12"] = {v: {s: median(x) for s, x in d.items()} for v, d in echo.items()}
    raw["echo_round_trip"] = _round(echo)
    print("echo done", flush=True)
    bc: dict[str, Any] = {}
    for nodes in args.nodes:
        sizes = (
            ["32", "1024", "4096"]
            if nodes != args.nodes[-1]
            else ["8", "32", "256", "1024", "4096", "16384"]
        )
        res = _job(nodes, "bcast", [*it, "--sizes", *sizes], args.latency_wait)["ranks"][0]
        raw["bcast"][str(nodes)] = _round(res)
        bc[str(nodes)] = {"one_way_us": res["one_way_us"],
                          **{a: {s: median(x) for s, x in res[a].items()}
                             for a in ("binomial", "nicvm")}}  # fmt: skip
        print(f"bcast {nodes} done: {bc[str(nodes)]}", flush=True)
    report["fig4.13_15"] = bc
    skew_runs = []
    configs = [(n, 1000.0) for n in args.nodes] + [(args.nodes[-1], s) for s in (0.0, 250.0)]
    configs += [(n, 0.0) for n in args.nodes[:-1]]
    for nodes, skew in configs:
        extra = ["--iters", str(args.skew_iters), "--skew-us", str(skew), "--sizes", "32", "4096"]
        res = _job(nodes, "skew", extra, args.wait)["ranks"]
        raw["skew"].append({"nodes": nodes, "skew_us": skew, "per_rank": _round(res)})
        summary: dict[str, Any] = {}
        for size in ("32", "4096"):
            for a in ("binomial", "nicvm"):
                summary[f"{a}_{size}"] = {
                    k: float(statistics.mean(statistics.mean(r[size][a][k]) for r in res))
                    for k in ("wall_us", "cpu_us")
                }
        skew_runs.append({"nodes": nodes, "skew_us": skew, "summary": summary})
        print(f"skew nodes={nodes} skew={skew}: {summary}", flush=True)
    report["fig4.16_18"] = skew_runs
    report["fig4.8_pipelined"] = pipelined(args)
    report["vm"] = [asdict(sample) for sample in measure()]
    report["environment"] = environment(
        load_before, wait_policy=f"latency {args.latency_wait}, skew {args.wait}"
    )
    write_json(args.out, report)
    _plot(report, args.out.removesuffix(".json"))


def _round(obj: Any) -> Any:
    """Samples to 0.1 us (the JSON stays small; the clocks are not better than that here)."""
    if isinstance(obj, float):
        return round(obj, 1)
    if isinstance(obj, list):
        return [_round(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _round(v) for k, v in obj.items()}
    return obj


def _plot(report: dict[str, Any], stem: str) -> None:
    plt = pyplot()

    def series(d: dict[str, float]) -> tuple[list[int], list[float]]:
        xs = sorted(d, key=int)
        return [int(x) for x in xs], [d[x] for x in xs]

    fig, axes = plt.subplots(1, 4, figsize=(21, 4.5))
    for name, style in (("disabled", "o-"), ("nicvm", "s--")):
        axes[0].plot(*series(report["fig4.9"][name]), style, label=name)
        core = {k: v[name]["min_ns"] / 1000 for k, v in report["fig4.9_core"].items()}
        axes[1].plot(*series(core), style, label=name)
    axes[0].set_title(
        "Fig 4.9 MPI ping-pong, separate jobs\n(paper: NICVM adds 0.8 us; here load noise)"
    )
    axes[1].set_title(
        "Fig 4.9 in one process: NicCore CPU per round trip, min of 15\n(the NICVM hooks' cost)"
    )
    for name, style in (("host", "o-"), ("noop", "s--"), ("nic", "^-")):
        axes[2].plot(*series(report["fig4.10_12"][name]), style, label=name)
    axes[2].set_title(
        "Figs 4.10-4.12 echo round trip (paper: no-op +7.6 us,\nNIC echo wins > 128 B, up to 1.5x)"
    )
    host, nic = report["fig4.10_12"]["host"], report["fig4.10_12"]["nic"]
    xs = sorted(host, key=int)
    axes[3].plot([int(x) for x in xs], [host[x] / nic[x] for x in xs], "^-", label="host / NIC")
    axes[3].axhline(1.5, color="gray", ls=":", label="paper max 1.5")
    axes[3].axhline(1.0, color="black", lw=0.5)
    axes[3].set_title("Fig 4.12(b) factor of improvement")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message bytes")
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("one-way us")
    axes[1].set_ylabel("CPU us per round trip")
    axes[2].set_ylabel("round trip us")
    save_figure(fig, stem + "_echo.png")

    bc = report["fig4.13_15"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    last = max(bc, key=int)
    for name, style in (("binomial", "o-"), ("nicvm", "s--")):
        axes[0].plot(*series(bc[last][name]), style, label=name)
    axes[0].set_xscale("log", base=2)
    axes[0].set_xlabel("message bytes")
    axes[0].set_ylabel("broadcast latency us")
    axes[0].set_title(f"Figs 4.13-4.14, {last} nodes (paper: nicvm up to 1.3x at 4096 B)")
    for size, style in (("32", "o-"), ("1024", "s-"), ("4096", "^-")):
        nodes = sorted(bc, key=int)
        axes[1].plot([int(n) for n in nodes],
                     [bc[n]["binomial"][size] / bc[n]["nicvm"][size] for n in nodes],
                     style, label=f"{size} B")  # fmt: skip
    axes[1].axhline(1.4, color="gray", ls=":", label="paper max 1.4")
    axes[1].axhline(1.0, color="black", lw=0.5)
    axes[1].set_xlabel("nodes")
    axes[1].set_ylabel("binomial / nicvm latency")
    axes[1].set_title("Fig 4.15 factor of improvement")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    save_figure(fig, stem + "_bcast.png")

    runs = report["fig4.16_18"]
    top = max(r["nodes"] for r in runs)
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.5))
    panels = (
        (axes[0], [r for r in runs if r["nodes"] == top], "skew_us",
         f"Fig 4.16: {top} nodes vs max skew (paper: up to 2.2x at 1000 us)"),
        (axes[1], [r for r in runs if r["skew_us"] == 1000.0], "nodes",
         "Fig 4.17: 1000 us skew vs nodes"),
        (axes[2], [r for r in runs if r["skew_us"] == 0.0], "nodes", "Fig 4.18: no skew vs nodes"),
    )  # fmt: skip
    for ax, rows, key, title in panels:
        rows = sorted(rows, key=lambda r: r[key])
        for a, size, style in (("binomial", "4096", "o-"), ("nicvm", "4096", "s--"),
                               ("binomial", "32", "o:"), ("nicvm", "32", "s:")):  # fmt: skip
            ax.plot([r[key] for r in rows], [r["summary"][f"{a}_{size}"]["cpu_us"] for r in rows],
                    style, label=f"{a} {size} B")  # fmt: skip
        ax.set_xlabel("max skew (us)" if key == "skew_us" else "nodes")
        ax.set_ylabel("CPU outside busy loops per bcast (us)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    save_figure(fig, stem + "_skew.png")


def main(argv: list[str] | None = None) -> None:
    """Entry point: one job under emurun (MODE), or ``sweep``."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="emubench nicvm")
    parser.add_argument("mode", choices=(*MODES, "sweep", "core", "pipelined"))
    parser.add_argument("--out", default="nicvm.json")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 256, 4096, 16384])
    parser.add_argument("--skew-us", type=float, default=1000.0)
    parser.add_argument("--bound-us", type=float, default=2000.0, help="latency bound")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--reps", type=int, default=3, help="ping-pong job pairs")
    parser.add_argument("--skew-iters", type=int, default=60)
    parser.add_argument(
        "--wait",
        default="spin",
        choices=("spin", "block", "hybrid"),
        help="wait policy of the skew (CPU) jobs",
    )
    parser.add_argument(
        "--latency-wait",
        default="hybrid",
        choices=("spin", "block", "hybrid"),
        help="wait policy of the latency jobs (spinning hosts outnumber cores)",
    )
    skew_dilated.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.mode == "sweep" and skew_dilated.wanted(args):  # Figs 4.16-4.18 only, dilated
        args.argv = argv
        nodes, sizes = args.nodes[-1], args.dilate_sizes or [32, 4096]
        jobs = skew_dilated.nicvm_jobs(args, nodes, sizes)
        skew_dilated.run("nicvm", args, nodes=nodes, wait=args.wait, calib_size=32, series=sizes,
                         jobs=jobs, out=args.out)  # fmt: skip
    elif args.mode == "sweep":
        args.argv = argv
        sweep(args)
    elif args.mode in ("core", "pipelined"):  # redo one part of an existing sweep, redraw
        report = read_json(args.out)
        if args.mode == "core":
            report["fig4.9_core"] = core_overhead()
        else:
            report["fig4.8_pipelined"] = pipelined(args)
        write_json(args.out, report)
        _plot(report, args.out.removesuffix(".json"))
    else:
        run_rank(args)


if __name__ == "__main__":
    main()
