"""The measured targets of the dead-peer rule (issue 14) on the fake-clock netsim, and a way to
print them for the note: ``PYTHONPATH=. python -m tests.unit.livesim [--seeds N]``.

Two kinds of run, both with production timers (only the MTU is small). A *live* run: node 0
sends node 1 a message every ``every_s`` for ``horizon_s`` over a link losing ``loss`` of the
datagrams each way (plus 2 % duplication and reordering), while node 1 accepts, refuses
NO_BUFFER (its port is open without receive tokens) or refuses NO_PORT (its port was closed);
any PeerDead or ``peer_dead`` failure there is a false death. A *kill* run: the same sender,
node 1 cut off at ``KILL_AT_S``; the detection time is from the cut to node 0's PeerDead.
Besides the simulated peer-seconds, a live run counts the *watched* seconds: the time node 0
had data outstanding to node 1, the only time the rule can kill (it probes only then).
:mod:`tests.unit.nicd.test_liveness` asserts the targets over the seeds; this module owns the
runs and the printout.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from dataclasses import dataclass
from typing import Literal

from nicd.config import TransportConfig
from tests.unit.netsim import BadNetwork, Net

__all__ = [
    "KILL_AT_S",
    "LOSS",
    "Detection",
    "LiveRun",
    "Peer",
    "detection_run",
    "live_config",
    "live_run",
    "main",
]

LOSS = 0.3
KILL_AT_S = 1.0
Peer = Literal["accepting", "no_buffer", "no_port"]


def live_config(**overrides: object) -> TransportConfig:
    """The production transport settings, with a small MTU and message bound."""
    fields: dict[str, object] = {"mtu": 256, "max_message": 1 << 16}
    fields.update(overrides)
    return TransportConfig(**fields)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class LiveRun:
    """What one live run measured."""

    simulated_s: float
    watched_s: float
    """Time node 0 had data outstanding to node 1 (it probes, and could kill, only then)."""
    false_deaths: int
    """PeerDead records plus ``peer_dead`` failures at node 0 (a live peer: all false)."""
    failures: dict[str, int]
    """Node 0's failed sends by reason."""
    probes: int
    delivered: int


@dataclass(frozen=True, slots=True)
class Detection:
    """What one kill run measured."""

    detected_after_s: float | None
    """From the cut to node 0's PeerDead; None when it never came."""
    failures: dict[str, int]


def _network(seed: int, loss: float) -> BadNetwork:
    with contextlib.redirect_stdout(io.StringIO()):  # the seed is in the caller's message
        return BadNetwork(seed, loss=loss, dup=0.02, reorder=0.02)


def _peer_net(seed: int, loss: float, peer: Peer, config: TransportConfig) -> Net:
    net = Net(2, config, _network(seed, loss))
    if peer == "no_buffer":
        net.nodes[1].ports.open(0, tokens=0)  # a host that never posts receive buffers
    elif peer == "no_port":
        net.nodes[1].ports.close(0)  # a host that closed its port
    return net


def _drive(
    net: Net, *, every_s: float, until_s: float, end_s: float, size: int = 300
) -> tuple[float, float]:
    """Node 0 sends node 1 a ``size``-byte message every ``every_s`` until ``until_s`` (or
    node 1 is declared dead), and the net runs until ``end_s``. Return the seconds node 0
    watched node 1 and when it declared it dead (infinity: never)."""
    transport = net.nodes[0].transport
    watched = 0.0
    died = float("inf")
    next_send = 0.0
    while net.now < end_s:
        sending = next_send < until_s and not net.nodes[0].dead
        if sending and next_send <= net.now:
            net.send(0, 1, b"m" * size)
            next_send += every_s
        stop = min(end_s, next_send) if sending else end_s
        was_watched = 1 in transport.liveness.watched  # the harness measures it
        before = net.now
        when = net.next_time()
        if when is None or when > stop:
            net.now = max(net.now, stop)
        else:
            net.step()
        if was_watched:
            watched += net.now - before
        if net.nodes[0].dead and died == float("inf"):
            died = net.now
    return watched, died


