"""VM micro-benchmark: ns per instruction and per invocation, and compile time (thesis §4.2.1).

``emubench nicvm-vm [--json FILE]``. Times with the standard library's ``timeit``
(its autorange picks the loop count; the median of several repeats is reported, the raw repeats
go to the JSON). Cases: the Fig 4.3 module at the root of 16 nodes, a no-op module (Fig 4.10's
echo), a float64 payload transform over 4 KiB, and a counting loop for the bare instruction rate.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import timeit
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from emubench.common import command_line, environment, load_average, print_table, write_json
from nicd.nicvm.compiler import compile_module
from nicd.nicvm.limits import MAX_FUEL
from nicd.nicvm.modules import BCAST_BINARY_TREE, NOOP, SCALE_F64
from nicd.nicvm.vm import Outcome, Packet, run

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Sample", "main", "measure"]

REPEATS = 7
LOOP = """\
func main()
    var i;
    while i < 10000 do
        i = i + 1;
    end while;
    return NICVM_RESULT_SUCCESS;
end func;
"""


@dataclass(frozen=True, slots=True)
class Sample:
    case: str
    instructions: int  # per invocation (0 for compile cases)
    ns_per_call: float  # median over the repeats
    ns_per_instruction: float | None
    repeats_ns: list[float]


def _time(fn: Callable[[], object]) -> list[float]:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return [total / number * 1e9 for total in timer.repeat(REPEATS, number)]


def measure() -> list[Sample]:
    """Run every case and return its samples."""
    samples = []
    for name, source in (("compile Fig 4.3", BCAST_BINARY_TREE), ("compile scale-f64", SCALE_F64)):
        runs = _time(lambda source=source: compile_module(source))  # type: ignore[misc]
        samples.append(Sample(name, 0, statistics.median(runs), None, runs))
    cases = (
        ("run Fig 4.3 (root of 16)", BCAST_BINARY_TREE, Packet(0, 16, 0, [0] * 4, bytearray(32))),
        ("run Fig 4.3 (leaf of 16)", BCAST_BINARY_TREE, Packet(15, 16, 0, [0] * 4, bytearray(32))),
        ("run no-op", NOOP, Packet(0, 2, 0, [0] * 4, bytearray(32))),
        ("run scale-f64, 4 KiB", SCALE_F64, Packet(0, 1, 0, [1, 0, 0, 0], bytearray(4096))),
        ("run counting loop", LOOP, Packet(0, 1, 0, [0] * 4, bytearray())),
    )
    for name, source, ctx in cases:
        module = compile_module(source)
        first = run(module, ctx, fuel=MAX_FUEL)
        assert first.outcome is Outcome.OK, first
        runs = _time(lambda module=module, ctx=ctx: run(module, ctx, fuel=MAX_FUEL))  # type: ignore[misc]
        per_call = statistics.median(runs)
        samples.append(Sample(name, first.fuel_used, per_call, per_call / first.fuel_used, runs))
    return samples


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``emubench nicvm-vm``."""
    parser = argparse.ArgumentParser(prog="emubench nicvm-vm", description=__doc__)
    parser.add_argument("--json", type=pathlib.Path, help="also write the samples here")
    args = parser.parse_args(argv)
    load_before = load_average()
    samples = measure()
    print_table(
        f"NICVM micro-benchmark (median of {REPEATS} repeats)",
        ("case", "instructions", "us / call", "ns / instruction"),
        [
            (
                s.case,
                s.instructions or "",
                f"{s.ns_per_call / 1000:.2f}",
                "" if s.ns_per_instruction is None else f"{s.ns_per_instruction:.0f}",
            )
            for s in samples
        ],
    )
    if args.json is not None:
        report = {
            "benchmark": "nicvm-vm",
            "command": command_line("nicvm-vm", sys.argv[1:] if argv is None else argv),
            "environment": environment(load_before),
            "parameters": {"repeats": REPEATS, "timer": "timeit autorange, median"},
            "samples": [asdict(s) for s in samples],
        }
        write_json(args.json, report, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
