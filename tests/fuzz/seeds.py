"""Valid inputs to start each target's corpus from: every record class, message and packet
kind encoded once, the checked-in wire vectors and the stock NICVM modules.

Only `python -m tests.fuzz.run --seed` uses this (it needs hypothesis for the host-link records);
the committed corpus is what the fuzzer grew from these.
"""

from __future__ import annotations

import warnings
from dataclasses import fields
from pathlib import Path

from launcher import control
from launcher.forkserver import records as fs
from nicd import hostlink as hl
from nicd.link import bundle, wire
from nicd.nicvm import modules
from nicd.nicvm.packet import encode_preamble
from tests.fuzz.targets import join_records

__all__ = ["SEEDS"]

_VECTORS = Path(__file__).parents[1] / "unit" / "vectors"
MAX_SEED_BYTES = 4096


def _vector(path: Path) -> bytes:
    digits = "".join(line.split("#")[0].strip() for line in path.read_text().splitlines())
    return bytes.fromhex(digits)


def wire_seeds() -> list[bytes]:
    frames = [_vector(p) for p in sorted(_VECTORS.glob("*.hex"))]
    nicvm = wire.DataPacket(
        wire.MsgType.NICVM_DATA,
        wire.FragFlags.ONLY,
        1,
        7,
        0,
        3,
        1,
        3,
        24,
        0,
        encode_preamble("bcast", 0, 5, 1) + b"x" * 11,
    )
    sack = wire.ControlPacket(wire.MsgType.SACK, 9, 1, 0, 3, 3, sack=0b1011)
    frames += [wire.encode(nicvm), wire.encode(sack)]
    return [*frames, bundle.encode_bundle(frames[:3])]


def hostlink_seeds() -> list[bytes]:
    from hypothesis.errors import NonInteractiveExampleWarning

    from tests.unit.hostlink_strategies import STRATEGIES

    seeds: list[bytes] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonInteractiveExampleWarning)
        for strategy in STRATEGIES.values():
            for _ in range(20):  # a small example: the corpus stays small
                seed = join_records(hl.encode_record(strategy.example()))
                if len(seed) <= MAX_SEED_BYTES:
                    seeds.append(seed)
                    break
    # a payload in three records (head, CONT, CONT), small: the head states the total length
    payload = bytes(range(250)) + bytes(50)
    (whole,) = hl.encode_record(hl.SendReq(1, 2, 3, payload))
    head = len(whole) - len(payload)
    cont = bytes((hl.HostOp.CONT,))
    parts = [whole[: head + 100], cont + payload[100:200], cont + payload[200:]]
    seeds.append(join_records(parts))
    return seeds


def control_seeds() -> list[bytes]:
    from tests.unit.launcher.test_control import SAMPLES

    seeds = []
    for cls in control.MESSAGES.values():
        message = cls(**{f.name: SAMPLES[f.name] for f in fields(cls)})
        seeds.append(control.encode_message(message)[4:])  # type: ignore[arg-type]
    seeds.append(b"".join(control.encode_message(control.Ping()) for _ in range(2)))
    return seeds


def forkserver_seeds() -> list[bytes]:
    req = fs.Request(["python", "app.py"], {"EMU_RANK": "1"}, "/tmp", [0, 1, 2], [0, 1])
    hello = fs.Hello(42, "/usr/bin/python3", {"LANG": "C"}, ["/lib"], ["nicd"], [])
    reports: list[fs.Report] = [
        fs.Started(9),
        fs.Refused("no"),
        fs.Exited(-9, 0.5, 0.25, 0.125),
        fs.Exited(0, 0.5, 0.25, None),
    ]
    return [
        fs.encode_request(req),
        fs.encode_hello(hello),
        *(fs.encode_report(r) for r in reports),
    ]


def nicvm_seeds() -> list[bytes]:
    return [s.encode() for s in (modules.BCAST_BINARY_TREE, modules.NOOP, modules.SCALE_F64)]


SEEDS = {
    "wire": wire_seeds,
    "hostlink": hostlink_seeds,
    "control": control_seeds,
    "forkserver": forkserver_seeds,
    "nicvm": nicvm_seeds,
}
"""Target name -> the function making its seed inputs."""
