"""NIC multicast microbenchmarks of seed 001 (Figs 4-8), each rank's side and the sweep.

Every figure is one or more emurun jobs running ``python -m emubench.mcast <fig>``;
rank 0 writes the job's JSON. ``emubench mcast sweep --out-dir
docs/figures`` runs them all, writes ``mcast_fig<N>.json`` (parameters, environment incl.
wait policy, nicd priority and node count, raw samples, summary, the paper's numbers) and
draws ``mcast_fig<N>.png`` with the paper's factor on each plot.

* ``fig4`` (GM level): the root sends one message to k destinations and waits for a reply
  from the last one: NIC multisend (a flat group: one host request, header rewrites in the
  NIC) against k host-posted unicasts. The paper's method (§7.1), fewer iterations.
* ``fig5`` (GM level): multicast latency, NIC forwarding over the postal-optimal tree (L and
  g measured by this job at start-up: one-way time and the per-extra-destination slope of
  the multisend) against host forwarding over the binomial tree; the root waits for a reply
  from one leaf; repeated for the leaves predicted last and the maximum taken (§7.1).
* ``fig6`` (MPI level): the same with ``comm.Bcast`` ``nic-mcast`` against ``binomial``.
* ``skew`` (Figs 7-8, §7.3): per iteration a barrier, then every non-root rank draws a skew
  in [-max/2, max/2] and, if positive, computes that long (CPU time) before ``Bcast``; the
  process CPU time inside ``Bcast`` is averaged over non-root ranks; average skew = max/3.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np

import emucluster.mpi
from emubench import mcast_plot, skew_dilated
from emubench.common import (
    busy_cpu,
    command_line,
    environment,
    host_cpu,
    load_average,
    median,
    run_emurun_json,
    write_json,
)
from emucluster.offload.nic_mcast.trees import (
    PostalCosts,
    binomial_tree,
    flat_tree,
    receive_times,
)
from emucluster.port.client import Port

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]

PAPER = {
    "fig4_multisend_vs_unicasts_4_dest_le_128B": 2.05,
    "fig5_gm_16_nodes_le_512B": 1.48,
    "fig5_gm_16_nodes_16KiB": 1.86,
    "fig6_mpi_16_nodes_le_512B": 1.78,
    "fig6_mpi_16_nodes_8KiB": 2.02,
    "fig7_cpu_16_nodes_small_400us": 5.82,
    "fig7_cpu_16_nodes_2KiB_400us": 2.9,
    "fig7_cpu_16_nodes_4KiB_400us": 2.22,
    "fig7_cpu_16_nodes_8KiB_400us": 2.01,
}
TARGETS = {"fig4": 1.0, "fig6_8KiB_16": 1.5, "fig7_small_400us": 2.9}
DATA, ACK = 1, 2  # args[0] of the GM-level benchmark messages
PORT = 1


# -- GM level (figs 4, 5) -----------------------------------------------------------------------


def _port() -> Any:
    return Port.open(port=PORT, receive_buffers=512)  # EMU_WAIT: the job's wait policy


def _barrier(port: Any, rank: int, n: int) -> None:
    if rank == 0:
        for _ in range(n - 1):
            port.recv(timeout=120)
        for node in range(1, n):
            port.send(node, PORT, b"", args=(ACK, 0, 0, 0))
    else:
        port.send(0, PORT, b"", args=(ACK, 0, 0, 0))
        port.recv(timeout=120)


def _root_round(port: Any, nic: bool, group: int, dests: Sequence[int], payload: bytes) -> float:
    """At the root: one message out (one multicast, or one host send per destination), then
    wait for the designated receiver's reply; the time it took in microseconds."""
    t0 = time.perf_counter()
    if nic:
        port.multicast(group, payload)
    else:
        for d in dests:
            port.send(d, PORT, payload, args=(DATA, 0, 0, 0))
    port.recv(timeout=120)
    return (time.perf_counter() - t0) * 1e6