def live_run(
    seed: int,
    *,
    peer: Peer,
    loss: float = LOSS,
    horizon_s: float = 100.0,
    every_s: float = 0.5,
    size: int = 300,
    config: TransportConfig | None = None,
) -> LiveRun:
    """Node 0 sends to a live node 1 for ``horizon_s``; count false deaths."""
    net = _peer_net(seed, loss, peer, config or live_config())
    watched, _ = _drive(net, every_s=every_s, until_s=horizon_s, end_s=horizon_s, size=size)
    node = net.nodes[0]
    failures: dict[str, int] = {}
    for f in node.failed:
        failures[f.reason] = failures.get(f.reason, 0) + 1
    probes = node.transport.stats()["probes_sent"]
    assert isinstance(probes, int)
    return LiveRun(
        simulated_s=net.now,
        watched_s=watched,
        false_deaths=len(node.dead) + failures.get("peer_dead", 0),
        failures=failures,
        probes=probes,
        delivered=len(net.nodes[1].delivered),
    )


def detection_run(
    seed: int, *, loss: float, peer: Peer = "accepting", config: TransportConfig | None = None
) -> Detection:
    """Node 0 sends to node 1 every 50 ms; node 1 is cut off at ``KILL_AT_S``."""
    net = _peer_net(seed, loss, peer, config or live_config())
    bad = net.route
    assert isinstance(bad, BadNetwork)
    bad.cut_off(1, at=KILL_AT_S)
    _, died = _drive(net, every_s=0.05, until_s=KILL_AT_S + 10.0, end_s=KILL_AT_S + 10.0)
    failures: dict[str, int] = {}
    for f in net.nodes[0].failed:
        failures[f.reason] = failures.get(f.reason, 0) + 1
    after = None if died == float("inf") else died - KILL_AT_S
    return Detection(after, failures)


def main(argv: list[str] | None = None) -> None:
    """Print the measured figures: false deaths over the simulated and watched peer-seconds
    for each kind of peer, and the worst detection time of a killed peer."""
    parser = argparse.ArgumentParser(prog="python -m tests.unit.livesim", description=__doc__)
    parser.add_argument("--seeds", type=int, default=100, help="live runs per kind of peer")
    parser.add_argument("--horizon", type=float, default=100.0, help="seconds per live run")
    parser.add_argument("--busy-seeds", type=int, default=20, help="runs of the busy sender")
    parser.add_argument("--kill-seeds", type=int, default=50, help="kill runs per loss rate")
    args = parser.parse_args(argv)
    print(f"live peer, {LOSS:.0%} loss each way (+2 % dup, 2 % reorder), production timers:")
    cases: list[tuple[str, Peer, float, int]] = [
        ("accepting, a message every 0.5 s", "accepting", 0.5, args.seeds),
        ("accepting, a message every 10 ms", "accepting", 0.01, args.busy_seeds),
        ("no_buffer, a message every 0.5 s", "no_buffer", 0.5, args.seeds),
        ("no_port, a message every 0.5 s", "no_port", 0.5, args.seeds),
    ]
    for label, peer, every_s, seeds in cases:
        runs = [
            live_run(s, peer=peer, horizon_s=args.horizon, every_s=every_s) for s in range(seeds)
        ]
        failures: dict[str, int] = {}
        for run in runs:
            for reason, count in run.failures.items():
                failures[reason] = failures.get(reason, 0) + count
        print(
            f"  {label}: {sum(r.simulated_s for r in runs):.0f} peer-s simulated, "
            f"{sum(r.watched_s for r in runs):.0f} watched, "
            f"{sum(r.false_deaths for r in runs)} false deaths, "
            f"{sum(r.probes for r in runs)} probes, failures {failures or 'none'}"
        )
    print(f"killed peer (cut at {KILL_AT_S:g} s, sends every 50 ms):")
    for loss in (0.0, LOSS):
        for peer in ("accepting", "no_buffer"):
            times = [
                detection_run(s, loss=loss, peer=peer).detected_after_s
                for s in range(args.kill_seeds)
            ]
            found = [t for t in times if t is not None]
            spread = f"worst {max(found):.3f} s, best {min(found):.3f} s" if found else ""
            print(f"  {loss:4.0%} loss, {peer:9}: detected in {len(found)}/{len(times)}, {spread}")


if __name__ == "__main__":
    main()