def fig4(args: argparse.Namespace) -> None:
    """NIC multisend vs host-based multiple unicasts (seed 001 Fig 4)."""
    port = _port()
    rank, n = port.node_id, port.num_nodes
    ks = [k for k in args.dests if k < n]
    for k in ks:
        if rank <= k:
            port.create_group(k, 0, None if rank == 0 else 0, tuple(range(1, k + 1)) if rank == 0
                              else ())  # fmt: skip
    _barrier(port, rank, n)
    samples: dict[str, list[float]] = {}
    policy = port.wait_policy
    for k in ks:
        for size in args.sizes:
            payload = bytes(size)
            for variant in ("host", "nic"):
                times = []
                port.wait_policy = policy if rank <= k else "block"
                for i in range(args.warmup + args.iters):
                    if rank == 0:
                        dt = _root_round(port, variant == "nic", k, range(1, k + 1), payload)
                        if i >= args.warmup:
                            times.append(dt)
                    elif rank <= k:
                        port.recv(timeout=120)
                        if rank == k:
                            port.send(0, PORT, b"", args=(ACK, 0, 0, 0))
                samples[f"{k} {size} {variant}"] = times
    port.flush(timeout=60)
    _barrier(port, rank, n)
    if rank == 0:
        _write(args.out, args, n, {"samples_us": samples})
    port.close()


def fig5(args: argparse.Namespace) -> None:
    """GM-level multicast latency: NIC forwarding on the postal tree vs host binomial."""
    port = _port()
    rank, n = port.node_id, port.num_nodes
    nodes = range(n)
    flat = flat_tree(0, nodes)
    port.create_group(1, 0, flat.parent(rank), flat.children(rank))
    _barrier(port, rank, n)
    # start-up measurement of L and g (one-way time; per-extra-destination multisend slope)
    costs_raw: dict[int, list[float]] = {}
    for size in (0, 8192):
        for mode in ("unicast", "flat"):
            times = []
            for i in range(args.warmup + args.iters):
                if rank == 0:
                    t0 = time.perf_counter()
                    if mode == "unicast":
                        port.send(1, PORT, bytes(size), args=(DATA, 0, 0, 0))
                    else:
                        port.multicast(1, bytes(size))
                    port.recv(timeout=120)
                    if i >= args.warmup:
                        times.append(time.perf_counter() - t0)
                elif mode == "flat" or rank == 1:
                    port.recv(timeout=120)
                    if rank == (1 if mode == "unicast" else n - 1):
                        port.send(0, PORT, b"", args=(ACK, 0, 0, 0))
            costs_raw.setdefault(size, []).append(median(times) if times else 0.0)
    _barrier(port, rank, n)
    if rank == 0:
        (t1_0, tk_0), (t1_8, tk_8) = costs_raw[0], costs_raw[8192]
        span = max(1, n - 2)  # the flat multicast above went to every other node
        l0, l8 = t1_0 / 2, t1_8 / 2
        g0, g8 = max(1e-6, (tk_0 - t1_0) / span), max(1e-6, (tk_8 - t1_8) / span)
        packed = np.array([l0, (l8 - l0) / 8192, g0, max(0.0, (g8 - g0) / 8192)])
        for node in range(1, n):
            port.send(node, PORT, packed.tobytes(), args=(ACK, 0, 0, 0))
    else:
        packed = np.frombuffer(port.recv(timeout=120).payload, dtype=np.float64)
    costs = PostalCosts(latency_s=float(packed[0]), latency_per_byte_s=max(0.0, float(packed[1])),
                        gap_s=float(packed[2]), gap_per_byte_s=float(packed[3]))  # fmt: skip
    binomial = binomial_tree(0, nodes)
    samples: dict[str, list[float]] = {}
    trees: dict[str, Any] = {}
    for gi, size in enumerate(args.sizes):
        tree = costs.tree(0, nodes, size)
        group = 10 + gi
        port.create_group(group, 0, tree.parent(rank), tree.children(rank))
        trees[str(size)] = {"kids": [list(k) for k in tree.kids], "order": list(tree.order)}
        latency, gap = costs.at(size)
        candidates = set()
        for t in (tree, binomial):
            times_pred = receive_times(t, latency, gap)
            candidates.update(sorted(times_pred, key=lambda x: -times_pred[x])[:2])
        candidates.discard(0)
        _barrier(port, rank, n)
        payload = bytes(size)
        for variant in ("host", "nic"):
            for leaf in sorted(candidates):
                times = []
                for i in range(args.warmup + args.iters):
                    if rank == 0:
                        kids = binomial.children(0)
                        dt = _root_round(port, variant == "nic", group, kids, payload)
                        if i >= args.warmup:
                            times.append(dt)
                        continue
                    event = port.recv(timeout=120)
                    if variant == "host":
                        for child in binomial.children(rank):
                            port.send(child, PORT, event.payload, args=(DATA, 0, 0, 0))
                    if rank == leaf:
                        port.send(0, PORT, b"", args=(ACK, 0, 0, 0))
                samples[f"{size} {variant} {leaf}"] = times
    port.flush(timeout=60)
    _barrier(port, rank, n)
    if rank == 0:
        extra = {"samples_us": samples, "trees": trees,
                 "costs_us": [float(x) * 1e6 for x in packed]}  # fmt: skip
        _write(args.out, args, n, extra)
    port.close()


# -- MPI level (figs 6, 7, 8) -------------------------------------------------------------------


def fig6(args: argparse.Namespace) -> None:
    """MPI-level Bcast latency: nic-mcast vs binomial; root waits for one leaf's reply."""
    from emucluster import MPI  # late: importing MPI initialises it (a rank's job only)

    comm = MPI.COMM_WORLD
    rank, n = comm.rank, comm.size
    samples: dict[str, list[float]] = {}
    leaves = sorted({n - 1, n // 2, max(1, n // 2 - 1)} - {0})
    reply = np.zeros(1, dtype=np.uint8)
    for size in args.sizes:
        buf = np.zeros(size, dtype=np.uint8)
        for variant in ("binomial", "nic-mcast"):
            for leaf in leaves:
                comm.Barrier()
                times = []
                for i in range(args.warmup + args.iters):
                    t0 = time.perf_counter()
                    comm.Bcast(buf, root=0, algorithm=variant)
                    if rank == 0:
                        comm.Recv(reply, source=leaf, tag=9)
                        if i >= args.warmup:
                            times.append((time.perf_counter() - t0) * 1e6)
                    elif rank == leaf:
                        comm.Send(reply, dest=0, tag=9)
                samples[f"{size} {variant} {leaf}"] = times
    comm.Barrier()
    if rank == 0:
        _write(args.out, args, n, {"samples_us": samples, "mcast": _mpi_mcast_stats()})


def skew(args: argparse.Namespace) -> None:
    """Average host CPU time in Bcast under process skew (seed 001 §7.3, Figs 7-8)."""
    from emucluster import MPI  # late: importing MPI initialises it (a rank's job only)

    comm = MPI.COMM_WORLD
    rank, n = comm.rank, comm.size
    rng = np.random.default_rng(args.seed * 1000 + rank)
    cpu: dict[str, list[float]] = {}
    for size in args.sizes:
        buf = np.zeros(size, dtype=np.uint8)
        for avg in args.skews:
            top = 3 * avg / 1e6  # max skew; average skew = max / 3
            for variant in ("binomial", "nic-mcast"):
                mine = []
                comm.Bcast(buf, root=0, algorithm=variant)  # groups posted, costs measured
                for i in range(args.warmup + args.iters):
                    comm.Barrier()
                    s = float(rng.uniform(-top / 2, top / 2)) if rank else 0.0
                    if s > 0:
                        busy_cpu(s)
                    c0 = host_cpu()
                    comm.Bcast(buf, root=0, algorithm=variant)
                    if i >= args.warmup:
                        mine.append((host_cpu() - c0) * 1e6)
                cpu[f"{size} {avg:g} {variant}"] = mine
    gathered = comm.gather(cpu, 0)
    if rank == 0:
        assert gathered is not None
        summary = {key: float(np.mean([np.mean(g[key]) for g in gathered[1:]])) for key in cpu}
        _write(args.out, args, n, {"cpu_us_per_rank": gathered[1:], "mean_cpu_us": summary,
                                   "mcast": _mpi_mcast_stats()})  # fmt: skip


def _mpi_mcast_stats() -> object:
    return emucluster.mpi.stats().get("mcast", {})


def _write(path: str, args: argparse.Namespace, nodes: int, extra: dict[str, Any]) -> None:
    env = {k: v for k, v in os.environ.items() if k.startswith("EMU_")}
    report = {"parameters": {k: v for k, v in vars(args).items() if k != "func"} | {
        "nodes": nodes}, "environment": env, **extra}  # fmt: skip
    write_json(path, report)


# -- the sweep ----------------------------------------------------------------------------------


def _job(
    nodes: int, fig: str, wait: str, extra: list[str], emurun: tuple[str, ...] = ()
) -> tuple[dict[str, Any], str]:
    # not quiet: emurun's "nodes ready" line on stderr is kept as the job's launch note
    result, proc = run_emurun_json(nodes, "emubench.mcast", [fig, *extra], {"EMU_WAIT": wait},
                                   emurun_args=emurun, quiet=False, capture=True)  # fmt: skip
    ready = [line for line in proc.stderr.splitlines() if "nodes ready" in line]
    return result, (ready[0] if ready else "")


def sweep(args: argparse.Namespace) -> None:
    """Run every figure's jobs, write JSON and PNG per figure under ``--out-dir``
    (``--dilate``: only Fig 7 at the paper's operating point, `emubench.skew_dilated`)."""
    if skew_dilated.wanted(args):
        nodes, sizes = max(args.nodes), args.dilate_sizes or args.skew_sizes or [4, 4096]
        skew_dilated.run("mcast", args, nodes=nodes, wait="spin", calib_size=4, series=sizes,
                         jobs=skew_dilated.mcast_jobs(args, nodes, sizes),
                         out=os.path.join(args.out_dir, "mcast_fig7_dilated.json"))  # fmt: skip
        return
    args.load_before = load_average()
    out = args.out_dir
    common = ["--iters", str(args.iters), "--warmup", str(args.warmup)]
    figs = set(args.figs)
    if "4" in figs:
        r, ready = _job(9, "fig4", args.wait, [*common, "--sizes", *map(str, FIG4_SIZES)])
        table = {}
        for key, xs in r["samples_us"].items():
            table[key] = median(xs)
        _save(out, 4, args, {"wait_policy": f"{args.wait} (idle nodes block)", "launch": ready,
                             "run": r, "median_us": table, "paper": PAPER})  # fmt: skip
    for fig, sizes in ((5, FIG5_SIZES), (6, FIG6_SIZES)):
        if str(fig) not in figs:
            continue
        runs = {}
        for nodes in args.nodes:
            runs[str(nodes)] = _latency_job(nodes, fig, args.wait, [*common, "--sizes",
                                            *map(str, sizes)])  # fmt: skip
        report: dict[str, Any] = {"wait_policy": args.wait, "runs": runs, "paper": PAPER}
        if fig == 5 and "5ff" in figs:  # §5.2's other order: forward before delivering
            nodes = max(args.nodes)
            report["forwarding_order"] = {"nodes": nodes} | {
                name: _latency_job(nodes, 5, args.wait, [*common, "--sizes", "4", "16384"], nicd)
                for name, nicd in (("deliver-first", ()),
                                   ("forward-first", ("--nicd-args=--mcast-forward-first",)))
            }  # fmt: skip
        _save(out, fig, args, report)
    if "7" in figs:
        skews = ["--skews", *map(str, args.skews), "--iters", str(args.skew_iters),
                 "--warmup", "3"]  # fmt: skip
        runs = {}
        for nodes in args.nodes:
            sizes = args.skew_sizes or (SMALL + LARGE if nodes == max(args.nodes) else [4, 4096])
            r, ready = _job(nodes, "skew", "spin", [*skews, "--sizes", *map(str, sizes)])
            runs[str(nodes)] = {"launch": ready, "run": r}
        _save(out, 7, args, {"wait_policy": "spin (waiting burns CPU, as GM polling)", "runs": runs,
                       "paper": PAPER})  # fmt: skip


def _latency_job(nodes: int, fig: int, wait: str, extra: list[str],
                 emurun: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    r, ready = _job(nodes, f"fig{fig}", wait, extra, emurun)
    return {"launch": ready, "run": r, "latency_us": _max_over_leaves(r)}


def _max_over_leaves(r: dict[str, Any]) -> dict[str, float]:
    """Per (size, variant): the largest median over the leaves tried (§7.1's maximum)."""
    best: dict[str, float] = {}
    for key, xs in r["samples_us"].items():
        size, variant, _ = key.split()
        k = f"{size} {variant}"
        best[k] = max(best.get(k, 0.0), median(xs))
    return best


FIG4_SIZES = [4, 64, 128, 512, 2048, 8192, 16384]
FIG5_SIZES = [4, 128, 512, 2048, 4096, 16384]
FIG6_SIZES = [4, 128, 512, 2048, 8192, 16000]
SMALL = [2, 4, 8]
LARGE = [2048, 4096, 8192]


def _save(out: str, fig: int, args: argparse.Namespace, report: dict[str, Any]) -> None:
    report["command"] = command_line("mcast", args.argv)
    report["environment"] = environment(args.load_before, wait_policy=report["wait_policy"])
    mcast_plot.summarise(fig, report)
    path = os.path.join(out, f"mcast_fig{fig}.json")
    write_json(path, report)

    mcast_plot.draw(fig, report, path.removesuffix(".json") + ".png")
    print(f"wrote {path}", flush=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point: one figure's rank side (under emurun), or ``sweep``."""
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="emubench mcast")
    p.add_argument("what", choices=("fig4", "fig5", "fig6", "skew", "sweep"))
    p.add_argument("--out", default="mcast.json")
    p.add_argument("--out-dir", default="docs/figures")
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--sizes", type=int, nargs="+", default=[4, 1024])
    p.add_argument("--dests", type=int, nargs="+", default=[3, 4, 8])
    p.add_argument("--nodes", type=int, nargs="+", default=[4, 8, 16])
    p.add_argument("--skews", type=float, nargs="+", default=[0, 50, 100, 200, 400],
                   help="average skews in us (max = 3 x average)")  # fmt: skip
    p.add_argument("--skew-iters", type=int, default=60)
    p.add_argument(
        "--skew-sizes",
        type=int,
        nargs="+",
        help="sizes of the skew runs (default:"
        " 2 4 8 2048 4096 8192 B at the largest node count, 4 B and 4 KiB below)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--figs", nargs="+", default=["4", "5", "6", "7"])
    p.add_argument("--wait", default="hybrid", choices=("spin", "block", "hybrid"),
                   help="wait policy of the latency figures 4-6 (7-8 always spin)")  # fmt: skip
    skew_dilated.add_arguments(p)
    args = p.parse_args(argv)
    if args.what == "sweep":
        args.argv = argv
    {"fig4": fig4, "fig5": fig5, "fig6": fig6, "skew": skew, "sweep": sweep}[args.what](args)


if __name__ == "__main__":
    main()
